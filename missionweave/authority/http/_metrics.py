"""What the Authority's HTTP front records (docs/metrics.md): request latency by route
template, reads refused, subscriptions open."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import Receive, Scope

from ...metrics import add, observe
from ...metrics import series as s
from ._asgi import AnswerStatus, HTTPObserver, route_template

#: The codes of a refused read (HTTP or SUBSCRIBE), as exported; others are ``other``.
REFUSAL_CODES = frozenset(
    {
        "unauthenticated",
        "unauthorized",
        "not_a_member",
        "too_many_reads",
        "too_many_requests",
        "read_shed",
    }
)


def read_refused(code: str) -> None:
    """Count a read refused with ``code``."""
    add(s.AUTHORITY_READS_REFUSED, code=code if code in REFUSAL_CODES else "other")


def subscriptions(session: Any) -> int:
    """The open subscriptions of a stream session (for the gauge)."""
    return int(session.subscriptions)


class RequestMetrics(HTTPObserver):
    """ASGI middleware: each HTTP request's latency (first byte received to the answer's
    start) by method, route template (``/v1/groups/{group_id}/events``, never the path) and
    status class. An unmatched path is ``unmatched``; WebSockets pass through."""

    async def http(self, scope: Scope, receive: Receive, send: AnswerStatus) -> None:
        began = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            observe(
                s.AUTHORITY_REQUESTS,
                time.perf_counter() - began,
                method=str(scope.get("method", "")),
                route=route_template(scope) or "unmatched",
                status_class=f"{send.status // 100}xx" if send.status else "none",
            )


__all__ = ["REFUSAL_CODES", "RequestMetrics", "read_refused", "subscriptions"]
