"""The embedded stack of one machine: everything MissionWeave needs, in one process
(docs/design.md §8).

:class:`EmbeddedStack` starts, under one data directory:

* the Temporal dev server (:class:`~missionweave.dev.TemporalDevServer`: ``temporal.db``, our
  search attributes registered, the web UI unless headless);
* the Group Authority on SQLite (``authority.db``, key ``authority.key``) served over HTTP and
  WebSocket;
* the filesystem artifact store (``artifacts/``);
* the coordinator (key ``keys/coordinator.pem``): a Temporal Worker hosting the ``Mission``
  workflow and its activities. On the first start it creates the Group (default ``demo``) with
  itself as owner, coordinator and mission owner; later starts find it there;
* optionally agents (:meth:`EmbeddedStack.start_agent`), each an
  :class:`~missionweave.worker.AgentRuntime` with its state under ``agents/``, publishing to the
  same artifact store the coordinator's review reads.

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
import fcntl
import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import uvicorn
from temporalio.client import Client, Interceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from ..artifacts import FilesystemStore
from ..authority import Authority, AuthorityConfig, AuthorityError
from ..authority.client import AuthorityClient, AuthorityUnavailable
from ..authority.http import WS_MAX_BYTES, create_app
from ..protocol import Actor, AgentCard, MissionWeaveError, SignatureError, SigningKey
from ..protocol.temporal_contract import mission_workflow_id
from ..telemetry import temporal_interceptors
from ._coordinator import coordinator_worker
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


class StackError(MissionWeaveError):
    """The embedded stack cannot start: a port is taken, a key file is not a key, the
    Authority database belongs to another key, the Group belongs to another coordinator, the
    Temporal dev server cannot start (the :class:`~missionweave.dev.DevServerError` is its
    ``__cause__``) or the Authority does not answer. The message is one line."""


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the process that embeds the stack owns
    SIGINT/SIGTERM and stops the stack in order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _load_or_create_key(path: Path) -> SigningKey:
    if not path.exists():
        key = SigningKey.generate()
        key.to_file(path)
        log.info("created key %s", path)
        return key
    try:
        return SigningKey.from_file(path)
    except SignatureError as exc:
        raise StackError(f"{path}: {exc}") from None


def _lock_data_dir(data_dir: Path) -> Callable[[], None]:
    """Hold ``data_dir/stack.lock`` (an exclusive ``flock``) while this stack runs: two stacks
    on one directory would run two Temporal servers on one ``temporal.db`` and two Authorities
    on one ``authority.db``. Returns the release function.

    Raises:
        StackError: another process holds it (its pid is named).
    """
    path = data_dir / "stack.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StackError(
            f"{data_dir} is in use by another MissionWeave stack (pid {holder}); stop it, or "
            "give this one another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def release() -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    return release


def _listen(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on sockets that say TCP,
    # and without it every response on a kept-alive connection waited ~40 ms (Nagle's
    # algorithm holding the body until the client's delayed ACK of the headers).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise StackError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


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

    Attributes set by :meth:`start`: :attr:`client` (Temporal), :attr:`authority`,
    :attr:`authority_client`, :attr:`artifacts`, :attr:`coordinator`.
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
        self.artifacts = FilesystemStore(self.artifacts_path)
        self.agents: dict[str, AgentRuntime] = {}

    # -------------------------------------------------------------------------- where

    @property
    def authority_db_path(self) -> Path:
        """``<data_dir>/authority.db``."""
        return self.data_dir / "authority.db"

    @property
    def authority_key_path(self) -> Path:
        """``<data_dir>/authority.key``, created on the first start."""
        return self.data_dir / "authority.key"

    @property
    def artifacts_path(self) -> Path:
        """``<data_dir>/artifacts``, the filesystem artifact store."""
        return self.data_dir / "artifacts"

    @property
    def coordinator_key_path(self) -> Path:
        """``<data_dir>/keys/coordinator.pem`` (named after the coordinator id), created on
        the first start."""
        return self.data_dir / "keys" / f"{self.coordinator_id}.pem"

    @property
    def authority_url(self) -> str:
        """``http://host:port`` of the Authority (the port is known after :meth:`start`)."""
        return f"http://{self.host}:{self.authority_port}"

    @property
    def temporal_target(self) -> str:
        """``host:port`` of the Temporal frontend."""
        return self.temporal.target

    @property
    def namespace(self) -> str:
        """The Temporal namespace."""
        return self.temporal.namespace

    @property
    def ui_url(self) -> str | None:
        """``http://host:port`` of the Temporal web UI, or ``None`` when headless."""
        return self.temporal.ui_url

    def mission_url(self, mission_id: str) -> str | None:
        """The web UI page of a Mission's workflow (its latest run), or ``None`` when headless."""
        if self.ui_url is None:
            return None
        return workflow_ui_url(self.ui_url, self.namespace, mission_workflow_id(mission_id))

    @property
    def running(self) -> bool:
        """Whether :meth:`start` completed and :meth:`stop` has not run."""
        return self._exit is not None

    # ---------------------------------------------------------------- started parts

    @property
    def client(self) -> Client:
        """The Temporal client (pydantic data converter)."""
        return self._started(self._client)

    @property
    def authority(self) -> Authority:
        """The Authority (served over HTTP at :attr:`authority_url`)."""
        return self._started(self._authority)

    @property
    def authority_client(self) -> AuthorityClient:
        """An HTTP client of the Authority, pinned to its key."""
        return self._started(self._authority_client)

    @property
    def coordinator(self) -> Actor:
        """The coordinator identity, its Membership Epoch in :attr:`group` current."""
        return self._started(self._coordinator)

    def _started(self, part: T | None) -> T:
        if part is None:
            raise StackError("the embedded stack is not running")
        return part

    # --------------------------------------------------------------------- lifecycle

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
        exits.callback(_lock_data_dir(self.data_dir))
        self.artifacts_path.mkdir(exist_ok=True)
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
        key = _load_or_create_key(self.authority_key_path)
        coordinator = Actor(self.coordinator_id, _load_or_create_key(self.coordinator_key_path))
        # the coordinator is this stack's operator: it creates the Group and reads everything
        config = AuthorityConfig(operator_keys=frozenset({coordinator.public_key}))
        try:
            authority = Authority(self.authority_db_path, key, config)
        except AuthorityError as exc:
            raise StackError(f"{self.authority_db_path}: {exc}") from None
        self._authority = authority
        exits.callback(authority.close)
        sock = _listen(self.host, self.authority_port)
        self.authority_port = int(sock.getsockname()[1])
        server = _QuietServer(
            uvicorn.Config(
                create_app(authority),
                log_level="warning",
                lifespan="on",
                ws_max_size=WS_MAX_BYTES,
                timeout_graceful_shutdown=2,
            )
        )
        serving = asyncio.create_task(server.serve(sockets=[sock]), name="authority-http")

        async def stop_server() -> None:
            server.should_exit = True
            await serving
            sock.close()

        exits.push_async_callback(stop_server)
        while not server.started:
            if serving.done():
                serving.result()  # raises the startup error
                raise StackError(f"the Authority server on {self.authority_url} did not start")
            await asyncio.sleep(0.01)
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
                ``interceptors`` …); ``artifact_store`` defaults to :attr:`artifacts`.

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
            state_path=self.data_dir / "agents" / f"{card.agent_id}.db",
            **{"artifact_store": self.artifacts, **runtime_kw},
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


__all__ = ["DEFAULT_GROUP", "EmbeddedStack", "StackError"]
