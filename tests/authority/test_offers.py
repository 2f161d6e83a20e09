"""Offers, acceptance and ownership (spec 10.1, 10.3) on a real Authority."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from missionweave.authority import Authority
from missionweave.protocol import Actor
from tests.support.contracts import contract
from tests.support.world import basis, make_world


def test_offer_reserves_no_ownership_and_is_durable__MW_10_3_a(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    offline = Actor.generate("offline-worker")  # a member that never opened a session
    w.ok(
        w.coordinator,
        "member.add",
        {"agent_id": offline.agent_id, "public_key": offline.public_key, "roles": ["worker"]},
    )
    offline.membership_epochs[w.group] = 1
    w.authorize("a")
    offer_id = w.offer("a", offline, expires_in_ms=60_000)
    item = w.item("a")
    assert item["state"] == "offered" and item["owner"] is None and item["ownership_epoch"] == 0
    offered = [e for e in w.authority.all_events(w.group) if e.type == "work.offered"]
    assert offered[-1].body["expires_at_ms"] == w.clock.now + 60_000
    # Reopened later (a fresh Authority on the same file), the offer is still there.
    again = Authority(w.authority.db_path, w.authority.key, clock=w.clock)
    assert (
        again.query("SELECT status FROM offers WHERE offer_id=?", offer_id)[0]["status"] == "open"
    )


def test_candidate_set_first_acceptance_wins_and_losers_withdrawn__MW_10_3_c(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db", n_workers=3)
    w.authorize("a", urgency="urgent")
    offer_id = w.offer("a", *w.workers)
    first = w.accept(w.workers[1], "a", offer_id)
    assert first.accepted
    accepted, withdrawn = first.events
    assert accepted.type == "work.offer_accepted" and accepted.body["ownership_epoch"] == 1
    assert withdrawn.type == "offer.withdrawn"
    assert sorted(withdrawn.body["candidates"]) == ["worker-0", "worker-2"]
    assert withdrawn.command_id == accepted.command_id  # one transaction, one command
    late = w.accept(w.workers[0], "a", offer_id)
    assert late.status == "rejected" and late.rejection is not None
    assert late.rejection.code == "offer_closed"


def test_candidate_set_needs_urgency__MW_10_3_b(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    r = w.submit(
        w.coordinator,
        "work.offer",
        w.offer_body("a", "worker-0", "worker-1", expires_in_ms=1000),
    )
    assert r.rejection is not None and r.rejection.code == "candidate_set_not_allowed"


def test_two_connections_accept_at_once_exactly_one_wins__MW_10_3_c(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db", n_workers=2)
    w.authorize("a", urgency="urgent")
    offer_id = w.offer("a", *w.workers)
    cmds = [
        a.command(
            "work.accept_offer",
            w.group,
            {"work_item_id": "a", "offer_id": offer_id, "revision": 1},
            issued_at_ms=w.clock.now,
        )
        for a in w.workers
    ]
    auths = [Authority(w.authority.db_path, w.authority.key, clock=w.clock) for _ in cmds]
    barrier = threading.Barrier(len(cmds))
    results: list[str] = [""] * len(cmds)

    def go(i: int) -> None:
        barrier.wait()
        results[i] = auths[i].submit(cmds[i]).status

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(cmds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["accepted", "rejected"]
    item = w.authority.work_item(w.group, "a")
    assert item is not None and item["ownership_epoch"] == 1
    accepted = [e for e in w.authority.all_events(w.group) if e.type == "work.offer_accepted"]
    assert len(accepted) == 1


def test_expired_offer_cannot_be_accepted_and_expiry_writes_nothing__MW_10_3_a(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    offer_id = w.offer("a", w.workers[0], expires_in_ms=1000)
    head = w.authority.head(w.group)
    w.clock.advance(1000)
    assert w.authority.head(w.group) == head  # expiry itself adds no Event
    r = w.accept(w.workers[0], "a", offer_id)
    assert r.rejection is not None and r.rejection.code == "offer_expired"
    assert w.authority.head(w.group) == head and w.item("a")["state"] == "offered"


def test_decline_carries_structured_reason__MW_10_3_e(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    offer_id = w.offer("a", w.workers[0])
    bad = w.submit(
        w.workers[0],
        "work.decline_offer",
        {"work_item_id": "a", "offer_id": offer_id, "reason": "I am busy today"},
    )
    assert bad.rejection is not None and bad.rejection.code == "invalid_body"
    r = w.ok(
        w.workers[0],
        "work.decline_offer",
        {
            "work_item_id": "a",
            "offer_id": offer_id,
            "reason": "capacity",
            "detail": {"free_slots": 0},
        },
    )
    ev = r.events[0]
    assert ev.type == "work.offer_declined" and ev.body["reason"] == "capacity"
    assert ev.body["standard_reason"] is True and ev.body["all_declined"] is True
    assert w.item("a")["state"] == "offered"


def test_assignment_records_selection_basis_without_prose__MW_10_3_f(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    base = {"work_item_id": "a", "candidates": ["worker-0"], "expires_at_ms": w.clock.now + 1000}
    missing = w.submit(w.coordinator, "work.offer", base)
    assert missing.rejection is not None and missing.rejection.code == "selection_basis_required"
    prose = w.submit(
        w.coordinator,
        "work.offer",
        {
            **base,
            "selection_basis": {
                "worker-0": {"rank": 1, "chain_of_thought": "I think worker-0 because..."}
            },
        },
    )
    assert prose.rejection is not None and prose.rejection.code == "invalid_body"
    basis = {
        "capability_matches": ["dist.verify@1.0"],
        "authorization_eligible": True,
        "availability_estimate_ms": 0,
        "expected_cost_minor_units": 5,
        "reliability": {"dist.verify:ok": 9, "dist.verify:fail": 1},
        "policy_rules": ["sequential"],
        "rank": 1,
    }
    r = w.ok(w.coordinator, "work.offer", {**base, "selection_basis": {"worker-0": basis}})
    assert r.events[-1].body["authority_checks"]  # what the Authority checked is recorded
    acc = w.accept(w.workers[0], "a", str(r.reply["offer_id"]))
    assert acc.events[0].body["selection_basis"] == basis


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({}, None),
        ("all", "selection_basis_incomplete"),  # {"worker-0": {}}
        ({"authorization_eligible": None}, "selection_basis_incomplete"),
        ({"availability_estimate_ms": None}, "selection_basis_incomplete"),
        ({"expected_cost_minor_units": None}, "selection_basis_incomplete"),
        ({"policy_rules": []}, "selection_basis_incomplete"),
        ({"authorization_eligible": False}, "selection_basis_untrue"),
        ({"capability_matches": []}, "selection_basis_untrue"),
        ({"capability_matches": ["other.cap@1.0"]}, "selection_basis_untrue"),
        ({"reliability": {}}, "selection_basis_untrue"),
    ],
)
def test_an_incomplete_or_untrue_selection_basis_is_refused__MW_10_3_f(
    tmp_path: Path, change: dict[str, Any] | str, code: str | None
) -> None:
    """Every fact of MW-10.3-f stated, none contradicting what the Authority knows; a refusal
    writes nothing."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    full = basis(["dist.verify@1.0"])
    given = {} if change == "all" else {**full, **change}  # type: ignore[dict-item]
    w.judged(code, w.coordinator, "work.offer",
             w.offer_body("a", "worker-0", selection_basis={"worker-0": given}))  # fmt: skip


