"""The Mission's durable deadlines: offer expiry and the start deadline.

An offer is an ``execute_work_item`` activity whose schedule-to-start timeout is the offer's
expiry, so the timer lives in Temporal's server. The time-skipping test server does not skip
to an unstarted activity's schedule-to-start timeout (its sleep RPC times out), so these run on
the real dev server with deadlines of :data:`SHORT_MS`; the idle-backoff test, whose timers are
the workflow's own, still skips ten minutes.

The Authority, the coordinator Worker and the agent runtimes all run on one
:class:`~tests.support.temporal_env.VirtualClock` that follows the server's (skipped) time
(``FollowTemporalTime``), so the Authority judges expiry as the workflow does. Time is skipped
explicitly with ``time_env.sleep(...)`` while an agent is known to be silent; everything else
runs with automatic time skipping off, so a real agent's answer never races a skipped timer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import now_ms, verify_log
from missionweave.outcome import mission_result
from missionweave.protocol import Actor, Event
from missionweave.protocol.temporal_contract import MissionResult, MissionSpec, MissionStatus
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import (
    MissionStack,
    contract,
    mission_stack,
    step_registry,
    work_items,
)
from tests.support.mission_outcome import coordinator_steps
from tests.support.temporal_env import FollowTemporalTime, VirtualClock
from tests.support.waits import WAIT_S, until

TEN_MINUTES = timedelta(minutes=10)
#: Offer expiry and start deadline of the dev-server tests, milliseconds.
SHORT_MS = 2_000
#: A contract's timeouts whose start deadline is :data:`SHORT_MS`.
SHORT_START = {"start_deadline_ms": SHORT_MS, "lease_ms": 10_000, "heartbeat_ms": 1_000}


def _short_spec(ms: MissionStack, mission_id: str, **contract_over: Any) -> MissionSpec:
    """WorkItem ``a`` alone, on ``contract(**contract_over)``, its offers expiring after
    :data:`SHORT_MS`."""
    policy = {"offer_ttl_ms": SHORT_MS, "reoffer_backoff_ms": 300}
    return ms.spec(
        mission_id, work_items({"a": []}, contract(**contract_over)), offer_policy=policy
    )


def _assert_verified(result: MissionResult, owner: str, epoch: int) -> None:
    """The Mission completed, its one WorkItem verified: done by ``owner`` under ownership
    epoch ``epoch``."""
    assert result.status == "completed"
    (res,) = result.items
    assert (res.state.value, res.owner, res.ownership_epoch) == ("verified", owner, epoch)


def _events(ms: MissionStack, type: str, work_item_id: str = "a") -> list[Event]:
    return [
        e
        for e in ms.stack.authority.events(ms.group)
        if e.type == type and e.work_item_id == work_item_id
    ]


async def _silent_agent(ms: MissionStack, clock: VirtualClock) -> Actor:
    """``ada``: a worker with a card, a session and free slots reported, but no runtime — she
    answers nothing unless the test speaks for her."""
    ada = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"], max_concurrency=2)
    await ms.stack.client.put_presence(ada, ms.group, 2, 0, issued_at_ms=clock())
    return ada


@contextlib.asynccontextmanager
async def _skipping_stack(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> AsyncIterator[tuple[MissionStack, Actor]]:
    """A stack on the time-skipping server's time, automatic skipping off (time moves only by
    ``time_env.sleep``), with the silent agent ``ada`` (:func:`_silent_agent`)."""
    clock = await VirtualClock.of(time_env)
    with time_env.auto_time_skipping_disabled():
        async with mission_stack(
            time_env, tmp_path, interceptors=[FollowTemporalTime(clock)], clock=clock
        ) as ms:
            yield ms, await _silent_agent(ms, clock)


async def _finish(handle: WorkflowHandle[Any, MissionResult]) -> MissionResult:
    """The Mission's result, waited for without skipping time (a real agent is at work)."""

    async def done() -> bool:
        st: MissionStatus = await handle.query(MissionWorkflow.status)
        return st.status != "running"

    await until("the Mission to finish", done)
    return await mission_result(handle)


