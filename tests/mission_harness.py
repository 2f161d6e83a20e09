"""End-to-end harness: a real Authority, the coordinator Worker and real agent runtimes.

``mission_stack(env, tmp_path)`` yields a :class:`MissionStack` whose ``agent(...)`` starts an
:class:`~missionweave.worker.AgentRuntime` with the given handlers, and whose ``start(spec)``
starts a ``Mission`` workflow on the coordinator's task queue.

Time-skipping tests pass ``clock=VirtualClock`` and ``interceptors=[FollowTemporalTime(clock)]``:
the Authority, the coordinator Worker *and* every agent runtime (its Worker, its SUBSCRIBE and
Presence frames, its offer and deadline checks) then follow the test server's time.
``agent(..., actor=...)`` starts a runtime for a member added earlier with
``stack.add_agent`` (a test can act as that member with raw updates first).

The coordinator and every agent share one filesystem artifact store (``tmp/artifacts``,
:attr:`MissionStack.artifacts`): what a handler publishes is what the review verifies.
``mission_stack(..., checks=..., schemas=...)`` registers review checks and JSON Schemas.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Interceptor

from missionweave.activities import Check
from missionweave.artifacts import ArtifactStore, FilesystemStore
from missionweave.authority import now_ms
from missionweave.dev import coordinator_worker
from missionweave.protocol import Actor, AgentCard
from missionweave.protocol.temporal_contract import MissionResult, MissionSpec, mission_workflow_id
from missionweave.worker import (
    AdmissionPolicy,
    AgentRuntime,
    HandlerRegistry,
    Submission,
    WorkContext,
)
from missionweave.workflows import MissionWorkflow
from missionweave.workflows._mission import MISSION_STATUS, OPEN_WORK_ITEMS

from .contracts import contract as build_contract
from .temporal_env import AuthorityStack, authority_stack, new_task_queue

#: The Mission tests' contract: the suite's one builder (:func:`tests.contracts.contract`) with
#: the ``step`` preset (one deterministic criterion ``done``, capability ``demo.step@1.0``).
contract = partial(build_contract, preset="step")


def step_registry(
    capability: str = "demo.step", version: str = "1.0", estimate_ms: int | None = None
) -> HandlerRegistry:
    """One handler, ``capability@version``: checks its lease (``guard``), then submits
    ``{"result": {"item": <id>}}`` with a passing Evidence for criterion ``done``;
    ``estimate_ms``: the duration it declares (admission control's expected wait)."""
    reg = HandlerRegistry()

    @reg.handler(capability, version=version, estimate_ms=estimate_ms)
    async def step(ctx: WorkContext, input: dict[str, object]) -> Submission:
        await ctx.guard()
        return Submission(
            outputs={"result": {"item": ctx.work_item_id}},
            evidence=[ctx.evidence("done", method="demo")],
        )

    return reg


async def until(what: str, probe: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    """Poll ``probe`` (sync or async) every 50 ms until it returns something truthy; that value.

    Raises:
        AssertionError: ``timeout_s`` passed first.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        got = probe()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@dataclass(frozen=True)
class Ending:
    """How a Mission's execution ended, as Temporal shows it.

    Attributes:
        status: the execution's status (``COMPLETED``, ``FAILED`` …).
        failure: the type of the ``ApplicationError`` it failed with (``None``: none).
        non_retryable: that error's flag.
        mission_status / open_items: the ``MissionStatus`` and ``OpenWorkItems`` search
            attributes.
    """

    status: str
    failure: str | None
    non_retryable: bool
    mission_status: str | None
    open_items: int | None


async def ending(handle: WorkflowHandle[Any, Any], timeout_s: float = 25.0) -> Ending:
    """Wait for the Mission's execution to close; how it ended (:class:`Ending`)."""
    failure, non_retryable = None, False
    try:
        await asyncio.wait_for(handle.result(), timeout_s)
    except WorkflowFailureError as exc:
        if isinstance(exc.cause, ApplicationError):
            failure, non_retryable = exc.cause.type, exc.cause.non_retryable
    desc = await handle.describe()
    attrs = desc.typed_search_attributes
    return Ending(
        status=desc.status.name if desc.status else "?",
        failure=failure,
        non_retryable=non_retryable,
        mission_status=attrs.get(MISSION_STATUS),
        open_items=attrs.get(OPEN_WORK_ITEMS),
    )


@dataclass
class MissionStack:
    env: WorkflowEnvironment
    stack: AuthorityStack
    tmp: Path
    task_queue: str
    artifacts: ArtifactStore
    clock: Callable[[], int] = now_ms
    interceptors: Sequence[Interceptor] = ()
    runtimes: list[AgentRuntime] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def group(self) -> str:
        return self.stack.group

    async def agent(
        self,
        agent_id: str,
        handlers: HandlerRegistry,
        *,
        capabilities: Sequence[str] = ("demo.step@1.0",),
        max_concurrency: int = 2,
        roles: Sequence[str] = ("worker",),
        actor: Actor | None = None,
        admission: AdmissionPolicy | None = None,
        authority_url: str | None = None,
    ) -> AgentRuntime:
        """Start an agent runtime; ``actor``: a member added before (else a new one);
        ``authority_url``: reach the Authority there (a proxy) instead of directly."""
        if actor is None:
            actor = await self.stack.add_agent(
                agent_id, roles, capabilities=capabilities, max_concurrency=max_concurrency
            )
        card = AgentCard(
            agent_id=agent_id,
            version=2,
            public_key=actor.public_key,
            capabilities=list(capabilities),
            max_concurrency=max_concurrency,
        )
        rt = AgentRuntime(
            card,
            actor.key,
            groups=[self.group],
            authority_url=authority_url or self.stack.url,
            temporal_client=self.env.client,
            handlers=handlers,
            state_path=self.tmp / f"{agent_id}.sqlite3",
            clock=self.clock,
            interceptors=self.interceptors,
            admission=admission,
            artifact_store=self.artifacts,
        )
        self.runtimes.append(rt)
        self.tasks.append(asyncio.create_task(rt.run()))
        return rt

    def spec(self, mission_id: str, items: list[dict[str, Any]], **over: Any) -> MissionSpec:
        return MissionSpec.model_validate(
            {
                "group_id": self.group,
                "mission_id": mission_id,
                "title": f"test {mission_id}",
                "items": items,
                "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
                **over,
            }
        )

    async def start(self, spec: MissionSpec) -> WorkflowHandle[Any, MissionResult]:
        return await self.env.client.start_workflow(
            MissionWorkflow.run,
            args=[spec, None],
            id=mission_workflow_id(spec.mission_id),
            task_queue=self.task_queue,
            static_summary=spec.title,
        )


@contextlib.asynccontextmanager
async def mission_stack(
    env: WorkflowEnvironment,
    tmp: Path,
    interceptors: Sequence[Interceptor] = (),
    clock: Callable[[], int] | None = None,
    *,
    checks: dict[str, Check] | None = None,
    schemas: dict[str, dict[str, Any]] | None = None,
    authority_process: bool = False,
) -> AsyncIterator[MissionStack]:
    """Authority (on ``clock``), coordinator Worker (with ``interceptors``, review ``checks``
    and ``schemas``) and, through :meth:`MissionStack.agent`, agent runtimes on the same clock
    and interceptors, all sharing one artifact store; every runtime and Worker is stopped on
    exit. ``authority_process``: the Authority runs as its own process (see
    :func:`~tests.temporal_env.authority_stack`)."""
    async with authority_stack(tmp, clock=clock, process=authority_process) as stack:
        tq = new_task_queue()
        store = FilesystemStore(tmp / "artifacts")
        ms = MissionStack(
            env, stack, tmp, tq, store, clock=stack.clock, interceptors=list(interceptors)
        )
        async with coordinator_worker(
            env.client,
            stack.client,
            stack.coordinator,
            task_queue=tq,
            interceptors=list(interceptors),
            checks=checks,
            schemas=schemas,
            artifact_store=store,
        ):
            try:
                yield ms
            finally:
                for rt in ms.runtimes:
                    await rt.stop()
                # A runtime that failed, or did not stop within 15 s, fails the test: only a
                # cancellation (the test's own) is expected here.
                failures: list[Exception] = []
                for t in ms.tasks:
                    try:
                        await asyncio.wait_for(t, 15)
                    except asyncio.CancelledError:
                        pass
                    except Exception as exc:
                        failures.append(exc)
                if failures:
                    raise ExceptionGroup("agent runtimes failed", failures)
