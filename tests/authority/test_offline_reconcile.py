"""Bounded offline execution on a real Authority (spec 11.5, MW-11.5-c/f/g/h/i/j): buffered
progress carries the critical binding, is rebased and re-signed on reconnection, and is
reconciled in one transaction with its resource charge — or rejected writing nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from missionweave.authority import SubmitResult, verify_log
from missionweave.authority.core._outages import (
    GRACE_LEASES,
    STALL_MS,
    StallWatch,
    credit_on_start,
    credit_quiet,
    mark_alive,
)
from missionweave.protocol import (
    BOUNDED_OFFLINE_EXECUTION,
    RESOURCE_USAGE_RECORDED,
    Actor,
    Command,
    OfflineBinding,
    ProgressReport,
    ResourceUsage,
)
from missionweave.worker._offline import OfflineBuffer, bind, rebase, reconcile
from tests.support.world import World, make_leased_world, make_world

REPORT = ProgressReport(phase="hashing").model_dump(mode="json")
CP = {"files_done": 7}
GRACE_MS = 60_000  # the contract default (TimeoutPolicy.offline_grace_ms)


def _buffered(
    w: World,
    worker: Actor,
    wid: str = "a",
    *,
    usage: ResourceUsage | None = None,
    buffered_in_ms: int = 1_000,
    body_wid: str | None = None,
    lease: dict[str, Any] | None = None,
) -> Command:
    """What the agent buffers: a progress.report with a checkpoint, bound to ``wid``'s lease."""
    lease = lease or w.leases[wid]
    now = w.clock.now
    binding = OfflineBinding(
        agent_id=worker.agent_id,
        group_id=w.group,
        work_item_id=wid,
        session_epoch=lease["session_epoch"],
        ownership_epoch=lease["ownership_epoch"],
        lease_id=lease["lease_id"],
        disconnected_at_ms=now,
        buffered_at_ms=now + buffered_in_ms,
        grace_deadline_ms=lease["expires_at_ms"] + GRACE_MS,
        lease_expires_at_ms=lease["expires_at_ms"],
        usage=usage or ResourceUsage(),
    )
    body = {
        "work_item_id": body_wid or wid,
        "lease_id": lease["lease_id"],
        "ownership_epoch": lease["ownership_epoch"],
        "report": REPORT,
        "checkpoint": CP,
    }
    plain = worker.command("progress.report", w.group, body, issued_at_ms=now)
    return bind(worker, plain, binding)


def _reconciled(w: World, worker: Actor, cmd: Command) -> SubmitResult:
    return w.authority.submit(rebase(worker, cmd, w.clock.now))


def _writes_nothing(w: World, r: SubmitResult, code: str, before: tuple[Any, Any]) -> None:
    assert r.status == "rejected" and r.rejection is not None, r
    assert r.rejection.code == code, r.rejection
    assert r.rejection.reason and isinstance(r.rejection.detail, dict)
    assert (w.authority.head(w.group), w.authority.work_item(w.group, "a")) == before
    verify_log(w.authority.store, w.group, w.authority.public_key)


def _before(w: World) -> tuple[Any, Any]:
    return w.authority.head(w.group), w.authority.work_item(w.group, "a")


