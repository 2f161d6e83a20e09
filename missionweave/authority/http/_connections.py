"""Connections no stranger can exhaust (issue 37 item 5): a budget of its own for connections
that have not authenticated, and a deadline for them to do so.

A TCP connection is *unauthenticated* from the moment it is accepted until a request on it has
carried a verified signature of a member or an operator (:func:`mark_authenticated`, called in
one place per path):

* a signed read admitted as a member's or an operator's (``_read_access.admit``: every read
  route, ``/v1/authority``, ``/readyz``, ``/v1/leases/…``);
* ``POST /v1/commands[/batch]`` whose Command signature(s) verified — any verdict but a refusal
  of the signer (``_command_routes.UNVERIFIED``: ``bad_signature``, ``unknown_actor``,
  ``not_a_member``, …);
* a genuine Authority-signed grant URL of the filesystem artifact store (``…/blobs/{token}``);
* on a WebSocket of ``/v1/stream``, an accepted ``SUBSCRIBE`` signed by an active member.

Unsigned requests (``/healthz``, ``/readyz``, ``/openapi.json``, ``/docs``, an unsigned
``/v1/authority``), a bad signature, and a stranger's valid signature are all *served* but
leave the connection unauthenticated: it keeps its deadline and its place in the
unauthenticated budget. An orchestrator's probe connection is short-lived; a kept-alive one is
closed at the deadline and the probe's next request opens a new one, which is fine. Before,
any request head authenticated: a stranger kept thousands of connections unevictable with an
unsigned ``GET /healthz`` every few seconds, and past ``--max-connections`` members' new
connections were refused. Unauthenticated connections are bounded apart from the others:

* at most :attr:`ConnectionLimits.max_unauthenticated` at once; one more evicts the *oldest*
  idle one (no request in flight among the :data:`EVICTION_SCAN` oldest; else the oldest),
  closed at once, so a newcomer — an honest member's request takes milliseconds to arrive and
  to verify — always gets in while a stranger holds thousands of sockets;
* each is closed :attr:`ConnectionLimits.auth_timeout_s` after it was accepted unless it
  authenticated (the stream closes a WebSocket politely, 1008, at the deadline; the budget
  closes the transport :data:`HARD_CLOSE_GRACE_S` later whatever the app did). A request in
  flight then (its body arriving, its handler running — a member's Command waiting for the
  group commit) is not cut: the connection is closed once its response is complete, or
  :attr:`ConnectionLimits.in_flight_grace_s` later, unless the request authenticates it
  meanwhile (which cancels the close);
* all connections together are at most :attr:`ConnectionLimits.max_connections` (the
  process's open files): past it an unauthenticated one is evicted, else the newcomer is
  closed at once.

A closed connection's unsent bytes (a response its peer never reads, such as
``/openapi.json``) are discarded :data:`HARD_CLOSE_GRACE_S` after the close (the transport is
aborted): a peer that does not read holds no open file.

Before this, one uvicorn ``limit_concurrency`` counted every socket: 4,200 unsigned upgrades
held for the stream's 60 s idle bound made every request of every member answer 503.

The budget lives in the app's lifespan state (:data:`BUDGET_STATE`, set by ``create_app``'s
lifespan), where uvicorn hands it to each connection's protocol: ``BudgetedH11Protocol``
and ``BudgetedWebSocketProtocol`` (:mod:`._connection_protocols`; ``server_limits`` names
them). Each connection's :class:`Connection` is in its scope's ``state`` under
:data:`CONNECTION_STATE`, where :func:`mark_authenticated` finds it. An app served without a
lifespan (``httpx.ASGITransport``) has no budget and no bound.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...metrics import add
from ...metrics import series as s

log = logging.getLogger(__name__)

#: Seconds a connection may stay unauthenticated (no verified signature of a member or an
#: operator yet: :func:`mark_authenticated`).
AUTH_TIMEOUT_S = 5.0
#: Seconds more a request in flight at the deadline may take (a Command waits for the group
#: commit: at most ``_batch.WRITER_STALL_S``) before its unauthenticated connection is closed.
IN_FLIGHT_GRACE_S = 10.0
#: The oldest unauthenticated connections looked at for an idle one to evict.
EVICTION_SCAN = 64
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
        in_flight_grace_s: seconds more a request in flight at the deadline may take (>= 0).

    Raises:
        ValueError: a bound out of range.
    """

    auth_timeout_s: float = AUTH_TIMEOUT_S
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    max_connections: int = MAX_CONNECTIONS
    in_flight_grace_s: float = IN_FLIGHT_GRACE_S

    def __post_init__(self) -> None:
        if self.auth_timeout_s <= 0:
            raise ValueError("auth_timeout_s must be positive")
        if self.in_flight_grace_s < 0:
            raise ValueError("in_flight_grace_s must not be negative")
        if not 1 <= self.max_unauthenticated <= self.max_connections:
            raise ValueError("need 1 <= max_unauthenticated <= max_connections")


