"""The Authority's HTTP and WebSocket front (protocol section 16, docs/design.md §6).

Routes::

    POST /v1/commands                          one Command → SubmitResult (200, or 409 rejected)
    POST /v1/commands/batch                    up to 1000 Commands → [SubmitResult] (200)
    GET  /v1/groups/{group_id}/events          ?after_sequence=N&limit=M → {events, head_seq}
                                               (also cut at MAX_PAGE_BYTES: page on; streamed
                                               a chunk at a time; 429 past the read gate)
    GET  /v1/groups/{group_id}/head            → {seq, hash}
    GET  /v1/groups/{group_id}/snapshots/{seq} → the whole signed snapshot
    GET  /v1/leases/{lease_id}                 → the lease row with ``valid``
    POST /v1/capability-tokens/verify          {token, operation?} → TokenCheck (200, 422);
                                               the token is the credential (``_token_routes``)
    GET  /v1/groups/{group_id}/agents          → {agents: [AgentInfo]} (cards, epochs, reliability)
    PUT  /v1/groups/{group_id}/presence        a signed presence report → {stored} (200, 403, 422)
    GET  /v1/groups/{group_id}/presence        → {agent_id: {free_slots, queue_depth, age_ms}}
    GET  /v1/groups/{group_id}/artifacts/{h}   ?operation=read|write → ArtifactGrant: one object,
                                               a few minutes (``_artifact_routes``, MW-13.3-d)
    GET|PUT /v1/artifact-blobs/{token}         the filesystem store's bytes, for a grant
    GET  /v1/authority                         → {public_key, groups}
    GET  /healthz                              → {ok: true}
    WS   /v1/stream                            SUBSCRIBE / EVENT / ACK / ERROR (see ``_stream``)

Every read (``GET``) but ``/healthz`` and the Authority's public key is a signed request
(RFC 9421, :mod:`._readsig`) of an active member of the Group it reads — or of an operator
key (:attr:`AuthorityConfig.operator_keys`), who may read everything. ``GET /v1/authority``
answers anyone with the public key, and a signed reader with its Groups too; a non-member gets
the same 403 whether or not the Group exists. Bodies, headers, JSON depth and integers are
bounded (:mod:`._limits`), and so are large reads in flight, per key and in all (429
``too_many_reads`` with ``Retry-After``, :mod:`._read_gate`).

Every error body is ``{"code", "reason", "detail"}``; a cursor below the online window answers
410 ``CURSOR_TOO_OLD`` with a signed ``snapshot`` reference (MW-16-e). Every Authority call runs
in a worker thread, so a slow fsync never stalls the event loop; writes go through one
:class:`BatchWriter` (group commit).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import Body, Depends, FastAPI, Path, Query, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...artifacts import ArtifactStore
from ...metrics import series, unwatch, watch
from ...protocol import CanonicalizationError, Command, RejectionCode
from ..core import Authority, credit_on_start, keep_alive, warm_up_verifier
from ..wire import (
    ACCEPT_SIGNATURE,
    PRESENCE_TTL_MS,
    CursorTooOldError,
    FrameError,
    PresenceBoard,
    ReadRefused,
    ReadVerifier,
    SignedRead,
    SubmitResult,
    UnknownGroupError,
    check_presence_shape,
)
from ._artifact_routes import add_artifact_routes
from ._batch import BatchWriter, Notifier
from ._frames import check_member_frame
from ._limits import MAX_COMMAND_BYTES, MAX_PAGE_BYTES, BodyLimits, server_limits
from ._metrics import RequestMetrics, read_refused, subscriptions
from ._pages import EventReader, page_body
from ._read_gate import ReadGate
from ._silence import SilenceWatch
from ._stream import MAX_REPLAY_EVENTS, WS_IDLE_TIMEOUT_S, StreamSession
from ._token_routes import add_token_routes
from ._tracing import NATIVE_TRACING_OFF, TraceContextMiddleware

log = logging.getLogger(__name__)

#: Most Commands accepted by one ``POST /v1/commands/batch``.
MAX_BATCH_REQUEST = 1000
#: Largest sequence number a request may name (SQLite's INTEGER).
MAX_SEQ = 2**63 - 1


class ErrorBody(BaseModel):
    """Every error answer: a stable ``code``, one human ``reason``, machine-readable ``detail``."""

    code: str
    reason: str
    detail: dict[str, Any]


def _responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route's error answers (all :class:`ErrorBody`)."""
    return {s: {"model": ErrorBody} for s in (422, *statuses)}


