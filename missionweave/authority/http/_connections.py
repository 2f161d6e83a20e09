"""Connections no stranger can exhaust (issue 37 item 5): a budget of its own for connections
that have not authenticated, and a deadline for them to do so.

A TCP connection is *unauthenticated* from the moment it is accepted until it has proved it is
worth its slot: an HTTP connection until its first request head has arrived (every route then
answers on its own terms: a signed read, a signed Command, ``/healthz``), a WebSocket of
``/v1/stream`` until its first ``SUBSCRIBE`` signed by an active member has been accepted.
Unauthenticated connections are bounded apart from the others:

* at most :attr:`ConnectionLimits.max_unauthenticated` at once; one more evicts the *oldest*
  (closed at once), so a newcomer — an honest member's request takes milliseconds to arrive —
  always gets in while a stranger holds thousands of idle sockets;
* each is closed :attr:`ConnectionLimits.auth_timeout_s` after it was accepted unless it
  authenticated (the stream closes a WebSocket politely, 1008, at the deadline; the budget
  closes the transport :data:`HARD_CLOSE_GRACE_S` later whatever the app did);
* all connections together are at most :attr:`ConnectionLimits.max_connections` (the
  process's open files): past it an unauthenticated one is evicted, else the newcomer is
  closed at once.

Before this, one uvicorn ``limit_concurrency`` counted every socket: 4,200 unsigned upgrades
held for the stream's 60 s idle bound made every request of every member answer 503.

The budget lives in the app's lifespan state (:data:`BUDGET_STATE`, set by ``create_app``'s
lifespan), where uvicorn hands it to each connection's protocol: :class:`BudgetedH11Protocol`
and :class:`BudgetedWebSocketProtocol` (``server_limits`` names them). Each connection's
:class:`Connection` is in its scope's ``state`` under :data:`CONNECTION_STATE`, so the stream
marks it authenticated. An app served without a lifespan (``httpx.ASGITransport``) has no
budget and no bound.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from ...metrics import add
from ...metrics import series as s

log = logging.getLogger(__name__)

#: Seconds a connection may stay unauthenticated (no request head / no accepted SUBSCRIBE).
AUTH_TIMEOUT_S = 5.0
#: Unauthenticated connections held at once; one more evicts the oldest.
MAX_UNAUTHENTICATED = 1024
#: Connections of every kind held at once (each is an open file of the process).
MAX_CONNECTIONS = 4096
#: Seconds after the deadline at which the budget closes the transport itself.
HARD_CLOSE_GRACE_S = 1.0
#: Open files a server keeps for itself beyond its connections (database, logs, threads).
SPARE_FILES = 256
#: The lifespan-state key of the app's :class:`ConnectionBudget`.
BUDGET_STATE = "missionweave.connection_budget"
#: The scope-state key of a connection's :class:`Connection`.
CONNECTION_STATE = "missionweave.connection"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The bounds of :class:`ConnectionBudget`.

    Attributes:
        auth_timeout_s: seconds an unauthenticated connection is kept (> 0).
        max_unauthenticated: unauthenticated connections at once (>= 1).
        max_connections: connections at once, of every kind (>= ``max_unauthenticated``).

    Raises:
        ValueError: a bound out of range.
    """

    auth_timeout_s: float = AUTH_TIMEOUT_S
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    max_connections: int = MAX_CONNECTIONS

    def __post_init__(self) -> None:
        if self.auth_timeout_s <= 0:
            raise ValueError("auth_timeout_s must be positive")
        if not 1 <= self.max_unauthenticated <= self.max_connections:
            raise ValueError("need 1 <= max_unauthenticated <= max_connections")


