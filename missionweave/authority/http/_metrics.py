"""What the Authority's HTTP front records (docs/metrics.md): request latency by route
template, reads refused, subscriptions open."""

from __future__ import annotations

import time
from typing import Any

from ...metrics import add, observe
from ...metrics import series as s
from ._tracing import ASGIApp, Message, Receive, Scope, Send

#: The codes of a refused read (HTTP or SUBSCRIBE), as exported; others are ``other``.
REFUSAL_CODES = frozenset(
    {"unauthenticated", "unauthorized", "not_a_member", "too_many_reads", "too_many_requests"}
)


def read_refused(code: str) -> None:
    """Count a read refused with ``code``."""
    add(s.AUTHORITY_READS_REFUSED, code=code if code in REFUSAL_CODES else "other")


def subscriptions(session: Any) -> int:
    """The open subscriptions of a stream session (for the gauge)."""
    return int(session.subscriptions)


class RequestMetrics:
    """ASGI middleware: each HTTP request's latency (first byte received to the answer's
    start) by method, route template (``/v1/groups/{group_id}/events``, never the path) and
    status class. An unmatched path is ``unmatched``; WebSockets pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 0

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            observe(
                s.AUTHORITY_REQUESTS,
                time.perf_counter() - began,
                method=str(scope.get("method", "")),
                route=route,
                status_class=f"{status // 100}xx" if status else "none",
            )


__all__ = ["REFUSAL_CODES", "RequestMetrics", "read_refused", "subscriptions"]