_READ = (401, 403, 429)
#: Largest WebSocket message uvicorn takes before closing the socket (1009), bytes.
WS_MAX_BYTES = 1024 * 1024


def error_body(code: str, reason: str, **detail: Any) -> dict[str, Any]:
    """The structured error body every failing route answers with."""
    return {"code": code, "reason": reason, "detail": detail}


def _error(status: int, code: str, reason: str, **detail: Any) -> JSONResponse:
    return JSONResponse(error_body(code, reason, **detail), status_code=status)


def _result(r: SubmitResult) -> dict[str, Any]:
    return r.model_dump(mode="json")


def _unsignable(commands: list[Command]) -> JSONResponse | None:
    # A float in a body passes the pydantic model but can never be canonicalized or verified:
    # refuse it here rather than let it fail inside a shared transaction. So is a Command
    # larger than what one Command may add to the log.
    for i, cmd in enumerate(commands):
        try:
            size = len(cmd.signing_bytes())
        except CanonicalizationError as exc:
            return _error(
                422, RejectionCode.INVALID_COMMAND, str(exc), index=i, command_id=cmd.command_id
            )
        if size > MAX_COMMAND_BYTES:
            return _error(
                413,
                RejectionCode.COMMAND_TOO_LARGE,
                f"a Command is at most {MAX_COMMAND_BYTES} bytes",
                index=i,
                command_id=cmd.command_id,
                bytes=size,
                max_bytes=MAX_COMMAND_BYTES,
            )
    return None


#: The key a read's ``Signature-Input`` names (checked later, when the signature is).
_KEYID = re.compile(r'keyid="([^"]{1,200})"')


class _Busy(Exception):
    """A large read refused by the read gate; ``detail`` is the refusal's."""

    def __init__(self, detail: dict[str, Any]) -> None:
        super().__init__("too many reads")
        self.detail = detail