class Connection:
    """One TCP connection's place in the budget (shared by its HTTP and WebSocket protocols).

    Attributes:
        authenticated: it has proved itself (a request head, an accepted SUBSCRIBE).
        deadline: ``time.monotonic()`` by which it must authenticate (0 before it arrived).
    """

    def __init__(self, budget: ConnectionBudget) -> None:
        self.budget = budget
        self.authenticated = False
        self.deadline = 0.0
        self.transport: asyncio.BaseTransport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def remaining_s(self) -> float:
        """Seconds left to authenticate (0 when past the deadline)."""
        return max(0.0, self.deadline - time.monotonic())

    def authenticate(self) -> None:
        """It proved itself: out of the unauthenticated budget, no deadline (idempotent)."""
        if not self.authenticated:
            self.authenticated = True
            self.budget._authenticated(self)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def close(self, reason: str) -> None:
        """Close its transport now, counted by ``reason`` (``evicted``, ``auth_timeout``,
        ``over_limit``)."""
        add(s.AUTHORITY_CONNECTIONS_CLOSED, reason=reason)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.leave()

    def leave(self) -> None:
        """It is gone: give its place back (idempotent)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.budget._leave(self)


class ConnectionBudget:
    """The connections of one server, unauthenticated ones apart; single event loop.

    Args:
        limits: the bounds.
    """

    def __init__(self, limits: ConnectionLimits | None = None) -> None:
        self.limits = limits or ConnectionLimits()
        self._pending: OrderedDict[int, Connection] = OrderedDict()  # oldest first
        self._all: set[int] = set()

    @property
    def unauthenticated(self) -> int:
        """Unauthenticated connections held now."""
        return len(self._pending)

    @property
    def connections(self) -> int:
        """Connections held now, of every kind."""
        return len(self._all)

    def arrive(self, conn: Connection, transport: asyncio.BaseTransport) -> bool:
        """Take a place for the newly accepted ``conn`` (a no-op for one already in, e.g. after
        a WebSocket upgrade). Evicts the oldest unauthenticated connection when a bound is
        reached; ``False`` (and ``transport`` closed) when every place is taken by
        authenticated ones."""
        key = id(conn)
        if key in self._all:
            return True
        conn.transport = transport
        limits = self.limits
        if self._pending and (
            len(self._pending) >= limits.max_unauthenticated
            or len(self._all) >= limits.max_connections
        ):
            _, oldest = self._pending.popitem(last=False)
            oldest.close("evicted")
        if len(self._all) >= limits.max_connections:
            add(s.AUTHORITY_CONNECTIONS_CLOSED, reason="over_limit")
            transport.close()
            return False
        self._all.add(key)
        self._pending[key] = conn
        conn.deadline = time.monotonic() + limits.auth_timeout_s
        conn._timer = asyncio.get_running_loop().call_later(
            limits.auth_timeout_s + HARD_CLOSE_GRACE_S, self._expire, conn
        )
        return True

    def _expire(self, conn: Connection) -> None:
        conn._timer = None
        if not conn.authenticated:
            conn.close("auth_timeout")

    def _authenticated(self, conn: Connection) -> None:
        self._pending.pop(id(conn), None)

    def _leave(self, conn: Connection) -> None:
        self._pending.pop(id(conn), None)
        self._all.discard(id(conn))


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
    """uvicorn's h11 protocol in the connection budget: unauthenticated until its first
    request head arrives (a WebSocket upgrade stays unauthenticated: the stream decides)."""

    def __init__(
        self, config: Config, server_state: ServerState, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.app_state, self._budgeted = _connection_of(app_state)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._budgeted is not None and not self._budgeted.budget.arrive(
            self._budgeted, transport
        ):
            self.connections.discard(self)

    def handle_events(self) -> None:
        super().handle_events()
        if self._budgeted is not None and self.cycle is not None:
            self._budgeted.authenticate()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._budgeted is not None:
            self._budgeted.leave()


class BudgetedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol in the connection budget: it keeps the place its HTTP
    connection took; the stream marks it authenticated (:meth:`Connection.authenticate`)."""

    def __init__(
        self, config: Config, server_state: ServerState, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.app_state, self._budgeted = _connection_of(app_state)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._budgeted is not None:
            self._budgeted.budget.arrive(self._budgeted, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._budgeted is not None:
            self._budgeted.leave()


def raise_open_files(need: int) -> int:
    """Raise this process's soft limit of open files (``RLIMIT_NOFILE``) to ``need``, as far
    as the hard limit allows (never lowers it).

    Returns:
        The soft limit now (``need`` or more when unlimited: ``RLIM_INFINITY`` is a large int).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return need if soft == resource.RLIM_INFINITY else soft


def open_files_for(limits: ConnectionLimits) -> int:
    """Raise this process's soft limit of open files (``RLIMIT_NOFILE``) so that
    ``limits.max_connections`` connections and :data:`SPARE_FILES` fit, as far as the hard
    limit allows (a warning when it does not: past the limit, accepting fails for everyone).

    Returns:
        The soft limit now.
    """
    need = limits.max_connections + SPARE_FILES
    soft = raise_open_files(need)
    if soft < need:
        log.warning(
            "open files are limited to %d: fewer than %d connections fit; raise the hard "
            "limit (ulimit -Hn) or lower max_connections",
            soft,
            limits.max_connections,
        )
    return soft


def connection_of(scope: dict[str, Any] | Any) -> Connection | None:
    """The :class:`Connection` of an ASGI ``scope`` (``None`` when served without a budget)."""
    state = scope.get("state") or {}
    conn = state.get(CONNECTION_STATE)
    return conn if isinstance(conn, Connection) else None


__all__ = [
    "AUTH_TIMEOUT_S",
    "BUDGET_STATE",
    "CONNECTION_STATE",
    "HARD_CLOSE_GRACE_S",
    "MAX_CONNECTIONS",
    "MAX_UNAUTHENTICATED",
    "SPARE_FILES",
    "BudgetedH11Protocol",
    "BudgetedWebSocketProtocol",
    "Connection",
    "ConnectionBudget",
    "ConnectionLimits",
    "connection_of",
    "open_files_for",
    "raise_open_files",
]
