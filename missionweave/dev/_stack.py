"""The embedded stack of one machine: everything MissionWeave needs, in one process
(docs/design.md §8).

:class:`EmbeddedStack` starts, under one data directory:

* the Temporal dev server (:class:`~missionweave.dev.TemporalDevServer`: ``temporal.db``, our
  search attributes registered, the web UI unless headless);
* the Group Authority on SQLite (``authority.db``, key ``authority.key``) served over HTTP and
  WebSocket;
* the filesystem artifact store (``artifacts/``, one namespace per Group under ``groups/``),
  which only the Authority serves — to members, one object at a time after its checks — and
  the coordinator's review reads;
* the coordinator (key ``keys/coordinator.pem``): a Temporal Worker hosting the ``Mission``
  workflow and its activities. On the first start it creates the Group (default ``demo``) with
  itself as owner, coordinator and mission owner; later starts find it there;
* optionally agents (:meth:`EmbeddedStack.start_agent`), each an
  :class:`~missionweave.worker.AgentRuntime` with its state under ``agents/``, publishing to
  that store through the Authority.

Public names are re-exported by :mod:`missionweave.dev`. ``missionweave dev up`` runs the stack
until Ctrl-C; the demo runs a Mission on it::

    async with EmbeddedStack("data", temporal_port=0, ui_port=0, authority_port=0) as stack:
        await stack.start_agent(card, key, load_handlers("my.handlers"))
        handle = await stack.client.start_workflow(...)

It stops in reverse order of start: agents, the coordinator Worker, the Authority client, the
HTTP server, the Authority, and the Temporal server last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from ..artifacts import FilesystemStore
from ..authority import Authority, AuthorityConfig, AuthorityError
from ..authority.client import AuthorityClient, AuthorityUnavailable
from ..coordinator import coordinator_worker, count_missions
from ..metrics import temporal_runtime
from ..protocol import Actor, AgentCard, MissionWeaveError, SigningKey
from ..protocol.temporal_contract import mission_workflow_id
from ..telemetry import temporal_interceptors
from ._build import AuthorityServer, StackError, StackFiles, load_or_create_key, lock_data_dir
from ._devserver import DevServerError, TemporalDevServer, workflow_ui_url
from ._groups import OWNER_ROLES, ensure_group, ensure_member

if TYPE_CHECKING:
    from ..activities import Check
    from ..worker import AgentRuntime, HandlerRegistry

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The Group the embedded stack creates unless told otherwise.
DEFAULT_GROUP = "demo"
#: Restarts of a dead part :meth:`EmbeddedStack.supervise` tries within
#: :data:`RESTART_WINDOW_S` seconds before it gives up.
RESTARTS = 3
RESTART_WINDOW_S = 60.0
#: Seconds the coordinator Worker gets to stop when the Temporal server is gone.
DRAIN_WITHOUT_TEMPORAL_S = 5.0


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for it."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _running(part: T | None) -> T:
    """``part`` of a running stack; :class:`StackError` when the stack is not running."""
    if part is None:
        raise StackError("the embedded stack is not running")
    return part


class StackPorts(TypedDict, total=False):
    """Where an :class:`EmbeddedStack` listens, as one value a caller carries and passes on
    (``EmbeddedStack(data_dir, **ports)``): its keyword arguments ``temporal_port``,
    ``ui_port``, ``authority_port`` (0: a free one) and ``headless``. A key left out keeps the
    stack's default; what ``missionweave dev up`` and ``missionweave demo`` take as
    ``--temporal-port``, ``--ui-port``, ``--authority-port`` and ``--headless``."""

    temporal_port: int
    ui_port: int
    authority_port: int
    headless: bool


class EmbeddedStack:
    """Temporal dev server, Authority, artifact store and coordinator under one data directory.

    Args:
        data_dir: the directory holding every file of the stack (created if missing).
        host: the interface every server binds.
        temporal_port: the Temporal gRPC frontend port (0: a free one).
        ui_port: the Temporal web UI port (0: a free one).
        authority_port: the Authority's HTTP port (0: a free one).
        headless: run Temporal without its web UI.
        group: the Group the coordinator creates (or finds) on start.
        coordinator_id: the coordinator's agent id.
        namespace: the Temporal namespace.
        temporal_log_level: the dev server's log level.
        dynamic_config: Temporal dynamic config values (see ``TemporalDevServer``).
        checks: deterministic review checks by name, for the coordinator.
        schemas: JSON Schemas by id, for deliverables.
        interceptors: Temporal client interceptors; the coordinator's and the agents' Workers
            use those that are also worker interceptors. OpenTelemetry tracing
            (:func:`missionweave.telemetry.temporal_interceptors`) is added unless one of them
            traces; it records nothing until tracing is configured.

    Attributes: :attr:`files` (the data directory's layout), :attr:`temporal` (the dev
    server), :attr:`artifacts`, :attr:`agents`; while it runs (else :class:`StackError`):
    :attr:`client` (Temporal, pydantic data converter), :attr:`authority` (served over HTTP at
    :attr:`authority_url`), :attr:`authority_client` (pinned to its key, signing as the
    coordinator) and :attr:`coordinator` (its Membership Epoch in :attr:`group` current).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        temporal_port: int = 7233,
        ui_port: int = 8233,
        authority_port: int = 8787,
        headless: bool = False,
        group: str = DEFAULT_GROUP,
        coordinator_id: str = "coordinator",
        namespace: str = "default",
        temporal_log_level: str = "warn",
        dynamic_config: Mapping[str, Any] | None = None,
        checks: Mapping[str, Check] | None = None,
        schemas: Mapping[str, dict[str, Any]] | None = None,
        interceptors: Sequence[Interceptor] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.files = StackFiles(self.data_dir)
        self.host = host
        self.authority_port = authority_port
        self.group = group
        self.coordinator_id = coordinator_id
        self.checks = dict(checks or {})
        self.schemas = dict(schemas or {})
        self.interceptors = list(interceptors)
        self.temporal = TemporalDevServer(
            self.data_dir,
            port=temporal_port,
            ui=not headless,
            ui_port=ui_port,
            ip=host,
            namespace=namespace,
            log_level=temporal_log_level,
            dynamic_config=dynamic_config,
        )
        self._exit: AsyncExitStack | None = None
        self._client: Client | None = None
        self._authority: Authority | None = None
        self._authority_client: AuthorityClient | None = None
        self._coordinator: Actor | None = None
        self._worker_run: asyncio.Task[None] | None = None
        self.artifacts = FilesystemStore(self.files.artifacts)
        self.agents: dict[str, AgentRuntime] = {}

    # -------------------------------------------------------------------------- where

    @property
    def coordinator_key_path(self) -> Path:
        """``<data_dir>/keys/<coordinator_id>.pem``, created on the first start."""
        return self.files.key(self.coordinator_id)

    @property
    def authority_url(self) -> str:
        """``http://host:port`` of the Authority (the port is known after :meth:`start`)."""
        return f"http://{self.host}:{self.authority_port}"

    def mission_url(self, mission_id: str) -> str | None:
        """The web UI page of a Mission's workflow (its latest run), or ``None`` when headless."""
        if self.ui_url is None:
            return None
        return workflow_ui_url(self.ui_url, self.namespace, mission_workflow_id(mission_id))

    @property
    def running(self) -> bool:
        """Whether :meth:`start` completed and :meth:`stop` has not run."""
        return self._exit is not None

    # --------------------------------------------------------------------- lifecycle

    @property
    def temporal_target(self) -> str:
        """``host:port`` of the Temporal frontend (its port is known after :meth:`start`)."""
        return self.temporal.target

    @property
    def namespace(self) -> str:
        """The Temporal namespace."""
        return self.temporal.namespace

    @property
    def ui_url(self) -> str | None:
        """``http://host:port`` of the Temporal web UI, or ``None`` when headless."""
        return self.temporal.ui_url

    @property
    def client(self) -> Client:
        """The Temporal client (pydantic data converter)."""
        return _running(self._client)

    @property
    def authority(self) -> Authority:
        """The Authority (served over HTTP at :attr:`authority_url`)."""
        return _running(self._authority)

    @property
    def authority_client(self) -> AuthorityClient:
        """An HTTP client of the Authority, pinned to its key, signing as the coordinator."""
        return _running(self._authority_client)

    @property
    def coordinator(self) -> Actor:
        """The coordinator identity, its Membership Epoch in :attr:`group` current."""
        return _running(self._coordinator)

    async def start(self) -> None:
        """Start every part and wait until each answers.

        Raises:
            StackError: already running; a port is taken; a key file is unreadable; the
                Authority database was created with another key; the Group belongs to
                another coordinator key; the Temporal dev server cannot start; the Authority
                did not answer its first request. Its message is one line, for a CLI.
        """
        if self._exit is not None:
            raise StackError("the embedded stack is already running")
        exits = AsyncExitStack()
        try:
            await self._start(exits)
        except BaseException as exc:
            await exits.aclose()
            if isinstance(exc, DevServerError):  # its message ends with the server's log
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                first = lines[0].removesuffix(":") if lines else "cannot start"
                last = f" — {lines[-1][:200]}" if len(lines) > 1 else ""
                raise StackError(f"Temporal dev server: {first}{last}") from exc
            if isinstance(exc, AuthorityUnavailable):
                raise StackError(f"the Authority did not answer: {exc}") from exc
            raise
        self._exit = exits

    async def _start(self, exits: AsyncExitStack) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        exits.callback(lock_data_dir(self.files))
        self.files.artifacts.mkdir(exist_ok=True)
        # Registered first, so it is stopped last: every Worker drains before it goes.
        exits.push_async_callback(self.temporal.stop)
        temporal_started = asyncio.create_task(self.temporal.start(), name="temporal-dev")
        try:
            await self._start_authority(exits)
            await temporal_started
        finally:
            if not temporal_started.done():
                temporal_started.cancel()
                with contextlib.suppress(BaseException):
                    await temporal_started
        self._client = await Client.connect(
            self.temporal.target,
            namespace=self.namespace,
            data_converter=pydantic_data_converter,
            interceptors=self._client_interceptors(),
            runtime=temporal_runtime(),  # the SDK's metrics, once the process serves them
        )
        worker = coordinator_worker(
            self._client,
            self.authority_client,
            self.coordinator,
            checks=self.checks,
            schemas=self.schemas,
            artifact_store=self.artifacts,
        )
        # Run as a task, not `async with`: when Temporal is gone for good the Worker cannot
        # drain, and its fatal error must not cancel whoever started the stack (supervise()
        # reports it instead).
        self._worker_run = asyncio.create_task(worker.run(), name="coordinator-worker")
        exits.push_async_callback(self._stop_worker, worker, self._worker_run)
        counting = count_missions(self._client)
        if counting is not None:
            exits.push_async_callback(_cancelled, counting)
        log.info(
            "embedded stack up: Temporal %s, Authority %s, group %s",
            self.temporal_target,
            self.authority_url,
            self.group,
        )

    async def _stop_worker(self, worker: Worker, run: asyncio.Task[None]) -> None:
        """Drain the coordinator Worker; without a Temporal server there is nothing to drain
        against, so it gets :data:`DRAIN_WITHOUT_TEMPORAL_S` seconds and is then cancelled."""
        stopping = asyncio.create_task(worker.shutdown())
        bound = None if self.temporal.running else DRAIN_WITHOUT_TEMPORAL_S
        await asyncio.wait({run}, timeout=bound)
        for task in (run, stopping):
            if not task.done():
                task.cancel()
        await asyncio.wait({run, stopping}, timeout=DRAIN_WITHOUT_TEMPORAL_S)
        if run.done() and not run.cancelled() and (exc := run.exception()) is not None:
            log.warning("the coordinator's Worker ended with %r", exc)
        self._worker_run = None

    def _client_interceptors(self) -> list[Interceptor]:
        """The given interceptors, plus OpenTelemetry tracing unless one of them traces (the
        client's Workers inherit it; a no-op until tracing is configured)."""
        from temporalio.contrib.opentelemetry import TracingInterceptor

        if any(isinstance(i, TracingInterceptor) for i in self.interceptors):
            return list(self.interceptors)
        return [*self.interceptors, *temporal_interceptors()]

    async def _start_authority(self, exits: AsyncExitStack) -> None:
        if self.files.authority_db.exists() and not self.files.authority_key.exists():
            raise StackError(
                f"{self.files.authority_key} is missing but {self.files.authority_db} exists: "
                "restore the key that signed its log, or use another --data-dir"
            )
        key = load_or_create_key(self.files.authority_key)
        coordinator = Actor(self.coordinator_id, load_or_create_key(self.coordinator_key_path))
        # the coordinator is this stack's operator: it creates the Group and reads everything
        config = AuthorityConfig(operator_keys=frozenset({coordinator.public_key}))
        try:
            authority = Authority(self.files.authority_db, key, config)
        except AuthorityError as exc:
            raise StackError(f"{self.files.authority_db}: {exc}") from None
        self._authority = authority
        exits.callback(authority.close)
        # the Authority alone hands out the store's objects (MW-13.3-d); the coordinator's
        # review reads it as the operator
        server = AuthorityServer(
            authority, host=self.host, port=self.authority_port, artifact_store=self.artifacts
        )
        await server.start()
        exits.push_async_callback(server.stop)
        self.authority_port = server.port
        client = AuthorityClient(
            self.authority_url,
            authority_public_key=authority.public_key,
            signing_key=coordinator.key,
        )
        self._authority_client = client
        exits.push_async_callback(client.aclose)
        try:
            created = await ensure_group(client, coordinator, self.group, OWNER_ROLES)
        except MissionWeaveError as exc:
            raise StackError(str(exc)) from None
        self._coordinator = coordinator
        log.info("group %s %s", self.group, "created" if created else "found")

    async def supervise(
        self,
        notify: Callable[[str], None] = log.warning,
        *,
        restarts: int = RESTARTS,
        window_s: float = RESTART_WINDOW_S,
    ) -> None:
        """Watch the parts that run as their own process (the Temporal dev server) until
        cancelled, and start again one that dies, on the same ports and state: the Workers and
        clients reconnect to it by themselves.

        Args:
            notify: told, in one line, when a part died and when it is back.
            restarts: how many restarts within ``window_s`` seconds are tried; one more death
                in the window ends the watch.
            window_s: the window, seconds.

        Raises:
            StackError: a part died more than ``restarts`` times within ``window_s`` seconds,
                or could not start again, or the coordinator's Temporal Worker stopped; the
                message names it. The stack must then be stopped: it is not up any more.
        """
        loop = asyncio.get_running_loop()
        deaths: list[float] = []
        while True:
            code = await self._part_died()
            now = loop.time()
            deaths = [t for t in deaths if now - t < window_s] + [now]
            what = f"the Temporal dev server ({self.temporal_target}) exited with code {code}"
            if len(deaths) > restarts:
                raise StackError(
                    f"{what}, {len(deaths)} times in {window_s:g} s; see {self.temporal.log_path}"
                )
            notify(f"{what}; starting it again")
            try:
                await self.temporal.start()
            except DevServerError as exc:
                first = str(exc).splitlines()[0].removesuffix(":") if str(exc) else "no answer"
                raise StackError(f"{what} and did not start again: {first}") from exc
            notify(f"the Temporal dev server is back on {self.temporal_target}")

    async def _part_died(self) -> int:
        """The Temporal server's exit code once it dies.

        Raises:
            StackError: the coordinator's Worker stopped first.
        """
        worker = self._worker_run
        died = asyncio.ensure_future(self.temporal.wait())
        try:
            await asyncio.wait(
                {died} | ({worker} if worker else set()), return_when=asyncio.FIRST_COMPLETED
            )
            if worker is not None and worker.done() and not died.done():
                exc = None if worker.cancelled() else worker.exception()
                raise StackError(f"the coordinator's Temporal Worker stopped: {exc!r}")
            return await died
        finally:
            died.cancel()

    async def stop(self) -> None:
        """Stop every part, agents first and the Temporal server last. Safe to call twice."""
        exits, self._exit = self._exit, None
        if exits is not None:
            await exits.aclose()
        self._client = self._authority_client = self._coordinator = None
        self._authority = None
        self.agents.clear()

    async def __aenter__(self) -> EmbeddedStack:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------------ agents

    async def add_member(
        self, agent_id: str, public_key: str, roles: Sequence[str] = ("worker",)
    ) -> str:
        """Make ``agent_id`` a member of :attr:`group` with at least ``roles`` (idempotent).

        Returns:
            ``"added"``, ``"updated"`` or ``"present"``.
        """
        return await ensure_member(
            self.authority_client, self.coordinator, self.group, agent_id, public_key, roles
        )

    async def start_agent(
        self,
        card: AgentCard,
        key: SigningKey,
        handlers: HandlerRegistry,
        *,
        roles: Sequence[str] = ("worker",),
        **runtime_kw: Any,
    ) -> AgentRuntime:
        """Add the agent to :attr:`group` (if needed) and run an ``AgentRuntime`` for it until
        the stack stops; its local state is ``<data_dir>/agents/<agent_id>.db``.

        Args:
            card: its Agent Card (``public_key`` = ``key``'s).
            key: its signing key.
            handlers: its work handlers.
            roles: its roles in the Group.
            **runtime_kw: more ``AgentRuntime`` arguments (``admission``, ``max_wait``,
                ``interceptors`` …). Its handlers reach :attr:`artifacts` only through the
                Authority's grants (``ctx.publish`` / ``ctx.fetch``).

        Returns:
            The runtime, once it follows the Group's log (``runtime.ready``).

        Raises:
            StackError: the stack is not running, or the runtime stopped while starting (the
                cause is chained).
        """
        from ..worker import AgentRuntime

        if self._exit is None:
            raise StackError("the embedded stack is not running")
        await self.add_member(card.agent_id, key.public_key, roles)
        runtime = AgentRuntime(
            card,
            key,
            groups=[self.group],
            authority_url=self.authority_url,
            temporal_client=self.client,
            handlers=handlers,
            state_path=self.files.agent_state(card.agent_id),
            **runtime_kw,
        )
        task = asyncio.create_task(runtime.run(), name=f"agent-{card.agent_id}")

        async def stop_agent() -> None:
            await runtime.stop()
            try:
                await asyncio.wait_for(
                    asyncio.shield(task), runtime.graceful_shutdown.total_seconds() + 5
                )
            except TimeoutError:
                task.cancel()
            except Exception as exc:  # already reported when it happened
                log.debug("agent %s ended with %r", card.agent_id, exc)
            with contextlib.suppress(BaseException):
                await task

        self._exit.push_async_callback(stop_agent)
        self.agents[card.agent_id] = runtime
        ready = asyncio.create_task(runtime.ready.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            exc = task.exception() if not task.cancelled() else None
            raise StackError(f"agent {card.agent_id} stopped while starting: {exc!r}") from exc
        return runtime


__all__ = ["DEFAULT_GROUP", "EmbeddedStack"]
