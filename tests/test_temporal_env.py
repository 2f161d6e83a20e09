"""The shared Temporal test environments of ``tests.support.temporal_env``, and the virtual clock
that lets the Authority judge expiry by the time-skipping server's time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from missionweave.dev import MISSION_ID, OPEN_WORK_ITEMS
from missionweave.protocol import Actor

from .support.temporal_env import (
    AuthorityStack,
    FollowTemporalTime,
    VirtualClock,
    authority_stack,
    new_task_queue,
)
from .support.world import basis, contract

MINUTE_MS = 60_000
_TIMEOUT = timedelta(seconds=30)


# ------------------------------------------------------------------ workflows and activities


class AuthorityActivities:
    """Activities that talk to the Authority as the coordinator and one worker."""

    def __init__(self, stack: AuthorityStack, worker: Actor) -> None:
        self.stack = stack
        self.worker = worker

    @activity.defn(name="stamp")
    async def stamp(self, mission_id: str) -> int:
        """Create a Mission; the Authority's clock as recorded on its Event, epoch ms."""
        r = await self.stack.ok(
            self.stack.coordinator, "mission.create", {"mission_id": mission_id, "title": "t"}
        )
        return r.events[0].recorded_at_ms

    @activity.defn(name="offer")
    async def offer(self, work_item_id: str) -> str:
        """Authorize ``work_item_id`` and offer it to the worker for 5 minutes (Authority
        clock); the offer id."""
        s = self.stack
        await s.ok(
            s.coordinator,
            "work.authorize",
            {
                "work_item_id": work_item_id,
                "mission_id": "m",
                "contract": contract().wire(),
                "dependencies": [],
            },
        )
        r = await s.ok(
            s.coordinator,
            "work.offer",
            {
                "work_item_id": work_item_id,
                "candidates": [self.worker.agent_id],
                "expires_at_ms": s.clock() + 5 * MINUTE_MS,
                "selection_basis": {self.worker.agent_id: basis(["dist.verify@1.0"])},
            },
        )
        return str(r.reply["offer_id"])

    @activity.defn(name="accept")
    async def accept(self, args: list[str]) -> str:
        """The worker accepts offer ``args[1]`` of item ``args[0]``: ``accepted`` or the
        rejection code."""
        work_item_id, offer_id = args
        item = self.stack.authority.work_item(self.stack.group, work_item_id)
        assert item is not None
        r = await self.stack.submit(
            self.worker,
            "work.accept_offer",
            {"work_item_id": work_item_id, "offer_id": offer_id, "revision": item["revision"]},
        )
        return "accepted" if r.accepted else str(r.rejection and r.rejection.code)


@workflow.defn(sandboxed=False)
class SleepBetweenStampsWorkflow:
    @workflow.run
    async def run(self, minutes: int) -> list[int]:
        t = _TIMEOUT
        before = await workflow.execute_activity("stamp", "m-before", start_to_close_timeout=t)
        await workflow.sleep(timedelta(minutes=minutes))
        after = await workflow.execute_activity("stamp", "m-after", start_to_close_timeout=t)
        return [before, after]


@workflow.defn(sandboxed=False)
class OfferOutlivedWorkflow:
    """Item ``fast`` is accepted at once; item ``slow``'s offer (5 min) is accepted after a
    10-minute durable timer."""

    @workflow.run
    async def run(self) -> list[str]:
        t = _TIMEOUT
        await workflow.execute_activity("stamp", "m", start_to_close_timeout=t)
        fast = await workflow.execute_activity("offer", "fast", start_to_close_timeout=t)
        fast_verdict = await workflow.execute_activity(
            "accept", ["fast", fast], start_to_close_timeout=t
        )
        slow = await workflow.execute_activity("offer", "slow", start_to_close_timeout=t)
        await workflow.sleep(timedelta(minutes=10))
        slow_verdict = await workflow.execute_activity(
            "accept", ["slow", slow], start_to_close_timeout=t
        )
        return [fast_verdict, slow_verdict]


@activity.defn
async def noop(i: int) -> int:
    return i


