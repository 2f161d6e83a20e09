"""A real Authority server on 127.0.0.1 for delivery tests: in this process
(:data:`LiveServer`, the embedded stack's :class:`missionweave.dev.AuthorityServer`) or as its
own process (:class:`ProcessServer`), and helpers for raw requests and frames.

The fixtures ``world`` and ``live`` that start it are in ``tests/conftest.py``.
The in-process server runs as a task on the test's event loop and listens on a real loopback
socket; it can be stopped and started again on the same port (the reconnect tests do that), over
the same Authority or a new one opened on the same database file.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from missionweave.artifacts import ArtifactStore
from missionweave.authority import AuthorityConfig, now_ms, open_store
from missionweave.authority.wire._readsig import SignedReads
from missionweave.dev import AuthorityServer, authority_answers, free_port, wait_until
from missionweave.protocol import Actor, Command, canonical_bytes

from .waits import WAIT_S
from .world import World, make_world


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (they belong to pytest), for a test's own app."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


#: ``create_app(authority)`` behind uvicorn on a 127.0.0.1 port, as the embedded stack serves it
#: (:class:`missionweave.dev.AuthorityServer`): ``LiveServer(authority, poll_interval_s=0.05)``;
#: ``server.authority`` may be replaced between ``stop()`` and ``start()`` (same port);
#: ``server.app.state.writer`` is the running app's BatchWriter.
LiveServer = AuthorityServer


@contextlib.asynccontextmanager
async def served(w: World, store: ArtifactStore | None = None) -> AsyncIterator[str]:
    """A :data:`LiveServer` over ``w``'s Authority (serving the artifact ``store``) for the
    block; its URL."""
    server = LiveServer(w.authority, poll_interval_s=0.05, artifact_store=store)
    await server.start()
    try:
        yield server.url
    finally:
        await server.stop()


def authority_serve_command(
    db: Path | str,
    port: int,
    *,
    key: Path | None = None,
    operator_keys: Sequence[str] = (),
    metrics_port: int | None = None,
) -> list[str]:
    """The command line of ``missionweave authority serve`` (this interpreter's) over ``db``
    on 127.0.0.1:``port``; the key beside ``db`` unless ``key``; ``operator_keys`` are public
    keys or PEM files; ``metrics_port``: serve ``GET /metrics`` there (default: none, ``0`` —
    the command's default port is one fixed port of the machine, which a test never takes)."""
    cli = Path(sys.executable).with_name("missionweave")
    return [
        str(cli),
        *("authority", "serve", "--db", str(db), "--port", str(port)),
        *(["--key", str(key)] if key is not None else []),
        *(a for k in operator_keys for a in ("--operator-key", k)),
        *("--metrics-port", str(metrics_port or 0)),
    ]


class ProcessServer:
    """``missionweave authority serve`` as its own process — how the Authority is deployed —
    on a loopback port, over ``db`` with the Authority key ``key``. Same surface as
    :class:`LiveServer` (``url``, ``ws_url``, ``start``, ``stop``), plus :meth:`kill`; a
    start after a stop or kill serves on the same port again."""

    def __init__(
        self,
        db: Path | str,
        key: Path,
        operator_keys: tuple[str, ...] = (),
        metrics_port: int | None = None,
    ) -> None:
        self.db, self.key, self.operator_keys = db, key, operator_keys
        self.metrics_port = metrics_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/v1/stream"
        self._proc: asyncio.subprocess.Process | None = None

    async def kill(self) -> None:
        """``kill -9`` the process (no shutdown of any kind)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._proc = None

    async def start(self) -> None:
        cmd = authority_serve_command(
            self.db,
            self.port,
            key=self.key,
            operator_keys=self.operator_keys,
            metrics_port=self.metrics_port,
        )
        proc = self._proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )

        def exited() -> str | None:
            return None if proc.returncode is None else f"it exited with {proc.returncode}"

        # up to 30 s for the process to import and listen
        await wait_until(
            lambda: authority_answers(self.url), "answer from `authority serve`", 30, gone=exited
        )

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), WAIT_S)
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


def tamper(w: World, sql: str, *args: Any) -> None:
    """Run ``sql`` (SQLite's dialect, ``?`` placeholders) on ``w``'s database through a second
    Store opened on it (its connection and dialect: either backend), committed — how a test
    alters a stored Event or snapshot behind the Authority's back."""
    store: Any = open_store(w.db)
    try:
        store.begin()
        store.conn.execute(store.dialect(sql), args)
        store.commit()
    finally:
        store.close()


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
