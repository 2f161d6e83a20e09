"""An Authority that stays unreachable does not make a coordinator step spin (issue 26): each
try of the local activity is bounded (five attempts, :data:`STEP_RETRY`), then
a durable timer waits 5 s, doubling to 5 min, before the next try. An outage costs a marker and
a timer per try, and the step's result arrives once the Authority answers again."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from missionweave.authority.client import AuthorityUnavailable
from missionweave.workflows._steps import MAX_STEP_PAUSE, STEP_RETRY, coordinator_activity

#: The first pause between two tries (doubling).
PAUSE = timedelta(milliseconds=200)
#: Calls of the step that fail before the Authority "answers" again.
FAILING_CALLS = 12
calls: list[int] = []


@activity.defn(name="unreachable_step")
async def unreachable_step(n: int) -> int:
    calls.append(n)
    if len(calls) <= FAILING_CALLS:
        raise AuthorityUnavailable("connection refused")
    return n * 2


@workflow.defn(sandboxed=False)
class OutageWorkflow:
    @workflow.run
    async def run(self) -> tuple[int, int]:
        t0 = workflow.now()
        got = await coordinator_activity(
            unreachable_step,  # type: ignore[arg-type]  # any activity: a stand-in step
            21,
            start_to_close=timedelta(milliseconds=300),
            summary="a step while the Authority is away",
            first_pause=PAUSE,  # 5 s in production: short here, on the real clock
        )
        return got, int((workflow.now() - t0).total_seconds())


async def test_an_unreachable_authority_costs_a_timer_per_try_not_a_spin(
    dev_env: WorkflowEnvironment,
) -> None:
    calls.clear()
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    async with Worker(
        dev_env.client, task_queue=queue, workflows=[OutageWorkflow], activities=[unreachable_step]
    ):
        handle = await dev_env.client.start_workflow(
            OutageWorkflow.run, id=f"outage-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        got, waited_s = await handle.result()
        history = await handle.fetch_history()
    assert got == 42  # the step's result, once the Authority answered
    timers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    tries = len(timers) + 1
    assert len(markers) == tries  # one marker per try: its attempts stay in the Worker
    # attempts within a try were retried in the Worker, up to the bound
    assert len(calls) == FAILING_CALLS + 1
    assert tries == -(-(FAILING_CALLS + 1) // STEP_RETRY.maximum_attempts)
    assert tries >= 3  # the outage outlasted a try twice
    # durable pauses between tries, doubling (5 s, 10 s … 5 min in production)
    pauses = [e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta() for e in timers]
    assert pauses == [min(PAUSE * 2**k, MAX_STEP_PAUSE) for k in range(len(pauses))]
    assert waited_s >= sum(p.total_seconds() for p in pauses)
    assert len(history.events) < 10 * tries  # a few events per try, not one per attempt
