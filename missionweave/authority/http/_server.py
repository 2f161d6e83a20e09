"""The Authority's HTTP and WebSocket front (protocol section 16, docs/design.md §6):
:func:`create_app` assembles it, :func:`serve` runs it with uvicorn.

Routes, by the module (an ``APIRouter``) that holds them and says what each answers::

    _command_routes   POST /v1/commands, POST /v1/commands/batch
    _log_routes       GET  /v1/groups/{group_id}/events, …/head, …/snapshots/{seq};
                      GET  /v1/leases/{lease_id}
    _token_routes     POST /v1/capability-tokens/verify
    _artifact_routes  GET  /v1/groups/{group_id}/artifacts/{artifact_hash};
                      GET|PUT /v1/artifact-blobs/{token}
    _upload_routes    POST /v1/groups/{group_id}/artifacts/{artifact_hash}/upload
    _agent_routes     GET  /v1/groups/{group_id}/agents, GET|PUT …/presence
    _service_routes   GET  /v1/authority, GET /healthz, GET /readyz
    _stream_routes    WS   /v1/stream (SUBSCRIBE / EVENT / ACK / ERROR)

What the routes share (the Authority, the writer, the read gate …) is one :class:`~._front.Front`
on ``app.state.front``, given to each route by ``Depends(get_front)``.

Every read (``GET``) but ``/healthz``, ``/readyz`` and the Authority's public key is a signed
request (RFC 9421, :mod:`._read_access`) of an active member of the Group it reads — or of an
operator key (:attr:`AuthorityConfig.operator_keys`), who may read everything. ``GET /v1/authority``
answers anyone with the public key, and a signed reader with its Groups too; a non-member gets
the same 403 whether or not the Group exists. Bodies, headers, JSON depth and integers are
bounded (:mod:`._limits`), and so are large reads in flight, per key and in all (429
``too_many_reads`` with ``Retry-After``, :mod:`._read_gate`). Writes go before reads: large
reads run in threads of their own and are shed first under pressure (429 ``read_shed``,
:mod:`._read_lane`). Connections that have not authenticated have a budget and a deadline of
their own (:mod:`._connections`), so a stranger's sockets never crowd out a member.

Every error body is ``{"code", "reason", "detail"}`` (:mod:`._errors`, where every exception
handler is registered); a cursor below the online window answers 410 ``CURSOR_TOO_OLD`` with a
signed ``snapshot`` reference (MW-16-e). Every Authority call runs in a worker thread, so a slow
fsync never stalls the event loop; writes go through one :class:`BatchWriter` (group commit).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI

from ...artifacts import ArtifactStore
from ...metrics import series, unwatch, watch
from ..core import Authority, credit_on_start, freshness_clock, keep_alive, warm_up_verifier
from ..wire import PRESENCE_TTL_MS, PresenceBoard, ReadVerifier
from . import (
    _agent_routes,
    _artifact_routes,
    _command_routes,
    _log_routes,
    _service_routes,
    _stream_routes,
    _token_routes,
    _upload_routes,
)
from ._batch import BatchWriter, Notifier
from ._connections import BUDGET_STATE, ConnectionBudget, ConnectionLimits, open_files_for
from ._errors import add_error_handlers, error_body
from ._front import Front
from ._limits import BodyLimits, server_limits
from ._metrics import RequestMetrics
from ._read_gate import ReadGate
from ._read_lane import ReadLane
from ._silence import SilenceWatch
from ._stream import MAX_REPLAY_EVENTS, WS_IDLE_TIMEOUT_S
from ._tracing import NATIVE_TRACING_OFF, TraceContextMiddleware

#: Largest WebSocket message uvicorn takes before closing the socket (1009), bytes.
WS_MAX_BYTES = 1024 * 1024
#: The routers of the front, in the order their routes are matched and documented.
ROUTERS: tuple[APIRouter, ...] = (
    _command_routes.router,
    _log_routes.router,
    _token_routes.router,
    _artifact_routes.router,
    _upload_routes.router,
    _agent_routes.router,
    _service_routes.router,
    _stream_routes.router,
)


def _unauthenticated(budget: ConnectionBudget) -> int:
    return budget.unauthenticated


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    """Ready the served Authority before the first request; drain the writer after the last.

    Yields the lifespan state uvicorn hands each connection's protocol: the connection budget
    (:data:`~._connections.BUDGET_STATE`)."""
    front: Front = app.state.front
    budget = app.state.connection_budget = ConnectionBudget(app.state.connection_limits)
    watch(series.AUTHORITY_UNAUTHENTICATED, budget, _unauthenticated)
    authority = front.authority
    if authority.config.parallel_verify_min:  # ready before the first large batch
        await asyncio.to_thread(warm_up_verifier)
    # the Authority's own downtime never costs an owner its lease (MW-11.5-c)
    await asyncio.to_thread(credit_on_start, authority)
    alive = asyncio.create_task(keep_alive(authority), name="authority alive mark")
    loop = asyncio.get_running_loop()
    # Replicas over one PostgreSQL: another replica's commit wakes this one's streams; after
    # the LISTEN connection was lost, every stream (they read the log itself).
    listener = authority.store.listen(
        lambda gid: loop.call_soon_threadsafe(front.notifier.notify, {gid}),
        lambda: loop.call_soon_threadsafe(front.notifier.notify_all),
    )
    remove_probe = authority.probes.add(front.writer.stalled)
    try:
        yield {BUDGET_STATE: budget}
        await front.writer.drain()
    finally:
        remove_probe()
        unwatch(series.AUTHORITY_UNAUTHENTICATED, budget)
        front.writer.close()
        front.lane.close()
        alive.cancel()
        await asyncio.gather(alive, return_exceptions=True)
        if listener is not None:
            listener.close()


def create_app(
    authority: Authority,
    *,
    max_batch: int = 256,
    poll_interval_s: float = 0.2,
    presence_ttl_ms: int = PRESENCE_TTL_MS,
    read_gate: ReadGate | None = None,
    max_replay_events: int = MAX_REPLAY_EVENTS,
    ws_idle_timeout_s: float = WS_IDLE_TIMEOUT_S,
    artifact_store: ArtifactStore | None = None,
    connection_limits: ConnectionLimits | None = None,
    read_lane: dict[str, int] | None = None,
) -> FastAPI:
    """Build the ASGI app serving ``authority``.

    Args:
        authority: the Authority (it stays owned by the caller, who closes it).
        max_batch: Commands per group-commit transaction of the :class:`BatchWriter`.
        poll_interval_s: seconds between fallback polls of each WebSocket subscription, which
            picks up Events appended by other processes on the same SQLite file (on
            PostgreSQL, every replica's commits wake the streams at once: LISTEN/NOTIFY).
        presence_ttl_ms: a presence report is shown for this many milliseconds (Authority
            clock) after it was received.
        read_gate: the bounds on large reads in flight (pages of Events, snapshots) per key
            and in total (default :class:`ReadGate` ``()``: 4 per key, 32 in all); past them
            a read is answered 429 ``too_many_reads`` with ``Retry-After``.
        max_replay_events: a ``SUBSCRIBE`` more than this many Events behind the head is
            answered ``CURSOR_TOO_OLD`` with a recent signed snapshot instead of a replay.
        ws_idle_timeout_s: a WebSocket that holds no subscription this many seconds is
            closed (1008).
        artifact_store: the artifact store's root, which only the Authority (and the
            coordinator) hold: members get one object at a time through its grants
            (``GET /v1/groups/{g}/artifacts/{hash}``, ``_artifact_routes``, MW-13.3-d);
            ``None``: no Artifacts are served.
        connection_limits: the bounds on connections that have not authenticated (default
            :class:`~._connections.ConnectionLimits` ``()``: closed 5 s after they connect
            unless they did, at most 1024 of them at once (one more evicts the oldest), 4096
            connections in all); applied by the protocols of ``server_limits()`` when uvicorn
            runs the app's lifespan.
        read_lane: settings of the :class:`~._read_lane.ReadLane` (``threads``,
            ``shed_after_ms``, ``max_backlog``; default 2 threads, reads shed while a Command
            has waited 100 ms or 8 reads wait for a thread: 429 ``read_shed``).

    Raises:
        ValueError: ``max_batch`` < 1, ``poll_interval_s`` <= 0, ``presence_ttl_ms`` < 1 or
            ``max_replay_events`` < 1.

    Returns:
        The app; ``app.state.front`` (the :class:`~._front.Front` its routes share), and of
        its parts ``app.state.authority``, ``app.state.writer`` (the :class:`BatchWriter`),
        ``app.state.notifier``, ``app.state.presence`` (the in-memory presence board),
        ``app.state.read_gate``, ``app.state.read_lane`` and, once served,
        ``app.state.connection_budget`` are exposed for embedding and tests.

    Implements MW-16-a (at-least-once EVENT stream, Events carry their ids), MW-16-c (ACK
    records cursors, never deletes history), MW-16-d (SUBSCRIBE.afterSequence replay) and
    MW-16-e (CURSOR_TOO_OLD with a signed snapshot reference).
    """
    if poll_interval_s <= 0:
        raise ValueError("poll_interval_s must be positive")
    if max_replay_events < 1:
        raise ValueError("max_replay_events must be >= 1")
    notifier = Notifier()
    presence = PresenceBoard(authority.clock, presence_ttl_ms)
    writer = BatchWriter(authority, max_batch=max_batch, on_commit=notifier.notify)
    front = Front(
        authority=authority,
        writer=writer,
        notifier=notifier,
        presence=presence,
        gate=read_gate or ReadGate(),
        lane=ReadLane(writer.oldest_wait_ms, **(read_lane or {})),
        reads=ReadVerifier(freshness_clock(authority.clock)),
        artifact_store=artifact_store,
        poll_interval_s=poll_interval_s,
        max_replay_events=max_replay_events,
        ws_idle_timeout_s=ws_idle_timeout_s,
    )
    app = FastAPI(
        title="MissionWeave Group Authority", version="1", lifespan=_lifespan, **NATIVE_TRACING_OFF
    )
    app.add_middleware(RequestMetrics)  # inside the trace: the route is known when it ends
    app.add_middleware(TraceContextMiddleware)  # joins the caller's trace (traceparent)
    app.add_middleware(BodyLimits, error=error_body)
    # outermost: a silence is credited to live leases before anything of the request runs
    app.add_middleware(SilenceWatch, authority=authority)
    app.state.front = front
    app.state.connection_limits = connection_limits or ConnectionLimits()
    # the documented handles, for embedding and tests
    app.state.authority = authority
    app.state.writer = front.writer
    app.state.notifier = notifier
    app.state.presence = presence
    app.state.read_gate = front.gate
    app.state.read_lane = front.lane
    add_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    return app


def serve(authority: Authority, host: str = "127.0.0.1", port: int = 8787, **kw: Any) -> None:
    """Run the server with uvicorn until interrupted (blocking; for the CLI).

    Args:
        authority: the Authority to serve.
        host: the interface to bind.
        port: the TCP port.
        **kw: ``max_batch``, ``poll_interval_s``, ``presence_ttl_ms``, ``read_gate``,
            ``max_replay_events``, ``ws_idle_timeout_s``, ``artifact_store``,
            ``connection_limits`` and ``read_lane`` go to :func:`create_app`; else to
            ``uvicorn.Config`` (e.g. ``log_level``, or ``ssl_certfile``/``ssl_keyfile`` for
            TLS), over the defaults of :func:`~._limits.server_limits` (header size, idle
            keep-alive, WebSocket pings, the connection budget's protocols) and
            ``ws_max_size`` = :data:`WS_MAX_BYTES`.

    The process's soft limit of open files is raised to its hard limit first (each
    connection is one): :func:`~._connections.open_files_for`.
    """
    names = (
        "max_batch",
        "poll_interval_s",
        "presence_ttl_ms",
        "read_gate",
        "max_replay_events",
        "ws_idle_timeout_s",
        "artifact_store",
        "connection_limits",
        "read_lane",
    )
    app_kw = {k: kw.pop(k) for k in names if k in kw}
    limits = app_kw.get("connection_limits") or ConnectionLimits()
    open_files_for(limits)
    app = create_app(authority, **app_kw)
    kw = {**server_limits(), "ws_max_size": WS_MAX_BYTES, **kw}
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, **kw)).run()


__all__ = ["ROUTERS", "WS_MAX_BYTES", "create_app", "serve"]
