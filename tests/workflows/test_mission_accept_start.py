"""The offer is the activity (docs/design.md §4.3-5): each offer is an ``execute_work_item``
activity on the candidate's task queue whose schedule-to-start timeout is the offer's expiry and
whose heartbeat timeout is the lease bound; the agent accepts and starts with the Authority itself
— in one request when a slot is free — and an accepted item waits in the agent's queue until the
scheduler gives it a slot (MW-10.3-c, MW-11.3-b). No agent sends an Update."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.protocol import Event
from missionweave.protocol.temporal_contract import agent_task_queue
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from tests.support.mission_harness import MissionStack, contract, mission_stack, submission


def _events(ms: MissionStack, type: str) -> list[Event]:
    return [e for e in ms.stack.authority.events(ms.group) if e.type == type]


def _slow_registry(seconds: float) -> HandlerRegistry:
    reg = HandlerRegistry()

    # it declares its duration: admission control expects a short wait, and queues the second
    @reg.handler("demo.step", version="1.0", estimate_ms=int(seconds * 1000))
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        await asyncio.sleep(seconds)
        return submission(ctx, method="demo")

    return reg


async def test_the_offer_is_an_activity_the_agent_accepts_and_starts__MW_10_3_c__MW_11_3_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        # one slot: "a" starts at once (acceptance and start in one request), "b" is accepted
        # while "a" runs and waits in ada's queue for the slot
        await ms.agent("ada", _slow_registry(0.5), max_concurrency=1)
        c = contract().wire()
        spec = ms.spec("offer-activity", [{"work_item_id": w, "contract": c} for w in "ab"])
        handle = await ms.start(spec)
        result = await handle.result()
        history = await handle.fetch_history()
        events = ms.stack.authority.events(ms.group)
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)

    assert result.status == "completed"
    assert [i.state.value for i in result.items] == ["verified", "verified"]
    # no Update at all: agents talk to the Authority, not to the workflow
    assert not [
        e
        for e in history.events
        if e.event_type
        in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED,
        )
    ]
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "execute_work_item"
    ]
    assert len(scheduled) == 2
    for a in scheduled:
        assert a.task_queue.name == agent_task_queue("ada", ms.group)  # its Group's inbox
        # until the offer's expiry (offer_ttl_ms 5 s from the offer), and the lease bound
        assert 4_000 < a.schedule_to_start_timeout.ToMilliseconds() <= 5_000
        assert a.heartbeat_timeout.ToMilliseconds() == 10_000
    by = {(e.type, e.work_item_id): e for e in events}
    first, second = sorted("ab", key=lambda w: by["work.started", w].seq)
    accept_1, start_1 = by["work.offer_accepted", first], by["work.started", first]
    accept_2, start_2 = by["work.offer_accepted", second], by["work.started", second]
    assert {accept_1.actor, start_1.actor, accept_2.actor, start_2.actor} == {"ada"}
    assert start_1.seq == accept_1.seq + 1  # one request: accepted, then started
    # acceptance is a schedule commitment (spec 10.3): the second waited for the first's slot
    assert accept_2.seq < by["work.submitted", first].seq < start_2.seq
    assert [e.body["lease"]["ownership_epoch"] for e in (start_1, start_2)] == [1, 1]
