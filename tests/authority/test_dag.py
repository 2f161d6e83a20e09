"""``work.add_dependencies``: edges into a WorkItem authorized earlier, recorded by the Authority
(the evolving DAG, MW-10.4-a) and enforced on offers (MW-10.4-b); self-loops, cycles, unknown
and other Missions' ids, non-open WorkItems and non-coordinators are refused and write nothing
(MW-10.4-c)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from missionweave.authority import SubmitResult, verify_log
from missionweave.protocol import Actor
from tests.support.world import World, make_world


def _deps(w: World, wid: str) -> list[str]:
    rows = w.authority.query(
        "SELECT dependencies FROM work_items WHERE group_id=? AND work_item_id=?", w.group, wid
    )
    return list(json.loads(rows[0]["dependencies"]))


def _add(w: World, wid: str, deps: list[str], actor: Actor | None = None) -> SubmitResult:
    return w.submit(
        actor or w.coordinator, "work.add_dependencies", {"work_item_id": wid, "dependencies": deps}
    )


def test_an_edge_into_an_open_item_is_recorded_and_enforced__MW_10_4_a__MW_10_4_b(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("inventory")
    w.authorize("sbom", ["inventory"])
    w.authorize("verify-1", ["inventory"])
    r = _add(w, "sbom", ["verify-1", "inventory"])
    assert r.accepted, r.rejection
    (ev,) = r.events
    assert ev.type == "work.dependencies_added" and ev.work_item_id == "sbom"
    assert ev.body == {
        "mission_id": "m1",
        "added": ["verify-1"],
        "dependencies": ["inventory", "verify-1"],
        "revision": 2,
    }
    assert _deps(w, "sbom") == ["inventory", "verify-1"]
    # the Authority now refuses to offer sbom before verify-1 is verified
    w.run_to_verified("inventory", w.workers[0])
    ada = w.workers[0].agent_id
    early = w.submit(w.coordinator, "work.offer", w.offer_body("sbom", ada, expires_in_ms=1000))
    assert early.rejection is not None and early.rejection.code == "dependencies_unmet"
    assert early.rejection.detail["dependencies"]["verify-1"] == "open"
    w.run_to_verified("verify-1", w.workers[1])
    w.run_to_verified("sbom", w.workers[0])
    verify_log(w.authority.store, w.group, w.authority.public_key)


@pytest.mark.parametrize(
    ("wid", "deps", "code"),
    [
        ("b", ["b"], "self_loop"),
        ("a", ["b"], "cycle"),  # b already depends on a
        ("b", ["ghost"], "unknown_id"),
        ("ghost", ["a"], "unknown_id"),
        ("b", [], "invalid_body"),
        ("b", ["other-mission-item"], "unknown_id"),
        ("started", ["a"], "not_open"),
    ],
)
def test_bad_edges_are_refused_and_write_nothing__MW_10_4_c(
    tmp_path: Path, wid: str, deps: list[str], code: str
) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.authorize("b", ["a"])
    w.authorize("started")
    w.run_to_verified("started", w.workers[0])
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2"})
    w.ok(w.coordinator, "work.authorize", w.authorization("other-mission-item", mission="m2"))
    head = w.authority.head(w.group)
    r = _add(w, wid, deps)
    assert r.rejection is not None and r.rejection.code == code, r.rejection
    assert w.authority.head(w.group) == head
    assert _deps(w, "b") == ["a"] and _deps(w, "a") == []


def test_only_the_coordinator_adds_edges__MW_10_4_c(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.authorize("b")
    r = _add(w, "b", ["a"], actor=w.workers[0])
    assert r.rejection is not None and r.rejection.code == "role_not_allowed"
    assert _deps(w, "b") == []


def test_added_dependencies_are_a_new_contract_revision__MW_10_1_a__MW_10_1_c(
    tmp_path: Path,
) -> None:
    """The dependency list is bound to the contract's revision: an edge added to an open
    WorkItem increments the revision (row, stored contract and Event agree), an acceptance made
    against the revision before it is refused ``stale_revision``, and adding only edges it has
    already changes nothing."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.authorize("c")
    w.authorize("b", ["a"])
    assert w.item("b")["revision"] == 1
    r = _add(w, "b", ["c"])
    assert r.accepted, r.rejection
    assert r.events[0].body["revision"] == 2
    row = w.item("b")
    assert row["revision"] == 2 and json.loads(row["contract"])["revision"] == 2
    again = _add(w, "b", ["a", "c"])  # nothing new: the same revision
    assert again.accepted and again.events[0].body == {
        "mission_id": "m1",
        "added": [],
        "dependencies": ["a", "c"],
        "revision": 2,
    }
    assert w.item("b")["revision"] == 2
    ada = w.workers[0]
    w.run_to_verified("a", ada)
    w.run_to_verified("c", ada)
    offered = w.ok(w.coordinator, "work.offer", w.offer_body("b", ada.agent_id, expires_in_ms=5000))
    (offer,) = [e for e in offered.events if e.type == "work.offered"]
    assert offer.body["revision"] == 2
    head = w.authority.head(w.group)
    stale = w.submit(
        ada,
        "work.accept_offer",
        {"work_item_id": "b", "offer_id": offer.body["offer_id"], "revision": 1},
    )
    assert stale.rejection is not None and stale.rejection.code == "stale_revision"
    assert w.authority.head(w.group) == head  # the refusal wrote nothing
    assert w.accept(ada, "b", str(offer.body["offer_id"])).accepted  # revision 2 is taken
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_the_reducer_follows_the_revision_of_added_dependencies__MW_10_1_a(
    tmp_path: Path,
) -> None:
    """The one reducer (workflow and agent) reads the same revision as the Authority's row."""
    from missionweave.protocol import WorkItemFacts, reduce_work_item

    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.authorize("b")
    assert _add(w, "b", ["a"]).accepted
    facts = WorkItemFacts()
    for e in w.authority.events(w.group):
        if e.work_item_id == "b":
            facts = reduce_work_item(facts, e)
    assert facts.revision == w.item("b")["revision"] == 2
