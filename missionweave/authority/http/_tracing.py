"""W3C trace context across the Authority's HTTP front (docs/observability.md).

The :class:`~missionweave.authority.client.AuthorityClient` injects the caller's ``traceparent``
(and ``tracestate``, ``baggage``) into every request with :func:`inject_trace_headers`; the
server's :class:`TraceContextMiddleware` extracts it and runs the request in a server span, so
an activity's ``RunActivity`` span, the ``authority.http`` span and the ``authority.append``
spans of its Commands form one trace. Hand-written (a few lines) rather than an
``opentelemetry-instrumentation-*`` dependency.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import FastAPI
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter
from starlette.types import Receive, Scope

from ...telemetry import tracer
from ._asgi import AnswerStatus, HTTPObserver, route_template


class _ScopeHeaders(Getter[Scope]):
    """Reads propagation headers from an ASGI scope (latin-1 byte pairs, lower-case names)."""

    def get(self, carrier: Scope, key: str) -> list[str] | None:
        name = key.lower().encode("latin-1")
        found = [v.decode("latin-1") for k, v in carrier.get("headers", ()) if k == name]
        return found or None

    def keys(self, carrier: Scope) -> list[str]:
        return [k.decode("latin-1") for k, _ in carrier.get("headers", ())]


_GETTER = _ScopeHeaders()

#: ``FastAPI(**NATIVE_TRACING_OFF)``: recent FastAPI versions trace requests themselves once a
#: global provider is set; :class:`TraceContextMiddleware` does it for every version (and for a
#: provider given to ``setup_tracing``), so theirs is turned off: one server span per request.
NATIVE_TRACING_OFF: dict[str, Any] = (
    {"telemetry": {"tracing": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


class TraceContextMiddleware(HTTPObserver):
    """ASGI middleware: each HTTP request runs in a server span named
    ``authority.http <METHOD> <route template>``, a child of the caller's ``traceparent``.

    Attributes follow the HTTP semantic conventions (``http.request.method``, ``http.route``,
    ``url.path``, ``http.response.status_code``); a 5xx answer marks the span as an error.
    WebSocket connections (long-lived subscriptions) pass through untraced.

    Args:
        app: the ASGI app to wrap.
    """

    async def http(self, scope: Scope, receive: Receive, send: AnswerStatus) -> None:
        method = str(scope.get("method", ""))
        with tracer().start_as_current_span(
            f"authority.http {method}",
            context=propagate.extract(scope, getter=_GETTER),
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": str(scope.get("path", ""))},
        ) as span:
            try:
                await self.app(scope, receive, send)
            finally:
                if span.is_recording():
                    # the template, not the path, keeps span names few
                    route = route_template(scope)
                    if route:
                        span.update_name(f"authority.http {method} {route}")
                        span.set_attribute("http.route", route)
                    if send.status:
                        span.set_attribute("http.response.status_code", send.status)
                    if send.status >= 500:
                        span.set_status(trace.StatusCode.ERROR, f"HTTP {send.status}")


__all__ = ["NATIVE_TRACING_OFF", "TraceContextMiddleware"]
