"""A request that met a kept-alive connection the Authority had just closed is sent again.

The client keeps its connections to the Authority open between requests (httpx's pool), and the
server closes an idle one after its keep-alive timeout (uvicorn: 5 s). When the close crosses a
request the client has just written on that connection — most often on a loaded machine, where
timers fire late — the request fails with no answer: ``httpx.RemoteProtocolError`` ("Server
disconnected without sending a response") on an orderly close, ``httpx.ReadError`` on a reset,
``httpx.WriteError`` when the close came first. The Authority is up: another connection would
have been answered at once.

Every request of :class:`~missionweave.authority.client.AuthorityClient` is safe to send again:
a Command is idempotent by its ``command_id`` (a repeat is answered with the original verdict,
even when the first try had been applied before the connection broke), a batch is a list of
such Commands, and the rest are reads or a presence report a repeat cannot change. So the
client sends it again, at once, on a fresh connection (the pool drops the broken one), a bounded
number of times; only then is the failure the caller's :class:`AuthorityUnavailable`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_none

#: What a request that met a connection closed under it raises (no answer was read).
CONNECTION_CLOSED_UNDER_REQUEST: tuple[type[httpx.TransportError], ...] = (
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)

#: Tries in all of one request whose connection closed under it: each on a fresh connection,
#: so the second succeeds unless the Authority really is going away.
STALE_CONNECTION_TRIES = 3


async def resend_on_closed_connection(
    send: Callable[[], Awaitable[httpx.Response]],
) -> httpx.Response:
    """Await ``send()``; when it fails with one of :data:`CONNECTION_CLOSED_UNDER_REQUEST`,
    send it again at once, up to :data:`STALE_CONNECTION_TRIES` tries in all.

    Args:
        send: one try of the request (a fresh awaitable each time); it must be safe to repeat.

    Returns:
        The first answer (any status: an answer is never sent again).

    Raises:
        httpx.TransportError: the last try's failure, unchanged — a connection that closed under
            every try, or any other transport failure (refused, timed out: the caller's retry,
            with its own backoff, decides about those).
    """
    retryer: AsyncRetrying = AsyncRetrying(
        retry=retry_if_exception_type(CONNECTION_CLOSED_UNDER_REQUEST),
        stop=stop_after_attempt(STALE_CONNECTION_TRIES),
        wait=wait_none(),
        reraise=True,
    )

    async def once() -> httpx.Response:  # a coroutine function, as tenacity tells awaitables apart
        return await send()

    return await retryer(once)


__all__ = [
    "CONNECTION_CLOSED_UNDER_REQUEST",
    "STALE_CONNECTION_TRIES",
    "resend_on_closed_connection",
]
