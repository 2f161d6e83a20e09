"""A loopback TCP proxy the nemesis cuts: every client part reaches the Authority and Temporal
through its own :class:`Proxy`, so one part, or every client of one server, can be cut off.

Modes: ``pass`` forwards bytes both ways; ``drop`` closes every open connection and closes new
ones as soon as they are accepted (a peer that went away); ``stall`` keeps the connections but
forwards nothing until the mode changes (a black hole: bytes wait, timeouts run).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

Mode = Literal["pass", "drop", "stall"]
_CHUNK = 65_536


class Proxy:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>`` in the running event loop.

    Args:
        name: for logs and the nemesis (e.g. ``"worker-1→authority"``).
        target_port: the server's port.
    """

    def __init__(self, name: str, target_port: int) -> None:
        self.name = name
        self.target_port = target_port
        self.port = 0
        self.mode: Mode = "pass"
        #: Connections closed as soon as accepted (``drop``).
        self.drops = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen on a free loopback port (:attr:`port`)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def set_mode(self, mode: Mode) -> None:
        """Switch to ``mode``; ``drop`` closes every open connection at once."""
        self.mode = mode
        if mode == "stall":
            self._flowing.clear()
        else:
            self._flowing.set()
        if mode == "drop":
            for w in list(self._writers):
                _abort(w)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "drop":
            self.drops += 1
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _abort(writer)
            return
        self._writers |= {writer, up_writer}
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in pipes:
                t.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            self._tasks.difference_update(pipes)
            for w in (writer, up_writer):
                self._writers.discard(w)
                _abort(w)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await src.read(_CHUNK):
                await self._flowing.wait()
                if self.mode == "drop":
                    return
                dst.write(data)
                await dst.drain()

    async def close(self) -> None:
        """Stop listening and close every connection."""
        if self._server is not None:
            self._server.close()
        self.set_mode("drop")
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)


def _abort(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.transport.abort()
