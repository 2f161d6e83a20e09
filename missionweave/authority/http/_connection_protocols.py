"""uvicorn's protocols in the connection budget (:mod:`._connections`): the h11 HTTP protocol
and the WebSocket protocol an upgrade hands the same connection to. ``server_limits`` names
them; each finds the app's :class:`~._connections.ConnectionBudget` in the lifespan state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from ._connections import BUDGET_STATE, CONNECTION_STATE, Connection


def _connection_of(app_state: dict[str, Any]) -> tuple[dict[str, Any], Connection | None]:
    """``app_state`` with this connection's :class:`Connection` in it (made once, for the
    HTTP protocol; a WebSocket protocol made by an upgrade gets the same), and the
    Connection; ``None`` when the app has no budget."""
    conn = app_state.get(CONNECTION_STATE)
    if conn is None:
        budget = app_state.get(BUDGET_STATE)
        if budget is None:
            return app_state, None
        conn = Connection(budget)
        app_state = {**app_state, CONNECTION_STATE: conn}
    return app_state, conn


class BudgetedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol in the connection budget: unauthenticated until a request's
    verified signature marks it (:func:`~._connections.mark_authenticated`); it tells the
    budget whether a request is in flight, and closes an overdue connection once its response
    is complete (a WebSocket upgrade stays unauthenticated: the stream decides)."""

    def __init__(
        self, config: Config, server_state: ServerState, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.app_state, self._budgeted = _connection_of(app_state)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._budgeted is not None:
            self._budgeted.busy = self._in_flight
            if not self._budgeted.budget.arrive(self._budgeted, transport):
                self.connections.discard(self)

    def _in_flight(self) -> bool:
        """A request's head has arrived and its response is not complete."""
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete

    def on_response_complete(self) -> None:
        if self._budgeted is not None:
            self._budgeted.finished()  # before a pipelined request is read
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._budgeted is not None:
            self._budgeted.leave()


class BudgetedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol in the connection budget: it keeps the place its HTTP
    connection took, unauthenticated again (:meth:`~._connections.ConnectionBudget.upgraded`);
    the stream marks it authenticated (:meth:`~._connections.Connection.authenticate`)."""

    def __init__(
        self, config: Config, server_state: ServerState, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.app_state, self._budgeted = _connection_of(app_state)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._budgeted is not None:
            self._budgeted.budget.arrive(self._budgeted, transport)
            self._budgeted.budget.upgraded(self._budgeted)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._budgeted is not None:
            self._budgeted.leave()


__all__ = ["BudgetedH11Protocol", "BudgetedWebSocketProtocol"]
