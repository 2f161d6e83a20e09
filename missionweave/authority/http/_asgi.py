"""What the front's observing ASGI middlewares share (:mod:`._metrics`, :mod:`._tracing`): they
watch each HTTP request's answer and pass every other connection (WebSockets, lifespan) through
untouched."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class AnswerStatus:
    """An ASGI ``send`` that remembers the status its answer started with.

    Args:
        send: the ``send`` it forwards every message to.

    Attributes:
        status: the HTTP status of the ``http.response.start`` sent; 0 while none has been.
    """

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self._send(message)


class HTTPObserver:
    """ASGI middleware base: :meth:`http` runs around each HTTP request; anything else passes.

    Args:
        app: the ASGI app to wrap.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, AnswerStatus(send))

    async def http(self, scope: Scope, receive: Receive, send: AnswerStatus) -> None:
        """Run ``self.app`` for one HTTP request; ``send.status`` is its answer's status after."""
        raise NotImplementedError


def route_template(scope: Scope) -> str | None:
    """The template of the route the router matched (``/v1/groups/{group_id}/events``, never
    the path: few distinct values), ``None`` when none matched (or before routing)."""
    path = getattr(scope.get("route"), "path", None)
    return str(path) if path else None


__all__ = ["AnswerStatus", "HTTPObserver", "route_template"]