async def test_expired_offer_goes_to_next_ranked_agent__MW_10_3_a__MW_10_3_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    clock = now_ms
    async with mission_stack(dev_env, tmp_path) as ms:
        # ada is offline (no runtime) and ranked first: same availability, reliability and
        # cost as bob, and "ada" < "bob".
        await _silent_agent(ms, clock)
        bob = await ms.agent("bob", step_registry())
        await until("bob ready", bob.ready.is_set)
        spec = _short_spec(ms, "offer-expiry")
        handle = await ms.start(spec)
        (first,) = await until("the first offer", lambda: _events(ms, "work.offered"))
        assert first.body["candidates"] == ["ada"]  # one at a time, best-ranked first
        assert first.body["selection_basis"]["ada"]["rank"] == 1
        # it lives the short TTL from when the workflow sent it, which is before the Authority
        # recorded it (by any time a loaded machine takes, within the wait bound)
        sent_ms = first.body["expires_at_ms"] - SHORT_MS
        assert first.recorded_at_ms - WAIT_S * 1000 < sent_ms <= first.recorded_at_ms

        # MW-10.3-a: a durable offer to an offline agent reserves no ownership. (The
        # Authority records the offer before the workflow sees its activity's result.)
        async def offered() -> MissionStatus | None:
            got: MissionStatus = await handle.query(MissionWorkflow.status)
            return got if got.items[0].state.value == "offered" else None

        st = await until("the workflow to apply the offer", offered)
        (item,) = st.items
        assert (item.state.value, item.owner, item.offer_candidates) == (
            "offered",
            None,
            ["ada"],
        )
        assert not _events(ms, "work.offer_accepted")

        result = await _finish(handle)
        events = ms.stack.authority.events(ms.group)
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
    offers = [e for e in events if e.type == "work.offered"]
    assert [o.body["candidates"] for o in offers] == [["ada"], ["bob"]]
    # the second offer went out after the first one expired (its activity's schedule-to-start)
    assert offers[1].recorded_at_ms >= offers[0].body["expires_at_ms"]
    withdrawn = [e for e in events if e.type == "offer.withdrawn"]
    assert [(w.body["offer_id"], w.body["reason"]) for w in withdrawn] == [
        (offers[0].body["offer_id"], "replaced")
    ]
    (accepted,) = [e for e in events if e.type == "work.offer_accepted"]
    assert (accepted.body["owner"], accepted.body["ownership_epoch"]) == ("bob", 1)
    _assert_verified(result, "bob", 1)


async def test_missed_start_deadline_reoffers_with_next_epoch__MW_11_3_a__MW_11_5_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    clock = now_ms
    async with mission_stack(dev_env, tmp_path) as ms:
        # ada (ranked first) accepts with a raw Command and then never starts.
        ada = await _silent_agent(ms, clock)
        bob = await ms.agent("bob", step_registry())
        await until("bob ready", bob.ready.is_set)
        spec = _short_spec(ms, "start-deadline", timeouts=SHORT_START)
        handle = await ms.start(spec)
        (offer,) = await until("the first offer", lambda: _events(ms, "work.offered"))
        assert offer.body["candidates"] == ["ada"]
        verdict = await ms.accept_offer(ada, offer)
        assert verdict.accepted, verdict.rejection
        # MW-11.3-a: the ownership grant carries the epoch and a start deadline.
        (granted,) = _events(ms, "work.offer_accepted")
        assert verdict.reply["ownership_epoch"] == granted.body["ownership_epoch"] == 1
        deadline = verdict.reply["start_deadline_ms"]
        assert deadline == granted.body["start_deadline_ms"] == granted.recorded_at_ms + SHORT_MS
        row = ms.stack.authority.work_item(ms.group, "a")
        assert row is not None and (row["state"], row["owner"]) == ("queued", "ada")

        result = await _finish(handle)
        events = ms.stack.authority.events(ms.group)
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)

    (closed,) = [e for e in events if e.type == "ownership.closed"]
    assert closed.body == {"owner": "ada", "ownership_epoch": 1, "reason": "start_deadline_missed"}
    assert closed.recorded_at_ms >= deadline
    offers = [e for e in events if e.type == "work.offered"]
    assert [o.body["candidates"] for o in offers] == [["ada"], ["bob"]]
    assert offers[1].seq > closed.seq  # the owner is closed before the item is offered again
    accepted = [e for e in events if e.type == "work.offer_accepted"]
    assert [(e.body["owner"], e.body["ownership_epoch"]) for e in accepted] == [
        ("ada", 1),
        ("bob", 2),
    ]
    (started,) = [e for e in events if e.type == "work.started"]
    assert (started.body["lease"]["agent_id"], started.body["lease"]["ownership_epoch"]) == (
        "bob",
        2,
    )
    _assert_verified(result, "bob", 2)


