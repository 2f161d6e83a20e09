"""The reads of a Group's log and of a lease (protocol section 16)::

    GET /v1/groups/{group_id}/events            ?after_sequence=N&limit=M → {events, head_seq}
                                                (also cut at MAX_PAGE_BYTES: page on; streamed a
                                                chunk at a time; 410 CURSOR_TOO_OLD; 429 past
                                                the read gate)
    GET /v1/groups/{group_id}/head              → {seq, hash}
    GET /v1/groups/{group_id}/snapshots/{seq}   → the whole signed snapshot (429 past the gate)
    GET /v1/leases/{lease_id}                   → the lease row with ``valid`` (a member of
                                                  another Group: 404, as for no such lease)

Each is a signed read of a member of the Group (:mod:`._read_access`); a page of Events and a
snapshot are large reads, which hold one of the read gate's slots until they are answered, run
in the read lane's threads and are shed first under pressure (429 ``read_shed``,
:mod:`._read_lane`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ...protocol import RejectionCode
from ..wire import CursorTooOldError, ReadRefused, SignedRead
from ._errors import READ_ERRORS, documented, error_body, error_response
from ._front import Front, get_front
from ._limits import MAX_PAGE_BYTES
from ._pages import EventReader, page_body
from ._read_access import admit, large_reader, member, reader, signed, take_slot

#: Largest sequence number a request may name (SQLite's INTEGER).
MAX_SEQ = 2**63 - 1

router = APIRouter()


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


@router.get("/v1/groups/{group_id}/events", responses=documented(*READ_ERRORS, 404, 410))
async def get_events(
    group_id: str,
    after_sequence: int = Query(0, ge=0, le=MAX_SEQ),
    limit: int = Query(1000, ge=1, le=10_000),
    key: str = Depends(large_reader),
    front: Front = Depends(get_front),
) -> Response:
    take_slot(front, key)
    try:
        # the first chunk before the answer starts: its errors still get their status
        events = EventReader(front.authority, group_id, after_sequence, front.lane)
        rows, full, more = await events.chunk(limit, MAX_PAGE_BYTES)
    except CursorTooOldError as exc:
        front.gate.leave(key)
        body = error_body(
            exc.code,
            str(exc),
            group_id=group_id,
            after_sequence=exc.after_sequence,
            first_online_seq=exc.first_online_seq,
        )
        return JSONResponse({**body, "snapshot": exc.snapshot}, status_code=410)
    except BaseException:
        front.gate.leave(key)
        raise
    # streamed a chunk at a time; the slot is given back when the answer is over
    return _GatedStream(
        page_body(events, rows, more and not full, limit, MAX_PAGE_BYTES),
        release=lambda: front.gate.leave(key),
        media_type="application/json",
    )


@router.get("/v1/groups/{group_id}/head", responses=documented(*READ_ERRORS, 404))
async def get_head(
    group_id: str, _: str = Depends(member), front: Front = Depends(get_front)
) -> JSONResponse:
    seq, h = await asyncio.to_thread(front.authority.head, group_id)
    return JSONResponse({"seq": seq, "hash": h})


@router.get("/v1/groups/{group_id}/snapshots/{seq}", responses=documented(*READ_ERRORS, 404))
async def get_snapshot(
    group_id: str,
    seq: int = Path(ge=0, le=MAX_SEQ),
    key: str = Depends(large_reader),
    front: Front = Depends(get_front),
) -> JSONResponse:
    take_slot(front, key)
    try:
        snap = await front.lane.run(front.authority.load_snapshot, group_id, seq)
    finally:
        front.gate.leave(key)
    if snap is None:
        return error_response(
            404,
            RejectionCode.UNKNOWN_SNAPSHOT,
            f"no snapshot of group {group_id!r} at {seq}",
            group_id=group_id,
            seq=seq,
        )
    return JSONResponse(snap)


@router.get("/v1/leases/{lease_id}", responses=documented(*READ_ERRORS, 404))
async def get_lease(
    lease_id: str,
    request: Request,
    read: SignedRead | None = Depends(reader),
    front: Front = Depends(get_front),
) -> JSONResponse:
    admitted = signed(read)
    key, authority = admitted.key, front.authority
    operator = key in front.operators
    if not operator and not await asyncio.to_thread(authority.member_groups, key):
        # a key of no Group: one answer, it learns neither the lease nor its Group
        raise ReadRefused(
            403, RejectionCode.NOT_A_MEMBER, "only members of a lease's Group read it"
        )
    admit(request, front, admitted)
    row = await asyncio.to_thread(authority.lease, lease_id)
    visible = row is not None and (
        operator or await asyncio.to_thread(authority.may_read, str(row["group_id"]), key)
    )
    if not visible:  # another Group's lease answers as an unknown one (issue 38)
        return error_response(
            404, RejectionCode.UNKNOWN_LEASE, f"no lease {lease_id!r}", lease_id=lease_id
        )
    return JSONResponse(row)


__all__ = ["MAX_SEQ", "router"]