def test_mw_11_5_f_unknown_critical_extension_rejected_writing_nothing(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    before = _before(w)
    body = {**w.leased("a"), "report": REPORT}
    r = w.submit(
        w.workers[0],
        "progress.report",
        body,
        extensions={"urn:example:unknown": {"x": 1}},
        critical_extensions=["urn:example:unknown"],
    )
    _writes_nothing(w, r, "unsupported_extension", before)
    assert r.rejection is not None and r.rejection.detail["extension"] == "urn:example:unknown"
    # the same extension, not critical, is ignored: the Command applies
    assert w.submit(
        w.workers[0], "progress.report", body, extensions={"urn:example:unknown": {"x": 1}}
    ).accepted


def test_mw_11_5_f_binding_is_critical_and_recorded_in_the_log(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    cmd = _buffered(w, w.workers[0])
    assert cmd.critical_extensions == [BOUNDED_OFFLINE_EXECUTION]
    b = OfflineBinding.model_validate(cmd.extensions[BOUNDED_OFFLINE_EXECUTION])
    assert (b.agent_id, b.group_id, b.work_item_id, b.lease_id) == (
        "worker-0",
        w.group,
        "a",
        w.leases["a"]["lease_id"],
    )
    before = _before(w)
    not_critical = w.workers[0].command(
        cmd.type, cmd.group_id, cmd.body, extensions=cmd.extensions, issued_at_ms=w.clock.now
    )
    _writes_nothing(w, w.authority.submit(not_critical), "invalid_command", before)
    r = _reconciled(w, w.workers[0], cmd)
    assert r.accepted, r.rejection
    carried = r.events[0].command
    assert carried is not None and carried["extensions"][BOUNDED_OFFLINE_EXECUTION] == b.wire()


def test_rebase_keeps_binding_and_id_with_current_epochs__MW_11_5_g(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    cmd = _buffered(w, worker)
    w.clock.advance(5_000)
    worker.session_epoch += 1  # a later session of the same agent
    worker.membership_epochs[w.group] = 7
    again = rebase(worker, cmd, w.clock.now)
    assert (again.command_id, again.type, again.body, again.extensions) == (
        cmd.command_id,
        cmd.type,
        cmd.body,
        cmd.extensions,
    )
    assert again.critical_extensions == cmd.critical_extensions
    assert (again.issued_at_ms, again.session_epoch, again.membership_epoch) == (
        w.clock.now,
        worker.session_epoch,
        7,
    )
    assert again.signature != cmd.signature


def test_mw_11_5_i_reconciliation_charges_ancestry_and_names_both_sessions(
    tmp_path: Path,
) -> None:
    """The agent restarted while cut off: its new session revoked the lease (the WorkItem is
    still its own, queued); the durable buffer is reconciled under the new session."""
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    cmd = _buffered(w, worker, usage=ResourceUsage(tool_calls=3, tokens=120))
    w.clock.advance(20_000)
    opened = w.authority.submit(worker.command("session.open", None, {}, issued_at_ms=w.clock.now))
    assert opened.accepted
    worker.session_epoch = opened.reply["session_epoch"]
    r = _reconciled(w, worker, cmd)
    assert r.accepted, r.rejection
    assert [e.type for e in r.events] == [RESOURCE_USAGE_RECORDED, "work.progress_reported"]
    charge = r.events[0].body
    assert charge["historical_session"] == {
        "agent_id": "worker-0",
        "session_epoch": 1,
        "ownership_epoch": 1,
        "lease_id": w.leases["a"]["lease_id"],
    }
    assert charge["reconciling_session"]["session_epoch"] == 2
    assert charge["delta"]["tool_calls"] == 3
    assert charge["totals"]["missions"][0]["mission_id"] == "m1"
    assert charge["totals"]["missions"][0]["usage"]["tokens"] == 120
    item = w.authority.work_item(w.group, "a")
    assert item is not None and json.loads(item["checkpoint"]) == CP
    assert ResourceUsage.model_validate_json(item["usage"]).tool_calls == 3
    assert r.events[1].body["reconciled"]["session_epoch"] == 1
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_progress_buffered_past_the_grace_deadline_rejected__MW_11_5_h(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    lease_ms = w.leases["a"]["expires_at_ms"] - w.clock.now
    late = _buffered(w, w.workers[0], buffered_in_ms=lease_ms + GRACE_MS + 1)
    w.clock.advance(lease_ms + GRACE_MS + 2)
    before = _before(w)
    _writes_nothing(w, _reconciled(w, w.workers[0], late), "outside_grace_window", before)


def test_progress_after_the_lease_was_closed_rejected__MW_11_5_h(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    cmd = _buffered(w, w.workers[0], usage=ResourceUsage(tool_calls=1))
    w.ok(w.workers[0], "work.submit", w.leased("a", **w.report("a", w.workers[0])))
    before = _before(w)
    _writes_nothing(w, _reconciled(w, w.workers[0], cmd), "lease_closed", before)


def test_progress_from_a_former_owner_rejected__MW_11_5_h(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    old = w.leases["a"]
    cmd = _buffered(w, w.workers[0])
    w.clock.advance(old["expires_at_ms"] - w.clock.now + 1)  # expired: reassigned
    w.lease("a", w.workers[1])
    before = _before(w)
    _writes_nothing(w, _reconciled(w, w.workers[0], cmd), "owner_changed", before)


def test_progress_for_another_work_item_rejected__MW_11_5_h(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    w.authorize("b")
    w.lease("b", w.workers[0])
    worker = w.workers[0]
    for cmd in (
        _buffered(w, worker, "a", body_wid="b"),  # binding of a, body of b
        _buffered(w, worker, "b", lease=w.leases["a"]),  # binding of b with a's lease
    ):
        before = _before(w)
        _writes_nothing(w, _reconciled(w, worker, cmd), "outside_work_item", before)


def _budgeted(tmp_path: Path) -> World:
    """Mission ``m2`` with a budget of 5 tool calls, its WorkItem ``a`` leased to worker-0 (the
    contract's own budget allows 100 tool calls)."""
    w = make_world(tmp_path / "a.db")
    budget = {"mission_id": "m2", "title": "budgeted", "budget": {"tool_calls": 5}}
    w.ok(w.coordinator, "mission.create", budget)
    w.mission = "m2"
    w.authorize("a")
    w.lease("a", w.workers[0])
    return w


def test_mw_11_5_j_mission_budget_overrun_rejects_charge_and_progress(tmp_path: Path) -> None:
    w = _budgeted(tmp_path)
    w.ok(w.workers[0], "lease.renew", w.leased("a", usage={"tool_calls": 3}))
    cmd = _buffered(w, w.workers[0], usage=ResourceUsage(tool_calls=4))
    before = _before(w)
    r = _reconciled(w, w.workers[0], cmd)
    _writes_nothing(w, r, "budget_exceeded", before)
    assert r.rejection is not None
    assert (r.rejection.detail["scope"], r.rejection.detail["mission_id"]) == ("mission", "m2")
    assert not any(e.type == RESOURCE_USAGE_RECORDED for e in w.authority.events(w.group))
    # within the budget it goes through
    ok = _reconciled(w, w.workers[0], _buffered(w, w.workers[0], usage=ResourceUsage(tool_calls=2)))
    assert ok.accepted, ok.rejection


def test_mw_11_5_j_online_charges_count_against_the_mission_budget(tmp_path: Path) -> None:
    w = _budgeted(tmp_path)
    r = w.submit(w.workers[0], "lease.renew", w.leased("a", usage={"tool_calls": 6}))
    assert r.rejection is not None and r.rejection.code == "budget_exceeded"
    assert r.rejection.detail["mission_id"] == "m2"


def test_mw_11_5_c_authority_downtime_is_credited_to_live_leases(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    live = w.leases["a"]
    w.authorize(
        "b",
        timeouts={
            "start_deadline_ms": 60_000,
            "lease_ms": 2_000,
            "heartbeat_ms": 1_000,
            "blocked_lease_ms": 120_000,
        },
    )
    gone = w.lease("b", w.workers[1])  # expires 2 s later, before the Authority goes down
    w.clock.advance(5_000)
    with w.authority._write():
        mark_alive(w.authority.store, w.clock.now)  # the last beat before the crash
    w.clock.advance(40_000)  # 40 s down: past a's lease (30 s from start)
    assert credit_on_start(w.authority) == (40_000, 1)
    row = w.authority.lease(live["lease_id"])
    assert row is not None and row["valid"]
    # the downtime, and at least two whole leases (30 s) from now to renew in
    assert row["expires_at_ms"] == max(live["expires_at_ms"] + 40_000, w.clock.now + 60_000)
    expired = w.authority.lease(gone["lease_id"])
    assert expired is not None and expired["expires_at_ms"] == gone["expires_at_ms"]
    # the owner's result is accepted under its original lease and epoch
    r = w.submit(w.workers[0], "work.submit", w.leased("a", **w.report("a", w.workers[0])))
    assert r.accepted, r.rejection
    assert credit_on_start(w.authority) == (0, 0)  # a second start without downtime


def test_mw_11_5_c_an_authority_that_stood_still_credits_its_stall_to_live_leases(
    tmp_path: Path,
) -> None:
    """A serving Authority frozen (SIGSTOP), suspended or starved heard no renewal either: the
    first write after a stall longer than ``STALL_MS`` extends every lease live when the stall
    began by its length, before any Command is judged; a short gap extends nothing."""
    w = make_leased_world(tmp_path / "a.db")
    live = w.leases["a"]
    credit_on_start(w.authority)  # serving: the stall watch is on
    watch = w.authority.stall_watch
    assert isinstance(watch, StallWatch)
    watch._seen -= 1.0  # one second: a normal beat's gap
    w.ok(w.coordinator, "mission.create", {"mission_id": "m-short", "title": "t"})
    row = w.authority.lease(live["lease_id"])
    assert row is not None and row["expires_at_ms"] == live["expires_at_ms"]
    watch._seen -= STALL_MS / 1000 + 5.0  # frozen for 8 s
    w.clock.advance(8_000)
    w.ok(w.coordinator, "mission.create", {"mission_id": "m-after", "title": "t"})
    row = w.authority.lease(live["lease_id"])
    assert row is not None
    # the stall, and at least two whole leases (30 s each) from its end
    least = max(live["expires_at_ms"] + 8_000, w.clock.now + GRACE_LEASES * 30_000)
    assert least <= row["expires_at_ms"] <= least + 500
    verify_log(w.authority.store, w.group, w.authority.public_key)


class _Direct:
    """The Authority's submit behind the client's coroutine interface."""

    def __init__(self, w: World) -> None:
        self.w = w

    async def submit(self, cmd: Command) -> SubmitResult:
        return self.w.authority.submit(cmd)


def test_durable_buffer_is_reconciled_once_after_a_restart__MW_11_5_e(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    path = tmp_path / "agent.offline.sqlite3"
    buf = OfflineBuffer(path)
    buf.add(_buffered(w, worker, usage=ResourceUsage(tool_calls=2)))
    buf.close()  # the agent process ends
    again = OfflineBuffer(path)  # ... and a new one starts
    assert len(again) == 1
    verdicts = asyncio.run(reconcile(_Direct(w), worker, again, w.clock))  # type: ignore[arg-type]
    assert [v.status for v in verdicts] == ["accepted"]
    assert len(again) == 0
    item = w.authority.work_item(w.group, "a")
    assert item is not None and json.loads(item["checkpoint"]) == CP
    again.close()


def test_a_buffered_command_that_had_arrived_is_not_applied_twice__MW_11_5_e(
    tmp_path: Path,
) -> None:
    """The connection broke after the Authority applied the plain report: the bound copy
    under the same command id is refused as a conflict and dropped, nothing is charged
    twice."""
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    cmd = _buffered(w, worker, usage=ResourceUsage(tool_calls=2))
    plain = worker.command(
        "progress.report",
        w.group,
        {**cmd.body, "usage": {"tool_calls": 2}},
        command_id=cmd.command_id,
        issued_at_ms=w.clock.now,
    )
    assert w.authority.submit(plain).accepted
    buf = OfflineBuffer()
    buf.add(cmd)
    (v,) = asyncio.run(reconcile(_Direct(w), worker, buf, w.clock))  # type: ignore[arg-type]
    assert v.rejection is not None and v.rejection.code == "idempotency_conflict"
    item = w.authority.work_item(w.group, "a")
    assert item is not None and ResourceUsage.model_validate_json(item["usage"]).tool_calls == 2
    assert len(buf) == 0


def test_mw_11_5_j_a_usage_total_past_the_largest_log_integer_is_refused(tmp_path: Path) -> None:
    """A charge that would take a WorkItem's or a Mission's usage past 2**53 - 1 (the largest
    integer the log's canonical JSON holds) is ``budget_exceeded`` and writes nothing — it was
    an internal error when another agent's charge had filled the Mission's total (attack)."""
    w = make_leased_world(tmp_path / "a.db")
    w.ok(w.workers[0], "lease.renew", w.leased("a", usage={"tokens": 2**53 - 11}))
    before = _before(w)
    r = w.submit(w.workers[0], "lease.renew", w.leased("a", usage={"tokens": 11}))
    _writes_nothing(w, r, "budget_exceeded", before)
    assert r.rejection is not None and r.rejection.detail["dimensions"] == ["tokens"]


def test_mw_11_5_i_a_boolean_is_not_a_usage_count(tmp_path: Path) -> None:
    """``{"tokens": true}`` is not one token: refused as ``invalid_body``, nothing written."""
    w = make_leased_world(tmp_path / "a.db")
    before = _before(w)
    r = w.submit(w.workers[0], "lease.renew", w.leased("a", usage={"tokens": True}))
    _writes_nothing(w, r, "invalid_body", before)


SHORT = {"start_deadline_ms": 60_000, "lease_ms": 2_000, "heartbeat_ms": 500}


def test_mw_11_5_c_a_restart_gives_owners_a_whole_lease_beyond_the_downtime(
    tmp_path: Path,
) -> None:
    """An Authority down 1.7 s with 2 s leases: crediting the downtime alone would leave an
    owner 0.3 s to renew in, less than a reconnection takes (issue 24, finding 2: 6 of 8
    WorkItems re-run). It gets the downtime and two whole leases from the restart."""
    w = make_leased_world(tmp_path / "a.db", timeouts=SHORT)
    live = w.leases["a"]
    w.clock.advance(1_500)  # the last renewal was 1.5 s ago
    with w.authority._write():
        mark_alive(w.authority.store, w.clock.now)
    w.clock.advance(1_700)
    assert credit_on_start(w.authority) == (1_700, 1)
    row = w.authority.lease(live["lease_id"])
    assert row is not None and row["expires_at_ms"] == w.clock.now + GRACE_LEASES * 2_000
    w.clock.advance(1_900)  # the owner's first renewal after its reconnection backoff
    r = w.submit(w.workers[0], "lease.renew", w.leased("a"))
    assert r.accepted, r.rejection


def test_mw_11_5_c_a_silence_of_everyone_is_credited_to_owners_that_were_renewing(
    tmp_path: Path,
) -> None:
    """A serving Authority cut off from every client hears nothing: when the next request
    arrives, the silence is credited (a whole lease from then) to the leases whose owners were
    renewing when it began — not to one whose owner had stopped long before (dead)."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", timeouts=SHORT)
    w.authorize("b", timeouts=SHORT)
    w.lease("b", w.workers[1])  # its owner dies at once: it never renews
    w.clock.advance(1_500)
    w.lease("a", w.workers[0])
    w.clock.advance(100)
    assert w.submit(w.workers[0], "lease.renew", w.leased("a")).accepted
    credit_on_start(w.authority)  # serving: the watch is on
    watch = w.authority.stall_watch
    assert watch is not None
    watch._heard -= 0.5  # half a second: an ordinary pause, nothing is credited
    assert watch.heard(w.authority.store.backend) == 0
    # from now on nobody is heard for 3.5 s (the Authority is cut off); both leases are live
    # when the silence begins, and both lapse during it on the Authority's clock
    watch._heard -= 3.5
    w.clock.advance(3_500)
    gap = watch.heard(w.authority.store.backend)
    assert gap >= 3_500
    assert credit_quiet(w.authority, 3_500) == 1  # only a: b's owner was silent before
    row = w.authority.lease(w.leases["a"]["lease_id"])
    assert row is not None and row["valid"]
    assert row["expires_at_ms"] >= w.clock.now + GRACE_LEASES * 2_000
    assert w.submit(w.workers[0], "lease.renew", w.leased("a")).accepted
    dead = w.authority.lease(w.leases["b"]["lease_id"])
    assert dead is not None and not dead["valid"]
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_progress_on_a_lease_its_own_replacement_session_revoked__MW_11_5_h(
    tmp_path: Path,
) -> None:
    """Both sides of the one exception to "after the lease was closed" (docs/spec/READINGS.md):
    revoked by the agent's own replacement session and nothing happened since, the buffer is
    reconciled under the new session (MW-11.5-g/i); once the new session started the WorkItem
    again under a new lease — or another owner took it — the same progress is refused."""
    for then in ("nothing", "started_again", "reassigned"):
        w = make_leased_world(tmp_path / f"{then}.db")
        worker = w.workers[0]
        cmd = _buffered(w, worker, usage=ResourceUsage(tool_calls=1))
        w.clock.advance(5_000)
        opened = w.authority.submit(
            worker.command("session.open", None, {}, issued_at_ms=w.clock.now)
        )
        assert opened.accepted
        worker.session_epoch = opened.reply["session_epoch"]
        if then == "started_again":
            w.start(worker, "a")
        elif then == "reassigned":
            w.clock.advance(61_000)  # the start deadline passes: the WorkItem goes to another
            w.lease("a", w.workers[1])
        before = _before(w)
        r = _reconciled(w, worker, cmd)
        if then == "nothing":
            assert r.accepted, r.rejection
            continue
        code = "lease_closed" if then == "started_again" else "owner_changed"
        _writes_nothing(w, r, code, before)


def _restart(w: World, worker: Actor) -> None:
    """``worker`` opens a replacement session (its lease is revoked ``session_replaced``)."""
    opened = w.authority.submit(worker.command("session.open", None, {}, issued_at_ms=w.clock.now))
    assert opened.accepted, opened.rejection
    worker.session_epoch = opened.reply["session_epoch"]


def _cut_off(tmp_path: Path, path: str) -> tuple[World, Actor, Command, dict[str, Any]]:
    """A leased World whose worker-0 buffered a progress report of ``a`` (one tool call) — then
    restarted, when ``path`` is ``restarted``. The World, the worker, the buffered Command and
    the body of the same report sent online."""
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    cmd = _buffered(w, worker, usage=ResourceUsage(tool_calls=1))
    online = w.leased("a", report=REPORT)
    if path == "restarted":
        _restart(w, worker)
    return w, worker, cmd, online


@pytest.mark.parametrize("path", ["live_lease", "restarted"])
def test_progress_refused_after_the_owner_lost_the_worker_role__MW_11_5_h(
    tmp_path: Path, path: str
) -> None:
    """The owner's worker role is taken away while it is cut off: its buffered progress is
    refused as the same report online is (``role_not_allowed``), writing nothing — on its live
    lease, and after its own restart (the path of the replaced session, which applies no state
    table to a ``queued`` WorkItem)."""
    w, worker, cmd, online = _cut_off(tmp_path, path)
    w.ok(w.coordinator, "member.update", {"agent_id": worker.agent_id, "roles": ["reviewer"]})
    worker.membership_epochs[w.group] += 1
    if path == "live_lease":
        r = w.submit(worker, "progress.report", online)
        assert r.rejection is not None and r.rejection.code == "role_not_allowed"
    before = _before(w)
    _writes_nothing(w, _reconciled(w, worker, cmd), "role_not_allowed", before)


@pytest.mark.parametrize("past_grace_ms", [0, 600_000])
@pytest.mark.parametrize("path", ["live_lease", "restarted"])
def test_progress_refused_once_the_ownership_lapsed__MW_11_5_h(
    tmp_path: Path, path: str, past_grace_ms: int
) -> None:
    """Buffered in time, arriving once the lease's expiry plus its offline grace passed (nobody
    reassigned the WorkItem: the ownership lapsed) — at that instant, or ten minutes after:
    refused ``lease_expired`` as the same report online is, writing nothing; on the live
    lease and after the agent's own restart (there also once its start deadline passed)."""
    w, worker, cmd, online = _cut_off(tmp_path, path)
    deadline = w.item("a")["start_deadline_ms"]
    if path == "restarted" and past_grace_ms == 0:  # queued again: its start deadline passes
        assert deadline < w.leases["a"]["expires_at_ms"] + GRACE_MS
        w.clock.advance(deadline - w.clock.now)
    else:
        w.clock.advance(w.leases["a"]["expires_at_ms"] + GRACE_MS - w.clock.now + past_grace_ms)
    if path == "live_lease":
        r = w.submit(worker, "progress.report", online)
        assert r.rejection is not None and r.rejection.code == "lease_expired"
    before = _before(w)
    r = _reconciled(w, worker, cmd)
    _writes_nothing(w, r, "lease_expired", before)
    assert r.rejection is not None and r.rejection.detail["lapsed"] == (
        "start_deadline_missed" if path == "restarted" and past_grace_ms == 0 else "lease_expired"
    )


@pytest.mark.parametrize("path", ["live_lease", "restarted"])
def test_progress_within_the_offline_grace_is_applied__MW_11_5_h(tmp_path: Path, path: str) -> None:
    """The other side: arriving past the lease's expiry but within its offline grace (and, after
    a restart, before the start deadline), the buffered progress is applied."""
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    cmd = _buffered(w, worker, usage=ResourceUsage(tool_calls=1))
    if path == "restarted":
        _restart(w, worker)
        w.clock.advance(1_000)
    else:
        w.clock.advance(w.leases["a"]["expires_at_ms"] + GRACE_MS - w.clock.now - 1)
    r = _reconciled(w, worker, cmd)
    assert r.accepted, r.rejection