async def test_missed_start_deadline_reoffers_the_only_agent_next_epoch__MW_11_5_a(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """With nobody else eligible, the former owner gets the WorkItem again under a new epoch
    (it is excluded only while someone else may take it)."""
    async with _skipping_stack(time_env, tmp_path) as (ms, ada):
        spec = _short_spec(ms, "start-deadline-alone", timeouts=SHORT_START)
        handle = await ms.start(spec)
        (offer,) = await until("the first offer", lambda: _events(ms, "work.offered"))
        verdict = await ms.accept_offer(ada, offer)
        assert verdict.accepted, verdict.rejection

        # ada's process comes back: her runtime takes the new offer and does the work.
        await until("the second offer", lambda: len(_events(ms, "work.offered")) == 2)
        await ms.agent("ada", step_registry(), actor=ada)
        result = await _finish(handle)
        events = ms.stack.authority.events(ms.group)

    (closed,) = [e for e in events if e.type == "ownership.closed"]
    assert closed.body == {"owner": "ada", "ownership_epoch": 1, "reason": "start_deadline_missed"}
    accepted = [e for e in events if e.type == "work.offer_accepted"]
    assert [(e.body["owner"], e.body["ownership_epoch"]) for e in accepted] == [
        ("ada", 1),
        ("ada", 2),
    ]
    _assert_verified(result, "ada", 2)


async def test_an_item_nobody_can_take_is_ranked_ever_less_often(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Nobody holds the capability: the workflow ranks again after 1 s, 2 s, 4 s … at most
    every 30 s — ten unattended minutes cost a few dozen local activities, not six hundred —
    and the Mission still ends when cancelled."""
    from missionweave.protocol.temporal_contract import CancelInput

    async with _skipping_stack(time_env, tmp_path) as (ms, _):  # ada holds demo.step only
        spec = ms.spec("nobody", work_items({"a": []}, contract(["rare.skill@1.0"])))
        handle = await ms.start(spec)

        async def ranked() -> bool:
            st: MissionStatus = await handle.query(MissionWorkflow.status)
            return st.items[0].detail.startswith("no eligible agent for ")

        await until("the first empty ranking", ranked)
        await time_env.sleep(TEN_MINUTES)
        assert await handle.execute_update(MissionWorkflow.cancel, CancelInput(reason="x"))
        result = await _finish(handle)
        history = await handle.fetch_history()
    rankings = coordinator_steps(history, "select_candidates")
    assert result.status == "cancelled"
    # 1+2+4+8+16+32(capped to 30) s, then every 30 s: about 25 in 600 s
    assert 15 <= len(rankings) <= 30, len(rankings)


async def test_a_deadline_ends_the_wait_for_an_agent_and_fails_the_mission__MW_10_1_a(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Nobody holds the capability: the Mission's current details and ``status`` say for how
    long; when the contract's ``deadline_ms`` passes, the WorkItem fails with the reason and the
    Mission fails, as for exhausted retries — it does not wait for ever."""
    from temporalio.api.sdk.v1 import WorkflowMetadata

    async with _skipping_stack(time_env, tmp_path) as (ms, _):  # ada holds demo.step only
        deadline = ms.clock() + 5 * 60_000
        rare = contract(["rare.skill@1.0"], deadline_ms=deadline)
        handle = await ms.start(ms.spec("late", work_items({"a": []}, rare)))

        async def waited() -> MissionStatus | None:
            st: MissionStatus = await handle.query(MissionWorkflow.status)
            return st if st.items[0].detail.startswith("no eligible agent for ") else None

        await until("the first empty ranking", waited)
        await time_env.sleep(timedelta(minutes=2))
        st = await until("a later ranking", waited)
        assert st.status == "running" and st.items[0].state.value == "open"
        meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert "\n- a: no eligible agent for " in meta.current_details, meta.current_details
        await time_env.sleep(TEN_MINUTES)
        result = await _finish(handle)
    assert result.status == "failed"
    (a,) = result.items
    assert a.detail.startswith("deadline passed (") and " with no eligible agent for " in a.detail
    assert result.reason == f"a failed for good: {a.detail}"
    assert a.state.value == "failed"  # mission.fail ended it at the Authority too