class Connection:
    """One TCP connection's place in the budget (shared by its HTTP and WebSocket protocols).

    Attributes:
        authenticated: it has proved itself (a verified signature of a member or an operator,
            an accepted SUBSCRIBE).
        deadline: ``time.monotonic()`` by which it must authenticate (0 before it arrived).
        overdue: its deadline passed while a request was in flight: it is closed once that
            request's response is complete unless it authenticated meanwhile.
        busy: whether a request is in flight on it now (set by its HTTP protocol).
    """

    def __init__(self, budget: ConnectionBudget) -> None:
        self.budget = budget
        self.authenticated = False
        self.overdue = False
        self.deadline = 0.0
        self.transport: asyncio.BaseTransport | None = None
        self.busy: Callable[[], bool] = _idle
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
        ``over_limit``); what it could not send by :data:`HARD_CLOSE_GRACE_S` later is
        discarded (:func:`_shut`)."""
        add(s.AUTHORITY_CONNECTIONS_CLOSED, reason=reason)
        if self.transport is not None:
            _shut(self.transport)
        self.leave()

    def finished(self) -> None:
        """A response on it is complete: an overdue, still unauthenticated connection is
        closed now (the response still goes out; its next request is not read)."""
        if self.overdue and not self.authenticated:
            self.close("auth_timeout")

    def leave(self) -> None:
        """It is gone: give its place back (idempotent)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.budget._leave(self)


def _idle() -> bool:
    return False


def _shut(transport: asyncio.BaseTransport) -> None:
    """Close ``transport`` (its buffered bytes are still sent), and abort it
    :data:`HARD_CLOSE_GRACE_S` later: a peer that never reads (a large response left unread)
    must not keep the socket open."""
    if not transport.is_closing():
        transport.close()
    abort = getattr(transport, "abort", None)  # a no-op once the connection is lost
    if abort is not None:
        asyncio.get_running_loop().call_later(HARD_CLOSE_GRACE_S, abort)


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
            self._evict()
        if len(self._all) >= limits.max_connections:
            add(s.AUTHORITY_CONNECTIONS_CLOSED, reason="over_limit")
            _shut(transport)
            return False
        self._all.add(key)
        self._pend(conn)
        return True

    def upgraded(self, conn: Connection) -> None:
        """``conn`` (already in) became a WebSocket: on the stream only an accepted
        ``SUBSCRIBE`` proves a member, so a connection that authenticated as HTTP (a member's
        signed read) is unauthenticated again, with a fresh deadline; the oldest idle
        unauthenticated one is evicted when the budget is full. Without this an upgrade held
        an unevictable place until the stream's idle bound."""
        conn.busy = _idle  # the stream has no request in flight: it closes at the deadline
        if not conn.authenticated or id(conn) not in self._all:
            return
        conn.authenticated = conn.overdue = False
        if len(self._pending) >= self.limits.max_unauthenticated:
            self._evict()
        self._pend(conn)

    def _evict(self) -> None:
        """Close the oldest unauthenticated connection with no request in flight among the
        :data:`EVICTION_SCAN` oldest (a member's first request, still verifying, is spared),
        else the oldest."""
        victim = None
        for i, conn in enumerate(self._pending.values()):
            if i == EVICTION_SCAN:
                break
            if not conn.busy():
                victim = conn
                break
        if victim is None:
            victim = next(iter(self._pending.values()))
        del self._pending[id(victim)]
        victim.close("evicted")

    def _pend(self, conn: Connection) -> None:
        """Hold ``conn`` as unauthenticated, closed at its deadline unless it authenticates."""
        limits = self.limits
        self._pending[id(conn)] = conn
        conn.deadline = time.monotonic() + limits.auth_timeout_s
        conn._timer = asyncio.get_running_loop().call_later(
            limits.auth_timeout_s + HARD_CLOSE_GRACE_S, self._expire, conn
        )

    def _expire(self, conn: Connection) -> None:
        """The deadline (and its grace) passed: close ``conn`` unless it authenticated; one
        with a request in flight is closed when that response is complete
        (:meth:`Connection.finished`) or ``in_flight_grace_s`` later, whichever is first."""
        conn._timer = None
        if conn.authenticated:
            return
        if conn.busy() and not conn.overdue:
            conn.overdue = True
            conn._timer = asyncio.get_running_loop().call_later(
                self.limits.in_flight_grace_s, self._expire, conn
            )
            return
        conn.close("auth_timeout")

    def _authenticated(self, conn: Connection) -> None:
        self._pending.pop(id(conn), None)

    def _leave(self, conn: Connection) -> None:
        self._pending.pop(id(conn), None)
        self._all.discard(id(conn))


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


def mark_authenticated(scope: dict[str, Any] | Any) -> None:
    """A request of ``scope`` (an ASGI scope) carried a verified signature of a member or an
    operator: its connection leaves the unauthenticated budget and its deadline (a close
    pending past the deadline is cancelled). A no-op without a budget. Call it on the event
    loop, only once the signer is known to be a member or an operator (a stranger's own key
    signs validly)."""
    conn = connection_of(scope)
    if conn is not None:
        conn.authenticate()


__all__ = [
    "AUTH_TIMEOUT_S",
    "BUDGET_STATE",
    "CONNECTION_STATE",
    "EVICTION_SCAN",
    "HARD_CLOSE_GRACE_S",
    "IN_FLIGHT_GRACE_S",
    "MAX_CONNECTIONS",
    "MAX_UNAUTHENTICATED",
    "SPARE_FILES",
    "Connection",
    "ConnectionBudget",
    "ConnectionLimits",
    "connection_of",
    "mark_authenticated",
    "open_files_for",
    "raise_open_files",
]
