"""Execution leases, fencing, sessions and late results (spec 11.3, 11.4, 11.5) on a real
Authority."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from missionweave.authority import SubmitResult, verify_log
from missionweave.protocol import ProgressReport
from tests.support.artifact_servers import signed
from tests.support.world import evidence, make_leased_world, make_world

CP = {"checkpoint": {"ref": "step-3", "files_done": 3}}
#: The contract's deliverable ``report``, inline.
REPORT = {"report": {"files": 3, "mismatches": 0}}


def test_lease_is_bound_to_agent_session_item_epoch__MW_11_3_b(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    lease = w.leases["a"]
    assert lease["lease_id"].startswith("lease_")
    assert lease["agent_id"] == "worker-0" and lease["work_item_id"] == "a"
    assert lease["session_epoch"] == w.workers[0].session_epoch == 1
    assert lease["ownership_epoch"] == 1
    assert lease["expires_at_ms"] - lease["started_at_ms"] == 30_000
    w.clock.advance(10_000)
    w.ok(w.workers[0], "lease.renew", w.leased("a"))
    row = w.authority.lease(lease["lease_id"])
    assert row is not None and row["valid"] and row["lease_id"] == lease["lease_id"]
    assert row["expires_at_ms"] == w.clock.now + 30_000
    assert '"renewals"' not in row["renewals"] and str(w.clock.now) in row["renewals"]


OLD_LEASE_COMMANDS = [
    ("lease.renew", {}),
    ("work.checkpoint", CP),
    ("work.block", {"resolution": "need credentials", **CP}),
    ("artifact.publish", {"manifest": {"hash": "ab" * 32}}),
    ("work.submit", {"evidence": evidence("worker-0", "a"), "outputs": REPORT}),
    ("work.fail", {"evidence": evidence("worker-0", "a", ("hashes",), "fail")}),
    ("progress.report", {"report": ProgressReport(phase="hashing").model_dump()}),
]


@pytest.mark.parametrize(("ctype", "extra"), OLD_LEASE_COMMANDS)
def test_old_lease_id_rejected_with_same_epoch__MW_11_3_c(
    tmp_path: Path, ctype: str, extra: dict[str, Any]
) -> None:
    w = make_leased_world(tmp_path / "a.db")
    if ctype == "artifact.publish":  # a real signed manifest (MW-13.1-b)
        extra = {"manifest": signed(w.workers[0], "ab" * 32).wire()}
    old = w.leased("a")
    w.ok(w.workers[0], "work.checkpoint", w.leased("a", **CP))
    w.start(w.workers[0], "a")  # same owner, same ownership epoch, new lease id
    assert w.leases["a"]["ownership_epoch"] == old["ownership_epoch"]
    head = w.authority.head(w.group)
    r = w.submit(w.workers[0], ctype, {**old, **extra})
    assert r.status in ("rejected", "recorded")
    assert r.rejection is not None and r.rejection.code == "stale_lease"
    assert w.item("a")["state"] == "active"
    if r.status == "rejected":
        assert w.authority.head(w.group) == head
    # the current lease id is accepted for the same command
    if ctype == "artifact.publish":  # its bytes uploaded under the lease (MW-13.3-d)
        w.uploaded("a", "ab" * 32)
    assert w.submit(w.workers[0], ctype, {**w.leased("a"), **extra}).accepted


def test_capability_token_bound_to_lease_and_never_outlives_it__MW_11_3_d(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    lease = w.leases["a"]
    started = [e for e in w.authority.all_events(w.group) if e.type == "work.started"][-1]
    token = started.body["capability_token"]
    assert token["lease_id"] == lease["lease_id"]
    assert token["expires_at_ms"] <= lease["expires_at_ms"]
    w.clock.advance(5_000)
    r = w.ok(w.workers[0], "lease.renew", w.leased("a"))
    new_token = r.reply["capability_token"]
    assert new_token["token_id"] != token["token_id"]  # rotated while the lease stays
    assert new_token["lease_id"] == lease["lease_id"]
    assert new_token["expires_at_ms"] <= r.reply["expires_at_ms"]


def test_checkpoint_block_submit_release_the_lease__MW_11_3_e(tmp_path: Path) -> None:
    for ctype, extra, state in (
        ("work.checkpoint", CP, "queued"),
        ("work.block", {"resolution": {"needs": "api key"}, **CP}, "blocked"),
        ("work.submit", {"evidence": evidence("worker-0", "a"), "outputs": REPORT}, "submitted"),
    ):
        w = make_leased_world(tmp_path / ctype / "a.db")
        lease_id = w.leases["a"]["lease_id"]
        r = w.ok(w.workers[0], ctype, w.leased("a", **extra))
        assert any(e.type == "lease.released" and e.body["lease_id"] == lease_id for e in r.events)
        assert w.item("a")["state"] == state
        lease = w.authority.lease(lease_id)
        assert lease is not None and lease["status"] == "released" and not lease["valid"]


def test_timeout_expires_and_cancellation_revokes__MW_11_3_e(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    lease_id = w.leases["a"]["lease_id"]
    w.clock.advance(30_000)
    lease = w.authority.lease(lease_id)
    assert lease is not None and not lease["valid"]  # timed out
    r = w.submit(w.workers[0], "lease.renew", w.leased("a"))
    assert r.rejection is not None and r.rejection.code == "lease_expired"
    w2 = make_leased_world(tmp_path / "cancel" / "a.db")
    r = w2.ok(w2.coordinator, "work.cancel", {"work_item_id": "a", "reason": "not needed"})
    assert [e.type for e in r.events] == ["lease.revoked", "work.cancelled"]


def test_new_session_revokes_leases_and_requeues_first__MW_11_3_f(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    old_cmd = worker.command("lease.renew", w.group, w.leased("a"), issued_at_ms=w.clock.now)
    r = w.authority.submit(worker.command("session.open", None, {}, issued_at_ms=w.clock.now))
    assert r.accepted and r.reply["session_epoch"] == 2
    types = [e.type for e in r.events]
    assert types.index("lease.revoked") < types.index("agent.session_opened")
    assert r.events[0].body["state"] == "queued"
    assert w.item("a")["state"] == "queued" and w.item("a")["owner"] == "worker-0"
    stale = w.authority.submit(old_cmd)  # the old runtime's delayed command
    assert stale.rejection is not None and stale.rejection.code == "stale_session_epoch"
    worker.session_epoch = 2
    lease = w.start(worker, "a")  # the new runtime starts it under a new lease
    assert lease["session_epoch"] == 2 and lease["ownership_epoch"] == 1


def test_a_new_session_names_the_process_that_opened_it__MW_11_3_f(tmp_path: Path) -> None:
    """``session.open`` may name its process (``{host, pid}``); every ``agent.session_opened``
    carries it, so the process it replaces can say who took over. Anything else is refused."""
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]

    def open_with(process: object) -> SubmitResult:
        body = {"process": process}
        return w.authority.submit(
            worker.command("session.open", None, body, issued_at_ms=w.clock.now)
        )

    for bad in (
        {"host": "h"},
        {"host": "h", "pid": -1},
        {"host": "h", "pid": True},
        {"host": 7, "pid": 1},
        {"host": "h", "pid": 1, "user": "x"},
        "h:1",
    ):
        r = open_with(bad)
        assert r.rejection is not None and r.rejection.code == "invalid_body", bad
    r = open_with({"host": "build-7", "pid": 4242})
    assert r.accepted and r.reply["session_epoch"] == 2
    (opened,) = [e for e in r.events if e.type == "agent.session_opened"]
    assert opened.body == {
        "agent_id": worker.agent_id,
        "session_epoch": 2,
        "process": {"host": "build-7", "pid": 4242},
    }


def test_missed_start_deadline_then_reassigned_with_higher_epoch__MW_11_5_a(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    assert w.accept(w.workers[0], "a", w.offer("a", w.workers[0])).accepted
    w.clock.advance(60_000)
    r = w.submit(w.workers[0], "work.start", {"work_item_id": "a", "ownership_epoch": 1})
    assert r.rejection is not None and r.rejection.code == "start_deadline_missed"
    offer = w.ok(w.coordinator, "work.offer", w.offer_body("a", "worker-1"))
    # the queued ownership lease (MW-11.3-a) expires with the ownership
    assert [e.type for e in offer.events][:2] == ["lease.expired", "ownership.closed"]
    assert offer.events[0].body["kind"] == "queued"
    acc = w.accept(w.workers[1], "a", str(offer.reply["offer_id"]))
    assert acc.events[0].body["ownership_epoch"] == 2


def test_lease_timeout_reassign_and_late_result_only_audited__MW_11_5_a__MW_11_5_b(
    tmp_path: Path,
) -> None:
    w = make_leased_world(tmp_path / "a.db")
    old = w.leased("a")
    w.ok(w.workers[0], "work.checkpoint", w.leased("a", **CP))
    w.start(w.workers[0], "a")
    frozen = w.leased("a")
    w.clock.advance(30_001)  # the frozen worker stops renewing
    offer = w.ok(w.coordinator, "work.offer", w.offer_body("a", "worker-1"))
    assert [e.type for e in offer.events][:2] == ["lease.expired", "ownership.closed"]
    assert w.accept(w.workers[1], "a", str(offer.reply["offer_id"])).accepted
    lease2 = w.start(w.workers[1], "a")
    assert lease2["ownership_epoch"] == 2
    started = [e for e in w.authority.all_events(w.group) if e.type == "work.started"][-1]
    assert started.body["checkpoint"] == CP["checkpoint"]  # resumes from the last checkpoint
    for stale in (frozen, old):
        late = w.submit(
            w.workers[0],
            "work.submit",
            {**stale, "evidence": evidence("worker-0", "a"), "outputs": REPORT},
        )
        assert late.status == "recorded"
        assert [e.type for e in late.events] == ["work.late_result_recorded"]
        assert w.item("a")["state"] == "active" and w.item("a")["owner"] == "worker-1"
    w.ok(w.workers[1], "work.submit", w.leased("a", **w.report("a", w.workers[1])))
    assert w.item("a")["state"] == "submitted"
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_blocked_needs_resolution_and_bounded_blocked_lease__MW_11_4_c(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    r = w.submit(w.workers[0], "work.block", w.leased("a", **CP))
    assert r.rejection is not None and r.rejection.code == "invalid_body"
    r = w.ok(w.workers[0], "work.block", w.leased("a", resolution="needs PyPI token", **CP))
    blocked = r.events[-1]
    assert blocked.type == "work.blocked" and blocked.body["resolution"] == "needs PyPI token"
    assert blocked.body["blocked_lease_expires_at_ms"] == w.clock.now + 120_000
    w.ok(w.coordinator, "work.unblock", {"work_item_id": "a", "resolution": {"token": "given"}})
    assert w.item("a")["state"] == "queued" and w.item("a")["owner"] == "worker-0"
    # once the blocked lease has expired, unblocking returns the item to open
    w.start(w.workers[0], "a")
    w.ok(w.workers[0], "work.block", w.leased("a", resolution="again", **CP))
    w.clock.advance(120_000)
    r = w.ok(w.coordinator, "work.unblock", {"work_item_id": "a"})
    assert r.events[-1].body["state"] == "open"
    assert w.item("a")["state"] == "open" and w.item("a")["owner"] is None


def test_budget_overrun_rejects_charge_and_progress__MW_11_5_j(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    head = w.authority.head(w.group)
    r = w.submit(
        w.workers[0],
        "progress.report",
        w.leased("a", report={"phase": "hashing"}, usage={"tool_calls": 101}),
    )
    assert r.rejection is not None and r.rejection.code == "budget_exceeded"
    assert r.rejection.detail["dimensions"] == ["tool_calls"]
    assert w.authority.head(w.group) == head and '"tool_calls":0' in w.item("a")["usage"]
    w.ok(
        w.workers[0],
        "progress.report",
        w.leased("a", report={"phase": "hashing"}, usage={"tool_calls": 60}),
    )
    r = w.submit(w.workers[0], "lease.renew", w.leased("a", usage={"tool_calls": 41}))
    assert r.rejection is not None and r.rejection.code == "budget_exceeded"


def test_progress_is_structured_not_a_percentage__MW_11_4_a(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    r = w.submit(w.workers[0], "progress.report", w.leased("a", report={"percent": 50}))
    assert r.rejection is not None and r.rejection.code == "invalid_body"
    report = {
        "phase": "hashing",
        "milestones_completed": ["listed"],
        "next_checkpoint": "half",
        "blockers": [],
        "estimate_remaining_ms": 4000,
        "evidence_refs": [],
    }
    r = w.ok(w.workers[0], "progress.report", w.leased("a", report=report))
    assert r.events[0].body["report"] == report


def test_submission_needs_evidence_for_every_criterion__MW_13_2_a(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    r = w.submit(w.workers[0], "work.submit", w.leased("a"))
    assert r.rejection is not None and r.rejection.code == "evidence_required"
    r = w.submit(
        w.workers[0], "work.submit", w.leased("a", evidence=evidence("worker-0", "a", ("hashes",)))
    )
    assert r.rejection is not None and r.rejection.detail["missing"] == ["schema"]
    w.ok(w.workers[0], "work.submit", w.leased("a", **w.report("a", w.workers[0])))


def test_failure_needs_evidence__MW_11_4_f(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    r = w.submit(w.workers[0], "work.fail", w.leased("a"))
    assert r.rejection is not None and r.rejection.code == "evidence_required"
    r = w.ok(
        w.workers[0],
        "work.fail",
        w.leased("a", evidence=evidence("worker-0", "a", ("hashes",), "fail")),
    )
    failed = r.events[-1]
    assert failed.type == "work.failed" and failed.body["attempts"] == 1
    assert w.item("a")["state"] == "failed" and w.item("a")["owner"] is None
