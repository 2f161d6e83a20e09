"""The steps of building a running MissionWeave stack, one home each (docs/design.md §8).

Every builder of a stack takes these steps from here: :class:`~missionweave.dev.EmbeddedStack`
(``missionweave dev up``, the demo) and the test suite's builders
(``tests/support/temporal_env.py``'s Authority stack, ``tests/faults/cluster.py``'s deployment
of separate processes):

* :class:`StackFiles` — the file layout of a data directory;
* :func:`load_or_create_key` — an Ed25519 key file, created on first use;
* :func:`lock_data_dir` — one running stack per data directory;
* :class:`AuthorityServer` — the Authority's HTTP and WebSocket API served in this process;
* :func:`wait_until` with :func:`authority_answers` or
  :func:`~missionweave.dev.temporal_answers` — waiting until a part answers.

The Group's bootstrap and enrolling its members are :func:`~missionweave.dev.ensure_group`,
:func:`~missionweave.dev.ensure_member` and :func:`~missionweave.dev.enroll`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import uvicorn

from ..protocol import MissionWeaveError, SignatureError, SigningKey

if TYPE_CHECKING:
    from ..authority import Authority

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds one probe of :func:`wait_until` may take before it counts as no answer.
PROBE_TIMEOUT_S = 5.0


class StackError(MissionWeaveError):
    """The embedded stack cannot start: a port is taken, a key file is not a key, the
    Authority database belongs to another key, the Group belongs to another coordinator, the
    Temporal dev server cannot start (the :class:`~missionweave.dev.DevServerError` is its
    ``__cause__``) or the Authority does not answer. The message is one line."""


class StackFiles:
    """Where a stack keeps its state under one data directory ``root``::

        authority.db            the Authority's SQLite database
        authority.key           the Authority's Ed25519 key (PEM)
        keys/<agent id>.pem     each agent's key, the coordinator's included
        artifacts/              the filesystem artifact store
        agents/<agent id>.db    each embedded agent's local state
        stack.lock              held while a stack runs on it
        temporal.db, temporal-server.log    the Temporal dev server's
                                (:class:`~missionweave.dev.TemporalDevServer`)

    Attributes: :attr:`root` and one :class:`~pathlib.Path` per entry above
    (:attr:`authority_db`, :attr:`authority_key`, :attr:`keys`, :attr:`artifacts`,
    :attr:`agents`, :attr:`lock`); :meth:`key` and :meth:`agent_state` name one agent's files.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.authority_db = self.root / "authority.db"
        self.authority_key = self.root / "authority.key"
        self.keys = self.root / "keys"
        self.artifacts = self.root / "artifacts"
        self.agents = self.root / "agents"
        self.lock = self.root / "stack.lock"

    def key(self, agent_id: str) -> Path:
        """``keys/<agent_id>.pem``: the agent's Ed25519 private key."""
        return self.keys / f"{agent_id}.pem"

    def agent_state(self, agent_id: str) -> Path:
        """``agents/<agent_id>.db``: an embedded agent's local state."""
        return self.agents / f"{agent_id}.db"


def load_or_create_key(path: Path) -> SigningKey:
    """The Ed25519 key in the PEM file ``path``; a new one written there (mode 0600, parent
    directories created) when nothing is there. A new key is created exclusively: a file
    that appears meanwhile, or a link (even a dangling one), is never written through.

    Raises:
        StackError: the file exists but holds no Ed25519 private key, cannot be read, or a
            link stands where a new key would be written.
    """
    if not path.exists():
        key = SigningKey.generate()
        try:
            key.to_file(path, exclusive=True)
        except FileExistsError:
            raise StackError(f"{path}: not a key file (a link, or created meanwhile)") from None
        log.info("created key %s", path)
        return key
    try:
        return SigningKey.from_file(path)
    except SignatureError as exc:
        raise StackError(str(exc)) from None  # it names the file
    except OSError as exc:
        raise StackError(f"{path}: {exc.strerror or exc}") from None


