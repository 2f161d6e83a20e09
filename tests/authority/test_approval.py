"""A MissionOwner's decision on a reviewed result (MW-13.2-b step 5) on a real Authority:
``approval.grant_result`` / ``approval.deny_result`` — who may decide, on what, once — and a
result with a ``human`` criterion that cannot be accepted without a granted Approval; and what
Evidence must (and must not) hold (MW-13.2-c/d)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from missionweave.authority import verify_log
from missionweave.protocol import Actor, Evidence, SigningKey
from tests.support.world import World, evidence, make_world

DIGEST = "ab" * 32
CRITERIA = [
    {"id": "hashes", "description": "every file matches", "evidence_required": "compare"},
    {"id": "signoff", "kind": "human", "description": "the owner signs it off",
     "evidence_required": "an Approval"},
]  # fmt: skip


def _submitted(tmp_path: Path, wid: str = "a") -> tuple[World, Actor]:
    """A World with a MissionOwner ``olivia`` and WorkItem ``wid`` (a ``human`` criterion)
    submitted by ``worker-0``."""
    w = make_world(tmp_path / "a.db")
    olivia = Actor.generate("olivia")
    w.ok(
        w.coordinator,
        "member.add",
        {"agent_id": "olivia", "public_key": olivia.public_key, "roles": ["mission_owner"]},
    )
    olivia.membership_epochs[w.group] = 1
    w.authorize(wid, acceptance_criteria=CRITERIA)
    worker = w.workers[0]
    w.lease(wid, worker)
    w.ok(worker, "work.submit", w.leased(wid, **w.report(wid, worker)))
    return w, olivia


def _decision(wid: str = "a", **over: Any) -> dict[str, Any]:
    return {"work_item_id": wid, "review_digest": DIGEST, **over}


def test_result_needs_a_granted_approval__MW_13_2_b(tmp_path: Path) -> None:
    w, olivia = _submitted(tmp_path)
    r = w.submit(w.coordinator, "work.accept_result", {"work_item_id": "a"})
    assert r.rejection is not None and r.rejection.code == "approval_required"
    r = w.ok(olivia, "approval.grant_result", _decision(reason="looks right"))
    (ev,) = r.events
    assert (ev.type, ev.actor, ev.work_item_id) == ("approval.result_granted", "olivia", "a")
    assert ev.body["approver"] == "olivia" and ev.body["review_digest"] == DIGEST
    assert ev.body["ownership_epoch"] == 1 and ev.body["decided_at_ms"] == w.clock.now
    w.ok(w.coordinator, "work.accept_result", {"work_item_id": "a"})
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_wrong_key_or_role_is_refused_and_nothing_is_written__MW_13_2_b(tmp_path: Path) -> None:
    w, olivia = _submitted(tmp_path)
    head = w.authority.head(w.group)
    impostor = Actor("olivia", SigningKey.generate(), membership_epochs={w.group: 1})
    cases = [
        (impostor, "bad_signature"),  # olivia's name, another key
        (w.workers[1], "role_not_allowed"),  # a member, not a mission_owner
        (w.reviewer, "role_not_allowed"),
        (Actor("stranger", SigningKey.generate()), "not_a_member"),
    ]
    for actor, code in cases:
        r = w.submit(actor, "approval.grant_result", _decision())
        assert r.rejection is not None and r.rejection.code == code, (actor.agent_id, r)
    assert w.authority.head(w.group) == head  # rejections write nothing
    r = w.submit(olivia, "approval.grant_result", _decision(review_digest="not-a-digest"))
    assert r.rejection is not None and r.rejection.code == "invalid_body"
    w.ok(olivia, "approval.grant_result", _decision())


def test_denial_needs_a_reason_and_blocks_acceptance__MW_13_2_b(tmp_path: Path) -> None:
    w, olivia = _submitted(tmp_path)
    r = w.submit(olivia, "approval.deny_result", _decision())
    assert r.rejection is not None and r.rejection.code == "invalid_body"
    (ev,) = w.ok(olivia, "approval.deny_result", _decision(reason="totals are off")).events
    assert ev.type == "approval.result_denied" and ev.body["reason"] == "totals are off"
    r = w.submit(olivia, "approval.grant_result", _decision())  # one decision per submission
    assert r.rejection is not None and r.rejection.code == "already_decided"
    assert r.rejection.detail["decision"] == "denied"
    r = w.submit(w.coordinator, "work.accept_result", {"work_item_id": "a"})
    assert r.rejection is not None and r.rejection.code == "approval_required"
    w.ok(
        w.coordinator,
        "work.fail",
        {"work_item_id": "a", "evidence": evidence("coordinator", "a", ("signoff",), "fail")},
    )


def test_decision_only_on_a_submitted_result_and_not_by_its_owner__MW_13_2_b(
    tmp_path: Path,
) -> None:
    w, olivia = _submitted(tmp_path)
    w.authorize("b")
    r = w.submit(olivia, "approval.grant_result", _decision("b"))  # open, not submitted
    assert r.rejection is not None and r.rejection.code == "transition_not_allowed"
    # a worker that is also a mission_owner may not approve its own result
    w.ok(
        w.coordinator,
        "member.update",
        {
            "agent_id": "worker-0",
            "public_key": w.workers[0].public_key,
            "roles": ["worker", "mission_owner"],
        },
    )
    w.workers[0].membership_epochs[w.group] = 2
    r = w.submit(w.workers[0], "approval.grant_result", _decision())
    assert r.rejection is not None and r.rejection.code == "self_approval"


def test_evidence_has_every_field_and_no_transcript__MW_13_2_c__MW_13_2_d(
    tmp_path: Path,
) -> None:
    """Evidence records subject, criterion, method, result, producer, timestamp and the
    Artifacts referenced; a body carrying anything else — a reasoning transcript — is refused."""
    full = evidence("worker-0", "a", ("hashes",))[0] | {"artifacts": [DIGEST]}
    ev = Evidence.model_validate(full)
    assert (
        ev.subject,
        ev.criterion,
        ev.method,
        ev.result,
        ev.producer,
        ev.timestamp_ms,
        ev.artifacts,
    ) == ("a", "hashes", "test", "pass", "worker-0", full["timestamp_ms"], [DIGEST])
    for name in ("subject", "criterion", "method", "result", "producer", "timestamp_ms"):
        with pytest.raises(ValidationError):
            Evidence.model_validate({k: v for k, v in full.items() if k != name})
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    worker = w.workers[0]
    w.lease("a", worker)
    chatty = [
        full | {"chain_of_thought": "first I looked at…"},
        evidence("worker-0", "a", ("schema",))[0],
    ]
    r = w.submit(worker, "work.submit", w.leased("a", evidence=chatty))
    assert r.rejection is not None and r.rejection.code == "invalid_body"