@workflow.defn(sandboxed=False)
class UntilSuggestedWorkflow:
    """Runs activities until continue-as-new is suggested or ``limit`` is reached; returns
    ``[activities run, suggested]`` (1 for yes)."""

    @workflow.run
    async def run(self, limit: int) -> list[int]:
        for i in range(limit):
            if workflow.info().is_continue_as_new_suggested():
                return [i, 1]
            await workflow.execute_activity(noop, i, start_to_close_timeout=_TIMEOUT)
        return [limit, int(workflow.info().is_continue_as_new_suggested())]


# ------------------------------------------------------------------------------- tests


async def test_virtual_clock_never_moves_backwards() -> None:
    clock = VirtualClock(1_000)
    assert clock.advance_to(5_000) == 5_000
    assert clock.advance_to(4_000) == 5_000
    assert clock.advance(10) == 5_010 and clock() == 5_010
    with pytest.raises(ValueError):
        clock.advance(-1)


async def _run_on_skipped_time(
    time_env: WorkflowEnvironment,
    tmp_path: Path,
    workflow_class: type,
    activities: Callable[[AuthorityActivities], list[Callable[..., Any]]],
    *args: Any,
) -> tuple[Any, VirtualClock, int]:
    """Execute ``workflow_class`` (with ``args``) on the time-skipping server, its
    ``activities`` talking to an Authority on the server's virtual clock: its result, the
    clock, and the clock's reading before."""
    clock = await VirtualClock.of(time_env)
    start = clock()
    async with authority_stack(tmp_path, clock=clock) as stack:
        ada = await stack.add_agent("ada", capabilities=["dist.verify@1.0"])  # the contract's
        acts = AuthorityActivities(stack, ada)
        tq = new_task_queue()
        async with Worker(
            time_env.client,
            task_queue=tq,
            workflows=[workflow_class],
            activities=activities(acts),
            interceptors=[FollowTemporalTime(clock)],
        ):
            result = await time_env.client.execute_workflow(
                workflow_class.run,  # type: ignore[attr-defined]
                *args,
                id=f"wf-{tq}",
                task_queue=tq,
            )
    return result, clock, start


async def test_authority_clock_follows_skipped_time(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    (before, after), clock, start = await _run_on_skipped_time(
        time_env, tmp_path, SleepBetweenStampsWorkflow, lambda acts: [acts.stamp], 10
    )
    # The Authority recorded both Events on the virtual clock, 10 skipped minutes apart.
    assert after - before >= 10 * MINUTE_MS
    assert clock() - start >= 10 * MINUTE_MS


async def test_offer_expiry_judged_by_skipped_time(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    verdicts, _, _ = await _run_on_skipped_time(
        time_env,
        tmp_path,
        OfferOutlivedWorkflow,
        lambda acts: [acts.stamp, acts.offer, acts.accept],
    )
    assert verdicts == ["accepted", "offer_expired"]


async def test_dev_env_registers_search_attributes(dev_env: WorkflowEnvironment) -> None:
    tq = new_task_queue()
    async with Worker(
        dev_env.client, task_queue=tq, workflows=[UntilSuggestedWorkflow], activities=[noop]
    ):
        handle = await dev_env.client.start_workflow(
            UntilSuggestedWorkflow.run,
            3,
            id=f"wf-{tq}",
            task_queue=tq,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(MISSION_ID, "m-1"), SearchAttributePair(OPEN_WORK_ITEMS, 2)]
            ),
        )
        assert await handle.result() == [3, 0]  # 4,096 events are far away
        desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED
    assert desc.typed_search_attributes.get(MISSION_ID) == "m-1"
    assert desc.typed_search_attributes.get(OPEN_WORK_ITEMS) == 2


async def test_small_history_env_suggests_continue_as_new(
    dev_env_small_history: WorkflowEnvironment,
) -> None:
    env = dev_env_small_history
    tq = new_task_queue()
    async with Worker(
        env.client, task_queue=tq, workflows=[UntilSuggestedWorkflow], activities=[noop]
    ):
        ran, suggested = await env.client.execute_workflow(
            UntilSuggestedWorkflow.run, 50, id=f"wf-{tq}", task_queue=tq
        )
    assert suggested == 1 and ran < 50
