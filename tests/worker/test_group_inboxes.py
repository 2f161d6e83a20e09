"""A per-Group inbox (MW-11.1-a): an agent in two Groups takes each Group's offers from that
Group's own Temporal task queue (``agent_task_queue(agent, group)``), polled by a Worker of
its own, so one Group's flood of offers does not hold back the other's.

A real Authority on loopback with two Groups, the runtime in process, the real Temporal dev
server (its task queues hand out a backlog oldest first; the time-skipping server's do not)
with ``StandInMissionWorkflow`` scheduling each offer as an activity on the agent's queue for
the offer's Group. Both backlogs are queued before the agent starts; an activity interceptor
records the order in which the agent takes the offers."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from missionweave.protocol.temporal_contract import OfferTerms, OutcomeKind
from missionweave.worker import AdmissionPolicy
from tests.support.contracts import contract
from tests.support.serving import LiveServer
from tests.support.world import World, another_group
from tests.worker.stand_in import (
    StandInItem,
    StandInMissionWorkflow,
    StandInSpec,
    agent_runtime,
    stand_in_worker,
)

FLOOD = 20


class _Taken(Interceptor):
    """Records ``(group, work_item)`` of each ``execute_work_item`` as the agent takes it."""

    def __init__(self) -> None:
        self.order: list[tuple[str, str]] = []

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        order = self.order

        class _Record(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                work = input.args[0]
                order.append((work.group_id, work.work_item_id))
                return await super().execute_activity(input)

        return _Record(next)


async def _offers(
    w: World, env: WorkflowEnvironment, queue: str, wids: list[str]
) -> WorkflowHandle[Any, Any]:
    """Authorize and offer ``wids`` to ``worker-0`` in ``w``'s Group; start the stand-in
    workflow that schedules one activity per offer, and wait until all are scheduled."""
    w0 = w.workers[0]
    items = {}
    for wid in wids:
        w.authorize(wid, required_capabilities=["dist.verify@1.0"])
        terms = OfferTerms(
            offer_id=w.offer(wid, w0, expires_in_ms=600_000),
            revision=1,
            expires_at_ms=w.clock.now + 600_000,
        )
        items[wid] = StandInItem(
            contract=contract(required_capabilities=["dist.verify@1.0"]),
            input={"files": ["x.tar"]},
            offer=terms,
        )
    spec = StandInSpec(group_id=w.group, mission_id=w.mission, agent_id=w0.agent_id, items=items)
    handle = await env.client.start_workflow(
        StandInMissionWorkflow.run, spec, id=f"{queue}-{w.group}", task_queue=queue
    )
    for _ in range(600):
        pending = (await handle.describe()).raw_description.pending_activities
        if len(pending) == len(wids):
            return handle
        await asyncio.sleep(0.05)
    raise AssertionError(f"the offers of {w.group} were not all scheduled")


async def test_one_group_s_flood_does_not_hold_back_another_s_offer__MW_11_1_a(
    dev_env: WorkflowEnvironment, world: World, tmp_path: Path
) -> None:
    """``g1`` floods the agent with 20 offers, then ``g2`` offers one: with one slot and a
    queue depth of 3, the agent takes ``g2``'s offer among the first, not after the flood."""
    other = another_group(world)
    live = LiveServer(world.authority, poll_interval_s=0.05)
    await live.start()
    queue = f"stand-in-{uuid.uuid4().hex[:8]}"
    taken = _Taken()
    try:
        async with stand_in_worker(dev_env, queue) as env:
            flood = await _offers(world, env, queue, [f"f{n:02}" for n in range(FLOOD)])
            single = await _offers(other, env, queue, ["b"])  # queued after the whole flood
            rt = agent_runtime(
                world,
                live.url,
                env.client,
                tmp_path / "agent" / "worker-0.db",
                max_concurrency=1,
                groups=[world.group, other.group],
                admission=AdmissionPolicy(max_queue_depth=3),
                clock=world.clock,
                interceptors=[taken],
            )
            async with rt:
                (b,) = (await asyncio.wait_for(single.result(), 120)).values()
                flooded = await asyncio.wait_for(flood.result(), 120)
    finally:
        await live.stop()
    assert b.kind is OutcomeKind.SUBMITTED
    assert {o.kind for o in flooded.values()} <= {OutcomeKind.SUBMITTED, OutcomeKind.DECLINED}
    assert len(taken.order) == FLOOD + 1
    position = taken.order.index(("g2", "b"))
    # its own inbox: taken among the first offers, not behind the other Group's backlog
    assert position < FLOOD // 2, taken.order
