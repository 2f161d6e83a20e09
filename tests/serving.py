"""A real uvicorn server on 127.0.0.1 for delivery tests, and the fixtures that start it.

The fixtures ``world`` and ``live`` that start it are in ``tests/conftest.py``.
The server runs as a task on the test's event loop and listens on a real loopback socket; it
can be stopped and started again on the same port (the reconnect tests do that), over the same
Authority or a new one opened on the same database file.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from missionweave.authority import Authority, AuthorityConfig, now_ms
from missionweave.authority.http import create_app
from missionweave.authority.wire._readsig import SignedReads
from missionweave.protocol import Actor, Command, canonical_bytes

from .world import World, make_world


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (they belong to pytest)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Loopback:
    """An Authority server on a 127.0.0.1 port: its HTTP and WebSocket URLs."""

    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/stream"


class LiveServer(_Loopback):
    """``create_app(authority)`` behind uvicorn on a loopback port.

    Attributes:
        authority: the Authority served (replace it between :meth:`stop` and :meth:`start`).
        port: the TCP port (kept across restarts).
        app: the current app (``app.state.writer`` is its BatchWriter).
    """

    def __init__(self, authority: Authority, **app_kw: Any) -> None:
        self.authority = authority
        self.port = 0
        self.app_kw = app_kw
        self.app: Any = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # IPPROTO_TCP: asyncio then sets TCP_NODELAY on each connection (see _stack._listen)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self.app = create_app(self.authority, **self.app_kw)
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises the startup error
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Shut down: open WebSockets are closed (1012), HTTP keep-alives dropped."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._server = self._task = None


class ProcessServer(_Loopback):
    """``missionweave authority serve`` as its own process — how the Authority is deployed —
    on a loopback port, over ``db`` with the Authority key ``key``. Same surface as
    :class:`LiveServer` (``url``, ``ws_url``, ``start``, ``stop``), plus :meth:`kill`; a
    start after a stop or kill serves on the same port again."""

    def __init__(self, db: Path, key: Path, operator_keys: tuple[str, ...] = ()) -> None:
        self.db, self.key, self.operator_keys = db, key, operator_keys
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None

    async def kill(self) -> None:
        """``kill -9`` the process (no shutdown of any kind)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._proc = None

    async def start(self) -> None:
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        cli = Path(sys.executable).with_name("missionweave")
        self._proc = await asyncio.create_subprocess_exec(
            str(cli),
            "authority",
            "serve",
            "--db",
            str(self.db),
            "--key",
            str(self.key),
            "--port",
            str(self.port),
            *(a for k in self.operator_keys for a in ("--operator-key", k)),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with httpx.AsyncClient() as http:
            for _ in range(300):  # up to 30 s for the process to import and listen
                if self._proc.returncode is not None:
                    raise RuntimeError(f"authority serve exited with {self._proc.returncode}")
                try:
                    if (await http.get(f"{self.url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("authority serve did not answer within 30 s")

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), 15)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        self._proc = None


def signed_http(url: str, reader: Actor, **kw: Any) -> httpx.AsyncClient:
    """A raw HTTP client of ``url`` whose reads are signed by ``reader`` (RFC 9421)."""
    return httpx.AsyncClient(base_url=url, auth=SignedReads(reader.key), **kw)


def mission_cmd(w: World, mission_id: str) -> Command:
    """A cheap valid Command: the coordinator creates a Mission (one Event)."""
    return w.coordinator.command(
        "mission.create",
        w.group,
        {"mission_id": mission_id, "title": mission_id},
        issued_at_ms=w.clock.now,
    )


def windowed_world(path: Path, window: int) -> World:
    """A world whose Authority keeps ``window`` Events online (archiving older ones)."""
    w = make_world(path, config=AuthorityConfig(online_window=window))
    w.clock.now = now_ms()
    return w


def signed_subscribe(actor: Actor, group: str, after: int, issued_at_ms: int) -> dict[str, Any]:
    """A SUBSCRIBE frame signed by ``actor``, built by hand (independent of the client)."""
    frame: dict[str, Any] = {
        "type": "SUBSCRIBE",
        "group": group,
        "afterSequence": after,
        "agent": actor.agent_id,
        "issuedAtMs": issued_at_ms,
        "nonce": uuid.uuid4().hex,
    }
    frame["signature"] = actor.key.sign(canonical_bytes(frame))
    return frame


async def eventually(cond: Callable[[], bool | Awaitable[bool]], timeout_s: float = 4.0) -> None:
    """Wait until ``cond()`` holds (fail after ``timeout_s``; never a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        got = cond()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)
