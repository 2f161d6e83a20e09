"""One raw HTTP/1.1 connection to a live server, written byte by byte: the tests of the
connection budget (tests/authority/test_connection_flood.py) need to know which TCP connection a
request went on, to send half a request, and to see the server close a socket — what an HTTP
client library hides.
"""

from __future__ import annotations

import asyncio
from typing import Any

from missionweave.authority.wire._readsig import sign_read
from missionweave.protocol import Command, SigningKey
from tests.support.waits import WAIT_S


class RawHTTP:
    """A keep-alive connection to ``host:port``; open it with :meth:`open`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> RawHTTP:
        """A new TCP connection (nothing sent yet)."""
        return cls(*await asyncio.open_connection(host, port))

    async def send(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        sent: int | None = None,
    ) -> None:
        """Write a request's head and the first ``sent`` bytes of its ``body`` (all of it by
        default); :meth:`finish` writes the rest."""
        lines = [f"{method} {path} HTTP/1.1", "Host: authority"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        self._rest = body[sent:] if sent is not None else b""
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body[:sent])
        await self.writer.drain()

    async def finish(self) -> None:
        """Write the rest of the body :meth:`send` held back."""
        self.writer.write(self._rest)
        await self.writer.drain()

    async def answer(self) -> tuple[int, bytes]:
        """The status and body of the next response (``Content-Length`` or chunked)."""
        return await asyncio.wait_for(self._answer(), WAIT_S)

    async def _answer(self) -> tuple[int, bytes]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        if fields.get(b"transfer-encoding") != b"chunked":
            return status, await self.reader.readexactly(int(fields.get(b"content-length", 0)))
        body = b""
        while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await self.reader.readexactly(size + 2))[:-2]
        await self.reader.readuntil(b"\r\n")  # the empty trailer
        return status, body

    async def ask(self, method: str, path: str, **kw: Any) -> tuple[int, bytes]:
        """:meth:`send` a whole request, then its :meth:`answer`."""
        await self.send(method, path, **kw)
        return await self.answer()

    async def read(self, path: str, key: SigningKey, *, bad: bool = False) -> tuple[int, bytes]:
        """``GET path`` signed by ``key`` (RFC 9421); with ``bad`` its signature is altered."""
        headers = sign_read("GET", "http://authority" + path, key)
        if bad:
            sig = headers["Signature"]
            cut = sig.index(":") + 2  # a byte inside the base64 value
            headers["Signature"] = sig[:cut] + ("A" if sig[cut] != "A" else "B") + sig[cut + 1 :]
        return await self.ask("GET", path, headers=headers)

    async def command(self, cmd: Command, *, sent: int | None = None) -> None:
        """Send ``POST /v1/commands`` of ``cmd``, the first ``sent`` bytes of its body only
        when given."""
        body = cmd.model_dump_json().encode()
        await self.send("POST", "/v1/commands", body=body, sent=sent)

    async def closed_by_server(self) -> bool:
        """Whether the server closes this connection (EOF or a reset) within ``WAIT_S``;
        whatever it still sends is read and dropped."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), WAIT_S):
                pass
        except ConnectionError:
            return True
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self.writer.close()


__all__ = ["RawHTTP"]
