"""End-to-end harness: a real Authority, the coordinator Worker and real agent runtimes.

``mission_stack(env, tmp_path)`` yields a :class:`MissionStack` whose ``agent(...)`` starts an
:class:`~missionweave.worker.AgentRuntime` with the given handlers, and whose ``start(spec)``
starts a ``Mission`` workflow on the coordinator's task queue.

Time-skipping tests pass ``clock=VirtualClock`` and ``interceptors=[FollowTemporalTime(clock)]``:
the Authority, the coordinator Worker *and* every agent runtime (its Worker, its SUBSCRIBE and
Presence frames, its offer and deadline checks) then follow the test server's time.
``agent(..., actor=...)`` starts a runtime for a member added earlier with
``stack.add_agent`` (a test can act as that member with raw updates first).

The Authority holds the filesystem artifact store (``tmp/artifacts``,
:attr:`MissionStack.artifacts`), which agents reach through its grants and the coordinator's
review reads as the operator: what a handler publishes is what the review verifies.
``mission_stack(..., checks=..., schemas=...)`` registers review checks and JSON Schemas.

Building Missions: :data:`contract` (the suite's one builder, ``step`` preset),
:func:`work_items` (a spec's items from a dependency graph), :func:`step_registry` and
:func:`submission` (handlers and what they submit). Acting as a member:
:meth:`MissionStack.accept_offer`; a ``missionweave worker`` process:
:meth:`MissionStack.process_member`, :meth:`MissionStack.agent_process`, :func:`stop_process`.
Reading the log: :meth:`MissionStack.events`, :meth:`MissionStack.wait_state`. Waiting for and
reading a Mission's outcome: :mod:`tests.support.mission_outcome`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Interceptor
from typer.testing import CliRunner, Result

from missionweave.activities import Check
from missionweave.artifacts import ArtifactStore
from missionweave.authority import now_ms, verify_log
from missionweave.cli import app
from missionweave.coordinator import coordinator_worker
from missionweave.outcome import start_mission
from missionweave.protocol import Actor, AgentCard, Event, WorkContract
from missionweave.protocol.temporal_contract import (
    CommandVerdict,
    MissionResult,
    MissionSpec,
)
from missionweave.worker import (
    AdmissionPolicy,
    AgentRuntime,
    HandlerRegistry,
    Submission,
    WorkContext,
)

from .cli_processes import COLUMNS
from .contracts import contract as build_contract
from .temporal_env import AuthorityStack, authority_stack, new_task_queue
from .waits import WAIT_S, until

#: The Mission tests' contract: the suite's one builder (:func:`tests.support.contracts.contract`)
#: with the ``step`` preset (one deterministic criterion ``done``, capability ``demo.step@1.0``).
contract = partial(build_contract, preset="step")
#: Timeouts whose lease runs out within a test: a 2 s lease, heartbeats every 0.5 s (the
#: fault tests' frozen and dead agents).
SHORT_LEASE = {"start_deadline_ms": 30_000, "lease_ms": 2_000, "heartbeat_ms": 500}


#: The ``missionweave`` command beside this interpreter, and the repository root (on
#: ``PYTHONPATH`` for the agent processes it starts).
MW = str(Path(sys.executable).with_name("missionweave"))
REPO = Path(__file__).resolve().parents[2]


def work_items(
    graph: Mapping[str, Sequence[str]], c: WorkContract | None = None
) -> list[dict[str, Any]]:
    """The ``items`` of a MissionSpec: one WorkItem per key of ``graph``, depending on the ids
    it maps to, each on contract ``c`` (default: :data:`contract` ``()``)."""
    wire = (c or contract()).wire()
    return [
        {"work_item_id": wid, "contract": wire, **({"dependencies": list(deps)} if deps else {})}
        for wid, deps in graph.items()
    ]


async def mission_cli(env: WorkflowEnvironment, *args: str) -> Result:
    """``missionweave <args>`` against ``env``, in-process (on a thread: it runs its own loop),
    on a terminal wide enough that no table cell wraps."""
    target = env.client.service_client.config.target_host
    return await asyncio.to_thread(
        CliRunner().invoke,
        app,
        [*args, "--temporal-address", target, "--namespace", env.client.namespace],
        env={"COLUMNS": COLUMNS},
    )


def submission(ctx: WorkContext, method: str = "test", **outputs: Any) -> Submission:
    """Output ``result`` = ``{"item": <id>, **outputs}``, with a passing Evidence for criterion
    ``done`` by ``method``."""
    return Submission(
        outputs={"result": {"item": ctx.work_item_id, **outputs}},
        evidence=[ctx.evidence("done", method=method)],
    )


async def stop_process(proc: asyncio.subprocess.Process) -> None:
    """Stop an agent process as its operator does (a frozen one first resumes): SIGINT, then
    after 20 s SIGKILL."""
    if proc.returncode is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.send_signal(signal.SIGINT)
    try:
        await asyncio.wait_for(proc.wait(), WAIT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()


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
        return submission(ctx, method="demo")

    return reg


def agent_card(
    actor: Actor,
    *,
    version: int = 2,
    capabilities: Sequence[str] = ("demo.step@1.0",),
    max_concurrency: int = 1,
) -> AgentCard:
    """``actor``'s Agent Card as its runtime publishes it: ``version`` 2 after the one
    ``AuthorityStack.add_agent`` published (1 for an agent that published none)."""
    return AgentCard(
        agent_id=actor.agent_id,
        version=version,
        public_key=actor.public_key,
        capabilities=list(capabilities),
        max_concurrency=max_concurrency,
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
        card = agent_card(actor, capabilities=capabilities, max_concurrency=max_concurrency)
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
        return await start_mission(self.env.client, spec, task_queue=self.task_queue)

    def events(self, wid: str | None = None) -> list[Event]:
        """The Group log (of one WorkItem when ``wid`` is given), verified first."""
        auth = self.stack.authority
        verify_log(auth.store, self.group, auth.public_key)
        return [e for e in auth.all_events(self.group) if wid is None or e.work_item_id == wid]

    async def wait_state(self, wid: str, state: str) -> None:
        """Wait until the Authority — the source of truth — holds ``wid`` in ``state`` (the
        workflow learns an execution's progress from its activity's result, at its end)."""

        def held() -> bool:
            row = self.stack.authority.work_item(self.group, wid)
            return row is not None and row["state"] == state

        await until(f"the Authority to hold {wid} {state}", held, WAIT_S)

    async def accept_offer(self, actor: Actor, offer: Event) -> CommandVerdict:
        """``actor`` accepts the offer of a ``work.offered`` Event with a Command sent straight
        to the Authority, as agents do (the workflow learns of it from the Authority's log once
        the offer's activity times out unanswered); the verdict."""
        body = {
            "work_item_id": offer.work_item_id,
            "offer_id": offer.body["offer_id"],
            "revision": offer.body["revision"],
        }
        return (await self.stack.submit(actor, "work.accept_offer", body)).verdict()

    async def process_member(self, agent_id: str, capabilities: Sequence[str]) -> Path:
        """Add ``agent_id`` (one slot) for a ``missionweave worker`` process, which opens its
        own session and publishes its card; the card file it is started with."""
        await self.stack.add_agent(
            agent_id,
            capabilities=capabilities,
            max_concurrency=1,
            open_session=False,
            publish_card=False,
        )
        card = self.tmp / f"{agent_id}.json"
        fields = {"agent_id": agent_id, "capabilities": list(capabilities), "max_concurrency": 1}
        card.write_text(json.dumps(fields))
        return card

    async def agent_process(
        self,
        agent_id: str,
        handlers: str,
        *,
        authority_url: str | None = None,
        env: Mapping[str, str] | None = None,
        log: str | None = None,
    ) -> asyncio.subprocess.Process:
        """Start ``missionweave worker`` for a :meth:`process_member` with the handlers of
        module ``handlers``, on this stack's Temporal and (or through ``authority_url``)
        Authority; its state under :attr:`tmp`, its stderr in
        ``tmp/<log or agent_id>.log``. Stop it with :func:`stop_process`."""
        client = self.env.client
        options = {
            "--card": self.tmp / f"{agent_id}.json",
            "--key": self.stack.key_file(agent_id),
            "--handlers": handlers,
            "--group": self.group,
            "--authority-url": authority_url or self.stack.url,
            "--temporal-address": client.service_client.config.target_host,
            "--namespace": client.namespace,
            "--state-dir": self.tmp / "agents",
        }
        argv = itertools.chain.from_iterable((k, str(v)) for k, v in options.items())
        return await asyncio.create_subprocess_exec(
            MW,
            "worker",
            *argv,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=(self.tmp / f"{log or agent_id}.log").open("wb"),
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
    artifact_store: ArtifactStore | None = None,
    authority_metrics_port: int | None = None,
) -> AsyncIterator[MissionStack]:
    """Authority (on ``clock``), coordinator Worker (with ``interceptors``, review ``checks``
    and ``schemas``) and, through :meth:`MissionStack.agent`, agent runtimes on the same clock
    and interceptors, all sharing one artifact store; every runtime and Worker is stopped on
    exit. ``authority_process``: the Authority runs as its own process (see
    :func:`~tests.support.temporal_env.authority_stack`); ``artifact_store``: the store it serves
    (an S3 bucket, say; default ``tmp/artifacts``); ``authority_metrics_port``: the Authority
    process's ``GET /metrics`` port."""
    async with authority_stack(
        tmp,
        clock=clock,
        process=authority_process,
        artifact_store=artifact_store,
        metrics_port=authority_metrics_port,
    ) as stack:
        tq = new_task_queue()
        store = stack.artifacts  # the Authority's; the coordinator reads it as the operator
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
                        await asyncio.wait_for(t, WAIT_S)
                    except asyncio.CancelledError:
                        pass
                    except Exception as exc:
                        failures.append(exc)
                if failures:
                    raise ExceptionGroup("agent runtimes failed", failures)
