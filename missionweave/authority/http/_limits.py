"""Input bounds of the Authority's front: body size, JSON depth, duplicate keys, JSON numbers.

Every bound refuses with a structured 4xx and writes nothing. Checked before FastAPI parses a
request (:class:`BodyLimits`, an ASGI middleware) and before a WebSocket frame is parsed
(:func:`json_problem`), so no hostile body costs more than its size or reaches a parser that
would fail with a 5xx (pydantic's depth error, Python's recursion limit).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...protocol import RejectionCode
from ..wire import BLOB_PREFIX
from ._connection_protocols import BudgetedH11Protocol, BudgetedWebSocketProtocol

#: Largest request body, bytes, of ``POST /v1/commands/batch`` (1000 Commands with their
#: contracts are about 2 MiB).
MAX_BATCH_BODY_BYTES = 8 * 1024 * 1024
#: Bodies above this many bytes are checked in a worker thread, off the event loop.
OFF_LOOP_BYTES = 64 * 1024
#: Largest request body, bytes, of any other route.
MAX_BODY_BYTES = 1024 * 1024
#: Largest canonical Command (its signed bytes), bytes: what one Command may add to the log.
MAX_COMMAND_BYTES = 1024 * 1024
#: Largest WebSocket frame the stream parses, bytes.
MAX_FRAME_BYTES = 64 * 1024
#: Deepest nesting of JSON arrays and objects accepted anywhere.
MAX_JSON_DEPTH = 64
#: Most bytes of Events in one answer (one page of ``GET …/events``, one replay step of the
#: stream): a reader pages on from the last ``seq``, and no read costs the server more.
MAX_PAGE_BYTES = 4 * 1024 * 1024
#: Longest a request body may take to arrive, seconds (a slow, unfinished body holds memory).
BODY_TIMEOUT_S = 30.0
#: Most bytes of Events read from the Store at a time while a page or a replay is streamed:
#: what one read holds in memory, however large its page.
READ_CHUNK_BYTES = 256 * 1024
#: Largest total of one request's header names and values, bytes (431 past it). The server
#: (h11) also stops buffering an unfinished request head at this size.
MAX_HEADER_BYTES = 16 * 1024
#: Seconds an idle keep-alive HTTP connection is kept open.
IDLE_TIMEOUT_S = 5.0
#: Seconds between WebSocket pings; a peer that does not answer within as long is dropped.
WS_PING_S = 20.0


def server_limits() -> dict[str, Any]:
    """The uvicorn settings every Authority server runs with: the h11 parser (it bounds an
    unfinished request head; httptools buffers any size) and the WebSocket protocol, both in
    the connection budget (:mod:`._connections`: unauthenticated connections bounded apart,
    and closed unless they authenticate in time — no global ``limit_concurrency``, which a
    stranger's idle sockets exhausted for everyone), header and idle bounds, WebSocket pings.
    ``ws_max_size`` is set by the caller."""
    return {
        "http": BudgetedH11Protocol,
        "ws": BudgetedWebSocketProtocol,
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
        "timeout_keep_alive": IDLE_TIMEOUT_S,
        "ws_ping_interval": WS_PING_S,
        "ws_ping_timeout": WS_PING_S,
    }


_BRACKETS_ONLY = bytes(c for c in range(256) if c not in b"[]{}")


class JSONProblem(ValueError):
    """A JSON text breaks a bound: ``code`` (``invalid_json``, ``too_deep``) and a reason."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


def _depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in ``raw`` (any bytes; strings skipped).

    Escaped backslashes and quotes are dropped first; what stands between the remaining
    quotes is string content, every other part is structure. All of it at C speed but the
    last loop, which sees only brackets."""
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = b"".join(unescaped.split(b'"')[::2]).translate(None, _BRACKETS_ONLY)
    depth = deepest = 0
    for c in structure:
        if c in b"[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise JSONProblem(
            RejectionCode.INVALID_JSON, f"the key {twice!r} appears twice in one object"
        )
    return obj


def _no_constant(name: str) -> Any:
    raise JSONProblem(RejectionCode.INVALID_JSON, f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise JSONProblem(RejectionCode.INVALID_JSON, f"{text} is beyond a finite number")
    return value


def parse_json(raw: bytes | str) -> Any:
    """Parse ``raw`` under the bounds: UTF-8 only, at most :data:`MAX_JSON_DEPTH` deep, no
    key twice in one object, no ``NaN``/``Infinity`` and no number that overflows to one.

    The text is decoded as UTF-8 first and the decoded text is what is parsed, so the depth
    counted on the bytes is the depth parsed (``json.loads`` of bytes would guess UTF-16 or
    UTF-32 and see other quotes).

    Raises:
        JSONProblem: ``too_deep`` or ``invalid_json`` (not JSON, not UTF-8, a duplicate key, a
            non-finite number).
    """
    if isinstance(raw, str):
        text, data = raw, raw.encode("utf-8", "surrogatepass")
    else:
        data = raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONProblem(RejectionCode.INVALID_JSON, f"the body is not UTF-8: {exc}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise JSONProblem(
            RejectionCode.TOO_DEEP, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        )
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite,
        )
    except JSONProblem:
        raise
    except (ValueError, RecursionError) as exc:
        raise JSONProblem(RejectionCode.INVALID_JSON, f"the body is not JSON: {exc}") from None


class BodyLimits:
    """ASGI middleware: refuse a request whose headers pass :data:`MAX_HEADER_BYTES` (431
    ``headers_too_large``), an HTTP body over its route's size (413 ``body_too_large``) or
    one that :func:`parse_json` refuses (422 ``invalid_command`` on ``/v1/commands*``,
    ``invalid_request`` elsewhere, with ``detail.problem`` ``too_deep`` or ``invalid_json``),
    before the app reads it.

    Args:
        app: the wrapped ASGI app.
        error: builds the error body, ``(code, reason, **detail) -> dict``.
    """

    def __init__(self, app: ASGIApp, error: Callable[..., dict[str, Any]]) -> None:
        self.app, self.error = app, error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(k) + len(v) for k, v in scope.get("headers") or ())
            if size > MAX_HEADER_BYTES:
                await self._refuse(
                    send,
                    431,
                    RejectionCode.HEADERS_TOO_LARGE,
                    f"the request's headers are over {MAX_HEADER_BYTES} bytes",
                    bytes=size,
                    max_bytes=MAX_HEADER_BYTES,
                )
                return
        if (
            scope["type"] != "http"
            or scope["method"] in ("GET", "HEAD", "OPTIONS")
            or scope["path"].startswith(BLOB_PREFIX)  # streamed and hash-checked by its route
        ):
            await self.app(scope, receive, send)
            return
        limit = MAX_BATCH_BODY_BYTES if scope["path"] == "/v1/commands/batch" else MAX_BODY_BYTES
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._too_large(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await self._too_large(send, limit)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body"):
                        break
        except TimeoutError:
            await self._refuse(
                send,
                408,
                RejectionCode.BODY_TIMEOUT,
                f"the body did not arrive within {BODY_TIMEOUT_S:g} s",
                seconds=BODY_TIMEOUT_S,
            )
            return
        body = b"".join(chunks)
        if body:
            try:
                if len(body) > OFF_LOOP_BYTES:  # other requests go on meanwhile
                    await asyncio.to_thread(parse_json, body)
                else:
                    parse_json(body)
            except JSONProblem as exc:  # the codes of the app's own 422s, the kind in detail
                code = (
                    RejectionCode.INVALID_COMMAND
                    if scope["path"].startswith("/v1/commands")
                    else (RejectionCode.INVALID_REQUEST)
                )
                await self._refuse(send, 422, code, exc.reason, problem=exc.code)
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send, limit: int) -> None:
        await self._refuse(
            send,
            413,
            RejectionCode.BODY_TOO_LARGE,
            f"the body is over {limit} bytes",
            max_bytes=limit,
        )

    async def _refuse(self, send: Send, status: int, code: str, reason: str, **detail: Any) -> None:
        payload = json.dumps(self.error(code, reason, **detail)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


__all__ = [
    "BODY_TIMEOUT_S",
    "IDLE_TIMEOUT_S",
    "MAX_BATCH_BODY_BYTES",
    "MAX_BODY_BYTES",
    "MAX_COMMAND_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_PAGE_BYTES",
    "READ_CHUNK_BYTES",
    "WS_PING_S",
    "BodyLimits",
    "JSONProblem",
    "parse_json",
    "server_limits",
]