class _GatedStream(StreamingResponse):
    """A streamed answer that gives back its read slot when it is over, sent or cut off."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None], **kw: Any):
        super().__init__(content, **kw)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _frame_error(err: FrameError) -> JSONResponse:
    statuses: dict[str, int] = {RejectionCode.UNKNOWN_GROUP: 404, RejectionCode.UNAUTHORIZED: 403}
    status = statuses.get(err.code, 422)
    return _error(status, err.code, err.reason, **err.detail)


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

    Raises:
        ValueError: ``max_batch`` < 1, ``poll_interval_s`` <= 0, ``presence_ttl_ms`` < 1 or
            ``max_replay_events`` < 1.

    Returns:
        The app; ``app.state.authority``, ``app.state.writer`` (the :class:`BatchWriter`),
        ``app.state.notifier`` and ``app.state.presence`` (the in-memory presence board) are
        exposed for embedding and tests.

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

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if authority.config.parallel_verify_min:  # ready before the first large batch
            await asyncio.to_thread(warm_up_verifier)
        # the Authority's own downtime never costs an owner its lease (MW-11.5-c)
        await asyncio.to_thread(credit_on_start, authority)
        alive = asyncio.create_task(keep_alive(authority), name="authority alive mark")
        loop = asyncio.get_running_loop()
        # Replicas over one PostgreSQL: another replica's commit wakes this one's streams.
        listener = authority.store.listen(
            lambda gid: loop.call_soon_threadsafe(notifier.notify, {gid})
        )
        try:
            yield
            await writer.drain()
        finally:
            alive.cancel()
            await asyncio.gather(alive, return_exceptions=True)
            if listener is not None:
                listener.close()

    app = FastAPI(
        title="MissionWeave Group Authority", version="1", lifespan=lifespan, **NATIVE_TRACING_OFF
    )
    app.add_middleware(RequestMetrics)  # inside the trace: the route is known when it ends
    app.add_middleware(TraceContextMiddleware)  # joins the caller's trace (traceparent)
    app.add_middleware(BodyLimits, error=error_body)
    # outermost: a silence is credited to live leases before anything of the request runs
    app.add_middleware(SilenceWatch, authority=authority)
    reads = ReadVerifier(authority.clock)
    gate = read_gate or ReadGate()
    operators = authority.config.operator_keys
    app.state.authority = authority
    app.state.writer = writer
    app.state.notifier = notifier
    app.state.presence = presence
    app.state.read_gate = gate

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        on_commands = request.url.path.startswith("/v1/commands")
        code = RejectionCode.INVALID_COMMAND if on_commands else RejectionCode.INVALID_REQUEST
        errors: list[dict[str, Any]] = [
            {
                "loc": [str(p) for p in e.get("loc", ())],
                "msg": str(e.get("msg", "")),
                "type": str(e.get("type", "")),
            }
            for e in exc.errors()
        ]
        reason = "invalid request"
        if errors:
            loc = ".".join(errors[0]["loc"])
            reason = f"{loc}: {errors[0]['msg']}" if loc else str(errors[0]["msg"])
        return _error(422, code, reason, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, RejectionCode.HTTP_ERROR
        )
        response = _error(exc.status_code, code, str(exc.detail))
        response.headers.update(exc.headers or {})  # 405 keeps its Allow
        return response

    @app.exception_handler(ReadRefused)
    async def _refused(_: Request, exc: ReadRefused) -> JSONResponse:
        read_refused(exc.code)
        response = _error(exc.status, exc.code, exc.reason, **exc.detail)
        if exc.status == 401:
            response.headers["Accept-Signature"] = ACCEPT_SIGNATURE
        return response

    async def reader(request: Request) -> SignedRead | None:
        """The verified signed read, ``None`` when the request is not signed (not yet
        remembered: see :meth:`ReadVerifier.remember`)."""
        scope = request.scope
        query = scope.get("query_string", b"")
        # raw_path as sent (percent-encoded); some ASGI servers leave the query on it
        raw_path = (scope.get("raw_path") or scope["path"].encode()).split(b"?", 1)[0]
        url = "http://authority" + raw_path.decode("latin-1")
        if query:
            url += "?" + query.decode("latin-1")
        return reads.verify(request.method, url, request.headers.items())

    def signed(read: SignedRead | None) -> SignedRead:
        if read is None:
            raise ReadRefused(
                401, RejectionCode.UNAUTHENTICATED, "reads need a signed request (RFC 9421)"
            )
        return read

    def _may_read(group_id: str, key: str) -> bool:
        try:
            return authority.may_read(group_id, key)
        except UnknownGroupError:
            return False

    async def member(group_id: str, read: SignedRead | None = Depends(reader)) -> str:
        """Only an active member of ``group_id`` (or an operator) reads it; its nonce is
        remembered once that holds. Anyone else gets 403 ``not_a_member`` whether or not the
        Group exists; only an operator is told 404 ``unknown_group``."""
        key = signed(read).key
        if key in operators:
            await asyncio.to_thread(authority.head, group_id)  # unknown_group for operators too
        elif not await asyncio.to_thread(_may_read, group_id, key):
            # one answer whether or not the Group exists: a stranger cannot enumerate Groups
            raise ReadRefused(
                403,
                RejectionCode.NOT_A_MEMBER,
                f"key {key} is no active member's key in group {group_id!r}: only members "
                "read a Group (an owner adds one with `missionweave group add`)",
                group_id=group_id,
                key=key,
            )
        assert read is not None
        reads.remember(key, read.nonce, read.created_ms, operator=key in operators)
        return key

    @app.exception_handler(UnknownGroupError)
    async def _unknown_group(_: Request, exc: UnknownGroupError) -> JSONResponse:
        gid = exc.group_id
        return _error(404, RejectionCode.UNKNOWN_GROUP, f"unknown group {gid!r}", group_id=gid)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _error(
            500,
            RejectionCode.INTERNAL_ERROR,
            "the Authority failed to answer",
            type=type(exc).__name__,
        )

    @app.post(
        "/v1/commands",
        responses={**_responses(413), 200: {"model": SubmitResult}, 409: {"model": SubmitResult}},
    )
    async def post_command(command: Command) -> JSONResponse:
        refused = _unsignable([command])
        if refused is not None:
            return refused
        (result,) = await writer.submit([command])
        return JSONResponse(
            _result(result), status_code=409 if result.status == "rejected" else 200
        )

    @app.post(
        "/v1/commands/batch", responses={**_responses(413), 200: {"model": list[SubmitResult]}}
    )
    async def post_batch(
        commands: list[Command] = Body(..., max_length=MAX_BATCH_REQUEST),
    ) -> JSONResponse:
        # max_length is checked before any element is validated: a long list costs nothing
        refused = _unsignable(commands)
        if refused is not None:
            return refused
        results = await writer.submit(commands)
        return JSONResponse([_result(r) for r in results])

    async def room(request: Request) -> None:
        """A large read the gate would refuse anyway is refused before its signature is
        checked (by the key it names): a flood of retries costs no Ed25519 or Store work."""
        named = _KEYID.search(request.headers.get("signature-input", ""))
        refused = gate.full(named.group(1) if named else "")
        if refused is not None:
            raise _Busy(refused)

    @app.exception_handler(_Busy)
    async def _busy_answer(_: Request, exc: _Busy) -> JSONResponse:
        return _busy(exc.detail)

    def _busy(refused: dict[str, Any]) -> JSONResponse:
        """429 ``too_many_reads``: a bound on large reads in flight (:mod:`._read_gate`)."""
        read_refused(RejectionCode.TOO_MANY_READS)
        scope = "this key's" if refused["scope"] == "key" else "the server's"
        response = _error(
            429,
            RejectionCode.TOO_MANY_READS,
            f"{scope} large reads in flight are at their bound ({refused['max']}): "
            f"retry after {refused['retry_after_s']} s",
            **refused,
        )
        response.headers["Retry-After"] = str(refused["retry_after_s"])
        return response

    @app.get("/v1/groups/{group_id}/events", responses=_responses(*_READ, 404, 410))
    async def get_events(
        group_id: str,
        after_sequence: int = Query(0, ge=0, le=MAX_SEQ),
        limit: int = Query(1000, ge=1, le=10_000),
        _room: None = Depends(room),
        key: str = Depends(member),
    ) -> Response:
        refused = gate.enter(key)
        if refused is not None:
            return _busy(refused)
        try:
            # the first chunk before the answer starts: its errors still get their status
            events = EventReader(authority, group_id, after_sequence)
            rows, full, more = await events.chunk(limit, MAX_PAGE_BYTES)
        except CursorTooOldError as exc:
            gate.leave(key)
            body = error_body(
                exc.code,
                str(exc),
                group_id=group_id,
                after_sequence=exc.after_sequence,
                first_online_seq=exc.first_online_seq,
            )
            return JSONResponse({**body, "snapshot": exc.snapshot}, status_code=410)
        except BaseException:
            gate.leave(key)
            raise
        # streamed a chunk at a time; the slot is given back when the answer is over
        return _GatedStream(
            page_body(events, rows, more and not full, limit, MAX_PAGE_BYTES),
            release=lambda: gate.leave(key),
            media_type="application/json",
        )

    @app.get("/v1/groups/{group_id}/head", responses=_responses(*_READ, 404))
    async def get_head(group_id: str, _: str = Depends(member)) -> JSONResponse:
        seq, h = await asyncio.to_thread(authority.head, group_id)
        return JSONResponse({"seq": seq, "hash": h})

    @app.get("/v1/groups/{group_id}/snapshots/{seq}", responses=_responses(*_READ, 404))
    async def get_snapshot(
        group_id: str,
        seq: int = Path(ge=0, le=MAX_SEQ),
        _room: None = Depends(room),
        key: str = Depends(member),
    ) -> JSONResponse:
        refused = gate.enter(key)
        if refused is not None:
            return _busy(refused)
        try:
            snap = await asyncio.to_thread(authority.load_snapshot, group_id, seq)
        finally:
            gate.leave(key)
        if snap is None:
            return _error(
                404,
                RejectionCode.UNKNOWN_SNAPSHOT,
                f"no snapshot of group {group_id!r} at {seq}",
                group_id=group_id,
                seq=seq,
            )
        return JSONResponse(snap)

    @app.get("/v1/leases/{lease_id}", responses=_responses(*_READ, 404))
    async def get_lease(lease_id: str, read: SignedRead | None = Depends(reader)) -> JSONResponse:
        key = signed(read).key
        assert read is not None
        row = await asyncio.to_thread(authority.lease, lease_id)
        group = None if row is None else str(row["group_id"])
        allowed = key in operators or (
            await asyncio.to_thread(authority.may_read, group, key)
            if group is not None
            else bool(await asyncio.to_thread(authority.member_groups, key))
        )
        if not allowed:  # one answer: a stranger learns neither the lease nor its Group
            raise ReadRefused(
                403, RejectionCode.NOT_A_MEMBER, "only members of a lease's Group read it"
            )
        reads.remember(key, read.nonce, read.created_ms, operator=key in operators)
        if row is None:
            return _error(
                404, RejectionCode.UNKNOWN_LEASE, f"no lease {lease_id!r}", lease_id=lease_id
            )
        return JSONResponse(row)

    add_token_routes(app, authority, _responses(413))
    add_artifact_routes(
        app, authority, artifact_store, member, operators, _responses(*_READ, 404, 409)
    )

    @app.get("/v1/groups/{group_id}/agents", responses=_responses(*_READ, 404))
    async def get_agents(group_id: str, _: str = Depends(member)) -> JSONResponse:
        agents = await asyncio.to_thread(authority.agents, group_id)
        return JSONResponse({"agents": [a.model_dump(mode="json") for a in agents]})

    @app.put("/v1/groups/{group_id}/presence", responses=_responses(403, 404))
    async def put_presence(group_id: str, frame: dict[str, Any] = Body(...)) -> JSONResponse:
        try:
            check_presence_shape(frame, group_id)
            await asyncio.to_thread(
                check_member_frame, authority, frame, group_id, frame["agent"], "presence report"
            )
        except FrameError as err:
            return _frame_error(err)
        stored = presence.put(
            group_id,
            frame["agent"],
            frame["free_slots"],
            frame["queue_depth"],
            frame["issuedAtMs"],
        )
        return JSONResponse({"stored": stored})

    @app.get("/v1/groups/{group_id}/presence", responses=_responses(*_READ, 404))
    async def get_presence(group_id: str, _: str = Depends(member)) -> JSONResponse:
        fresh = presence.fresh(group_id)
        return JSONResponse({a: p.model_dump(mode="json") for a, p in fresh.items()})

    @app.get("/v1/authority", responses=_responses(401, 429))
    async def get_authority(read: SignedRead | None = Depends(reader)) -> JSONResponse:
        """The Authority's public key; with a signed request, the reader's Groups too (every
        Group for an operator)."""
        body: dict[str, Any] = {"public_key": authority.public_key}
        if read is not None:
            key = read.key
            groups = await asyncio.to_thread(
                authority.groups if key in operators else lambda: authority.member_groups(key)
            )
            if groups or key in operators:  # a stranger's read shows nothing: no nonce kept
                reads.remember(key, read.nonce, read.created_ms, operator=key in operators)
            body["operator"] = key in operators
            body["groups"] = groups
        return JSONResponse(body)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse({"ok": True})

    @app.websocket("/v1/stream")
    async def stream(ws: WebSocket) -> None:
        await ws.accept()
        session = StreamSession(
            ws, authority, notifier, poll_interval_s, reads, max_replay_events, ws_idle_timeout_s
        )
        watch(series.AUTHORITY_SUBSCRIBERS, session, subscriptions)
        try:
            await session.run()
        finally:
            unwatch(series.AUTHORITY_SUBSCRIBERS, session)

    return app


def serve(authority: Authority, host: str = "127.0.0.1", port: int = 8787, **kw: Any) -> None:
    """Run the server with uvicorn until interrupted (blocking; for the CLI).

    Args:
        authority: the Authority to serve.
        host: the interface to bind.
        port: the TCP port.
        **kw: ``max_batch``, ``poll_interval_s``, ``presence_ttl_ms``, ``read_gate``,
            ``max_replay_events``, ``ws_idle_timeout_s`` and ``artifact_store`` go to
            :func:`create_app`; else to ``uvicorn.Config`` (e.g. ``log_level``, or
            ``ssl_certfile``/``ssl_keyfile`` for TLS), over the defaults of
            :func:`~._limits.server_limits` (header size, idle keep-alive, WebSocket pings,
            connections) and ``ws_max_size`` = :data:`WS_MAX_BYTES`.
    """
    names = (
        "max_batch",
        "poll_interval_s",
        "presence_ttl_ms",
        "read_gate",
        "max_replay_events",
        "ws_idle_timeout_s",
        "artifact_store",
    )
    app_kw = {k: kw.pop(k) for k in names if k in kw}
    app = create_app(authority, **app_kw)
    kw = {**server_limits(), "ws_max_size": WS_MAX_BYTES, **kw}
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, **kw)).run()


__all__ = ["WS_MAX_BYTES", "BatchWriter", "ErrorBody", "ReadGate", "create_app", "serve"]
