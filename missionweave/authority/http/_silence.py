"""The HTTP front's part in judging leases by the renewals the Authority *could* have received
(MW-11.5-c; :mod:`missionweave.authority.core` ``credit_quiet``).

:class:`SilenceWatch` is an ASGI middleware: every client request (HTTP or a WebSocket
handshake; not ``/healthz`` or ``/readyz``, which a load balancer may send while every client
is cut off)
tells the Authority's stall watch that it heard from someone. A request that ends a silence
longer than ``QUIET_MS`` first has the silence credited to the leases of owners that were
renewing when it began, and every request that arrives meanwhile waits for that credit: no
lease is judged on the Authority's clock alone across a time in which nobody could reach it.
A credit the store cannot commit (disk full, database down) does not fail the request: the
store's failure is credited when it commits again (``store_failed``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import Authority, credit_quiet

log = logging.getLogger(__name__)

#: Paths that do not count as hearing from a client.
NOT_A_CLIENT = frozenset({"/healthz", "/readyz"})


class SilenceWatch:
    """ASGI middleware: credit a silence before judging the request that ends it.

    Args:
        app: the wrapped ASGI app.
        authority: the served Authority (its ``stall_watch`` is set once it serves).
    """

    def __init__(self, app: ASGIApp, authority: Authority) -> None:
        self.app = app
        self.authority = authority
        self._crediting: asyncio.Future[Any] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = self.authority.stall_watch
        if (
            watch is not None
            and scope["type"] in ("http", "websocket")
            and scope.get("path") not in NOT_A_CLIENT
        ):
            gap_ms = watch.heard(self.authority.store.backend)
            if gap_ms:
                self._crediting = asyncio.ensure_future(
                    asyncio.to_thread(credit_quiet, self.authority, gap_ms)
                )
            if self._crediting is not None:
                # requests arriving with the one that ended the silence wait for its credit
                try:
                    await asyncio.shield(self._crediting)
                except Exception as exc:  # the store failed: its own credit follows (MW-11.5-c)
                    log.warning("the silence was not credited: %s", exc)
                self._crediting = None
        await self.app(scope, receive, send)


__all__ = ["NOT_A_CLIENT", "SilenceWatch"]