def test_a_basis_claiming_capabilities_off_the_agents_card_is_refused__MW_10_3_f(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    ada = w.workers[0]
    card = {"agent_id": ada.agent_id, "public_key": ada.public_key,
            "capabilities": ["dist.verify@1.2"], "max_concurrency": 2}  # fmt: skip
    w.ok(ada, "agent.publish_card", {"card": card})
    w.authorize("a")
    r = w.submit(w.coordinator, "work.offer", w.offer_body("a", ada.agent_id))
    assert r.rejection is not None and r.rejection.code == "selection_basis_untrue"
    on_card = {ada.agent_id: basis(["dist.verify@1.2"])}
    r = w.submit(w.coordinator, "work.offer",
                 w.offer_body("a", ada.agent_id, selection_basis=on_card))  # fmt: skip
    assert r.accepted, r.rejection


def test_ambiguous_contract_cannot_be_accepted_until_reoffered__MW_10_1_b(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a", open_questions=["which Python environment?"])
    offer_id = w.offer("a", w.workers[0])
    r = w.accept(w.workers[0], "a", offer_id)
    assert r.rejection is not None and r.rejection.code == "contract_ambiguous"
    fixed = contract(revision=2, objective="check the files of one distribution in /venv")
    r2 = w.ok(w.coordinator, "work.offer", w.offer_body("a", "worker-0", contract=fixed.wire()))
    assert [e.type for e in r2.events][:1] == ["work.contract_revised"]
    assert w.accept(w.workers[0], "a", str(r2.reply["offer_id"])).accepted


def test_material_revision_needs_new_revision_and_fresh_acceptance__MW_10_1_c(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    old_offer = w.offer("a", w.workers[0])
    same_rev = contract(objective="something else entirely")
    r = w.submit(
        w.coordinator, "work.offer", w.offer_body("a", "worker-0", contract=same_rev.wire())
    )
    assert r.rejection is not None and r.rejection.code == "revision_required"
    revised = contract(revision=2, objective="something else entirely")
    r = w.ok(w.coordinator, "work.offer", w.offer_body("a", "worker-0", contract=revised.wire()))
    stale = w.submit(
        w.workers[0],
        "work.accept_offer",
        {"work_item_id": "a", "offer_id": old_offer, "revision": 1},
    )
    assert stale.rejection is not None and stale.rejection.code == "offer_closed"
    old_rev = w.submit(
        w.workers[0],
        "work.accept_offer",
        {"work_item_id": "a", "offer_id": r.reply["offer_id"], "revision": 1},
    )
    assert old_rev.rejection is not None and old_rev.rejection.code == "stale_revision"
    assert w.accept(w.workers[0], "a", str(r.reply["offer_id"])).accepted


def test_authorize_rejects_self_loop_and_unknown_dependency__MW_10_4_c(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    head = w.authority.head(w.group)
    for deps, code in ((["a"], "self_loop"), (["nope"], "unknown_id")):
        r = w.submit(w.coordinator, "work.authorize", w.authorization("a", deps))
        assert r.rejection is not None and r.rejection.code == code
    assert w.authority.head(w.group) == head


def test_ownership_grant_has_epoch_and_start_deadline__MW_11_3_a(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    r = w.accept(w.workers[0], "a", w.offer("a", w.workers[0]))
    body = r.events[0].body
    assert body["ownership_epoch"] == 1
    assert body["start_deadline_ms"] == w.clock.now + 60_000
