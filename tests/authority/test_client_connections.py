"""The Authority client and a kept-alive connection the server closes as a request arrives.

A real Authority (``create_app`` under uvicorn on loopback) sits behind :class:`ClosingFront`, a
loopback TCP front that forwards each connection's first request and its answer, then — when
the client reuses the connection for another request — closes it without forwarding a byte:
what a server's keep-alive timeout does when it fires just as the client writes on the idle
connection (seen under load: ``select_candidates`` failed an attempt with ``httpx.ReadError``).
The client sends such a request again on a fresh connection, so the caller sees the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from typing import Literal

import httpx
import pytest

from missionweave.authority.client import AuthorityClient, AuthorityUnavailable
from missionweave.authority.client._stale import STALE_CONNECTION_TRIES
from tests.support.serving import served
from tests.support.world import World

Close = Literal["fin", "reset"]
_CHUNK = 65_536


class ClosingFront:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>``, one request per connection:
    after the upstream answered, the next bytes the client sends on that connection close it
    unanswered — an orderly close (``fin``) or a reset (``reset``). With ``every=True`` even a
    connection's first request is closed unanswered (an Authority going away).

    Attributes:
        connections: connections accepted.
        closed_under_request: requests closed unanswered.
    """

    def __init__(self, target_port: int, close: Close, *, every: bool = False) -> None:
        self.target_port, self.close, self.every = target_port, close, every
        self.port = 0
        self.connections = 0
        self.closed_under_request = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        answered = asyncio.Event()
        if self.every:
            answered.set()

        async def upstream() -> None:  # the client's bytes, until a request after an answer
            try:
                while data := await reader.read(_CHUNK):
                    if answered.is_set():
                        self.closed_under_request += 1
                        return
                    up_writer.write(data)
                    await up_writer.drain()
            finally:
                up_writer.transport.abort()  # which ends downstream() too

        async def downstream() -> None:  # the Authority's answers
            with contextlib.suppress(OSError):
                while data := await up_reader.read(_CHUNK):
                    writer.write(data)
                    await writer.drain()
                    answered.set()

        try:
            async with asyncio.TaskGroup() as both:
                both.create_task(upstream())
                both.create_task(downstream())
        finally:
            if self.close == "reset":  # RST instead of FIN
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            else:
                writer.close()
            self._tasks.discard(task)


@contextlib.asynccontextmanager
async def front(w: World, close: Close, *, every: bool = False) -> AsyncIterator[ClosingFront]:
    async with served(w) as url:
        proxy = ClosingFront(int(url.rsplit(":", 1)[1]), close, every=every)
        await proxy.start()
        try:
            yield proxy
        finally:
            await proxy.stop()


@pytest.mark.parametrize("close", ["fin", "reset"])
async def test_a_request_on_a_connection_closed_under_it_is_answered_on_a_fresh_one(
    world: World, close: Close
) -> None:
    """Reads and a Command, each on the connection the last one kept alive: each is closed
    unanswered once and answered on a fresh connection; the Command is applied once."""
    reader = world.workers[0]
    async with (
        front(world, close) as proxy,
        AuthorityClient(proxy.url, signing_key=reader.key) as client,
    ):
        assert await client.head(world.group) == world.authority.head(world.group)
        seq, _ = await client.head(world.group)  # the kept-alive connection: closed under it
        assert proxy.closed_under_request == 1
        cmd = world.coordinator.command(
            "mission.create", world.group, {"mission_id": "m2", "title": "kept alive"}
        )
        result = await client.submit(cmd)  # closed under it too, then answered
        assert result.accepted and not result.duplicate, result.rejection
        assert proxy.closed_under_request == 2
        assert proxy.connections == 3
        events = await client.events(world.group, after_sequence=seq)
    assert [e.type for e in events] == ["mission.created"]  # applied once
    assert [e.command_id for e in events] == [cmd.command_id]


async def test_a_connection_closed_under_every_try_is_the_authority_unavailable(
    world: World,
) -> None:
    """When every connection closes unanswered the client stops after a bounded number of
    tries and raises :class:`AuthorityUnavailable` naming the URL and the cause."""
    async with (
        front(world, "reset", every=True) as proxy,
        AuthorityClient(proxy.url, signing_key=world.workers[0].key) as client,
    ):
        with pytest.raises(AuthorityUnavailable) as caught:
            await client.head(world.group)
    assert proxy.connections == STALE_CONNECTION_TRIES
    assert proxy.url in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx.ReadError)
