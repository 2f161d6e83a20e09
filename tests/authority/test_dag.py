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
from tests.world import World, make_world


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
