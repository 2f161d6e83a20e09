"""The stand-in Mission for the agent runtime's tests (``tests/worker``): a real Authority on
loopback, a Temporal server, and ``StandInMissionWorkflow`` — a stand-in for the real Mission
workflow, used only to exercise the runtime's side of an offer: it schedules one
``execute_work_item`` per offered WorkItem on the agent's task queue (the offer *is* the
activity, docs/design.md §4.3), and the runtime answers each one with its own signed Commands
to the Authority.

:func:`stand_in_env` starts a time-skipping server of its own; :func:`stand_in_worker` runs the
stand-in on one; :func:`agent_runtime` is ``worker-0``'s runtime in a
:class:`~tests.support.world.World`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from missionweave.protocol import AgentCard, WorkContract
from missionweave.protocol.temporal_contract import (
    ExecuteWorkItemInput,
    OfferTerms,
    ProgressSignal,
    WorkOutcome,
    agent_task_queue,
)
from missionweave.worker import AgentRuntime, load_handlers
from missionweave.workflows._edges import execute_work_item
from tests.support.world import World

TEST_SERVER = str(Path(sys.executable).with_name("temporal-test-server"))
STAND_IN_QUEUE = "stand-in-coordinator"


class StandInItem(BaseModel):
    contract: WorkContract
    input: dict[str, Any] = {}
    offer: OfferTerms


class StandInSpec(BaseModel):
    group_id: str
    mission_id: str
    agent_id: str
    items: dict[str, StandInItem]


@workflow.defn(name="StandInMission")
class StandInMissionWorkflow:
    """Stand-in for the Mission workflow (tests only): each item's offer as an activity."""

    @workflow.init
    def __init__(self, spec: StandInSpec) -> None:
        self.spec = spec
        self.outcomes: dict[str, WorkOutcome] = {}
        self.progress: list[str] = []

    @workflow.run
    async def run(self, spec: StandInSpec) -> dict[str, WorkOutcome]:
        await asyncio.gather(*(self._offer(w, it) for w, it in spec.items.items()))
        return self.outcomes

    async def _offer(self, wid: str, item: StandInItem) -> None:
        work = ExecuteWorkItemInput(
            group_id=self.spec.group_id,
            mission_id=self.spec.mission_id,
            work_item_id=wid,
            contract=item.contract,
            input=item.input,
            offer=item.offer,
        )
        self.outcomes[wid] = await workflow.execute_activity(
            execute_work_item,
            work,
            task_queue=agent_task_queue(self.spec.agent_id, self.spec.group_id),
            schedule_to_start_timeout=timedelta(minutes=1),
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(milliseconds=item.contract.timeouts.lease_ms),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )

    @workflow.signal
    def report_progress(self, sig: ProgressSignal) -> None:
        self.progress.append(sig.report.phase)

    @workflow.query
    def seen(self) -> dict[str, Any]:
        return {
            "progress": self.progress,
            "outcomes": {k: v.kind.value for k, v in self.outcomes.items()},
        }


async def stand_in_env() -> WorkflowEnvironment:
    """A time-skipping test server of its own (the caller stops it)."""
    return await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=TEST_SERVER, data_converter=pydantic_data_converter
    )


@asynccontextmanager
async def stand_in_worker(
    env: WorkflowEnvironment | None = None, task_queue: str = STAND_IN_QUEUE
) -> AsyncIterator[WorkflowEnvironment]:
    """A Worker running :class:`StandInMissionWorkflow` on ``task_queue`` for the block, on
    ``env`` (default: :func:`stand_in_env`, stopped at the end); the environment."""
    async with (
        await stand_in_env() if env is None else _kept(env) as running,
        Worker(
            running.client,
            task_queue=task_queue,
            workflows=[StandInMissionWorkflow],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ),
    ):
        yield running


@asynccontextmanager
async def _kept(env: WorkflowEnvironment) -> AsyncIterator[WorkflowEnvironment]:
    yield env  # a session's server: not stopped here


async def start_stand_in(
    env: WorkflowEnvironment, spec: StandInSpec, workflow_id: str, task_queue: str = STAND_IN_QUEUE
) -> WorkflowHandle[Any, dict[str, WorkOutcome]]:
    """Start :class:`StandInMissionWorkflow` over ``spec`` as ``workflow_id``; its handle."""
    return await env.client.start_workflow(
        StandInMissionWorkflow.run, spec, id=workflow_id, task_queue=task_queue
    )


def agent_runtime(
    w: World,
    authority_url: str,
    client: Client | Any,
    state: Path,
    *,
    capabilities: Sequence[str] = ("dist.verify@1.2",),
    max_concurrency: int = 2,
    handlers: Sequence[str] = ("tests.support.worker_handlers",),
    groups: Sequence[str] | None = None,
    **kw: Any,
) -> AgentRuntime:
    """``worker-0``'s :class:`AgentRuntime` in ``w``'s Group (or ``groups``): its Agent Card
    offers ``capabilities`` on ``max_concurrency`` slots, its handlers are the modules
    ``handlers`` (dotted names), its state file ``state``, its tick 200 ms; ``kw`` goes to
    :class:`AgentRuntime` (``clock``, ``tick``, ``admission`` …)."""
    worker = w.workers[0]
    card = AgentCard(
        agent_id=worker.agent_id,
        public_key=worker.public_key,
        capabilities=list(capabilities),
        max_concurrency=max_concurrency,
    )
    return AgentRuntime(
        card,
        worker.key,
        groups=list(groups or [w.group]),
        authority_url=authority_url,
        temporal_client=client,
        handlers=load_handlers(*handlers),
        state_path=state,
        **{"tick": timedelta(milliseconds=200), **kw},
    )
