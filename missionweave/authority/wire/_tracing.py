"""W3C trace context from the client's side: the Authority client injects the caller's
``traceparent`` (and ``tracestate``, ``baggage``) into every request (docs/observability.md);
the server's ``TraceContextMiddleware`` (``authority.http``) extracts it."""

from __future__ import annotations

import httpx
from opentelemetry import propagate


async def inject_trace_headers(request: httpx.Request) -> None:
    """httpx ``request`` event hook: add the current trace context's headers (none when no
    span is active)."""
    propagate.inject(request.headers)