def lock_data_dir(files: StackFiles) -> Callable[[], None]:
    """Hold ``stack.lock`` (an exclusive ``flock``) while this stack runs: two stacks on one
    directory would run two Temporal servers on one ``temporal.db`` and two Authorities on one
    ``authority.db``. Returns the release function.

    Raises:
        StackError: another process holds it (its pid is named).
    """
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StackError(
            f"{files.root} is in use by another MissionWeave stack (pid {holder}); stop it, or "
            "give this one another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def release() -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    return release


# ------------------------------------------------------------------ waiting for an answer


async def wait_until(
    probe: Callable[[], Awaitable[T]],
    what: str,
    timeout_s: float,
    *,
    interval_s: float = 0.1,
    gone: Callable[[], str | None] | None = None,
) -> T:
    """Await ``probe()`` every ``interval_s`` seconds until it returns something truthy, and
    return that. An exception, or no answer within :data:`PROBE_TIMEOUT_S`, counts as no.

    Args:
        probe: e.g. :func:`authority_answers` or :func:`~missionweave.dev.temporal_answers`
            bound to an address.
        what: what is awaited, for the error (``"answer from the Authority"``).
        timeout_s: how long to wait, seconds.
        interval_s: the pause between probes, seconds.
        gone: asked before each probe; a reason (``"the process exited with code 1"``) ends
            the wait at once.

    Raises:
        TimeoutError: no truthy answer within ``timeout_s`` (the last error is named).
        StackError: ``gone()`` gave a reason.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while True:
        if gone is not None and (reason := gone()) is not None:
            raise StackError(f"no {what}: {reason}")
        try:
            if got := await asyncio.wait_for(probe(), PROBE_TIMEOUT_S):
                return got
        except Exception as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:g} s ({last})")
        await asyncio.sleep(interval_s)


async def authority_answers(url: str) -> bool:
    """Whether the Authority at ``url`` answers ``GET /healthz`` with 200 (within 2 s)."""
    async with httpx.AsyncClient(timeout=2) as http:
        return (await http.get(f"{url.rstrip('/')}/healthz")).status_code == 200


# ------------------------------------------------------------------ the Authority's server


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
        raise StackError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc} (choose another port, "
            "or 0 for a free one)"
        ) from None
    return sock


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the process that embeds the server owns
    SIGINT/SIGTERM and stops it in order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class AuthorityServer:
    """``create_app(authority)`` served by uvicorn as a task of this event loop, on a socket
    bound here — how the embedded stack serves its Authority. It can stop and start again on
    the same port, over the same :attr:`authority` or another one set in between.

    Args:
        authority: the Authority to serve.
        host: the interface to bind.
        port: the TCP port (0: a free one, chosen at the first :meth:`start` and kept).
        **app_kw: ``create_app`` settings (``poll_interval_s``, ``max_batch`` …).

    Attributes: :attr:`authority`, :attr:`host`, :attr:`port`, :attr:`app` (the running app;
    ``app.state.writer`` is its BatchWriter).
    """

    #: Seconds :meth:`start` waits for uvicorn to start.
    START_TIMEOUT_S = 30.0

    def __init__(
        self, authority: Authority, *, host: str = "127.0.0.1", port: int = 0, **app_kw: Any
    ) -> None:
        self.authority = authority
        self.host = host
        self.port = port
        self.app_kw = app_kw
        self.app: Any = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        """``ws://host:port/v1/stream``, the event stream."""
        return f"ws://{self.host}:{self.port}/v1/stream"

    async def start(self) -> None:
        """Bind, serve, and return once uvicorn has started.

        Raises:
            StackError: the port is taken, or the server stopped while starting.
            TimeoutError: it did not start within :data:`START_TIMEOUT_S`.
        """
        from ..authority.http import WS_MAX_BYTES, create_app, server_limits

        sock = _listen(self.host, self.port)
        self.port = int(sock.getsockname()[1])
        self.app = create_app(self.authority, **self.app_kw)
        config = uvicorn.Config(
            self.app,
            **server_limits(),  # the limits of `authority serve` (headers, idle, pings)
            log_level="warning",
            lifespan="on",
            ws_max_size=WS_MAX_BYTES,
            timeout_graceful_shutdown=2,
        )
        server = self._server = _QuietServer(config)
        task = self._task = asyncio.create_task(server.serve(sockets=[sock]), name="authority")
        task.add_done_callback(lambda _: sock.close())

        async def started() -> bool:
            return server.started

        def gone() -> str | None:
            if not task.done():
                return None
            exc = None if task.cancelled() else task.exception()
            return f"the server on {self.url} stopped while starting ({exc!r})"

        what = f"start of the Authority server on {self.url}"
        try:
            await wait_until(started, what, self.START_TIMEOUT_S, interval_s=0.01, gone=gone)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.stop()
            raise

    async def stop(self) -> None:
        """Shut down: open WebSockets are closed (1012), HTTP keep-alives dropped. Safe to call
        twice."""
        server, task, self._server, self._task = self._server, self._task, None, None
        if server is None or task is None:
            return
        server.should_exit = True
        await task


__all__ = [
    "PROBE_TIMEOUT_S",
    "AuthorityServer",
    "StackError",
    "StackFiles",
    "authority_answers",
    "load_or_create_key",
    "lock_data_dir",
    "wait_until",
]
