"""The Authority's own face::

GET /v1/authority   → {public_key} to anyone; with a signed request also {operator, groups}
GET /healthz        → {ok: true} (liveness: the process answers; not counted as hearing from
                      a client: :mod:`._silence`)
GET /readyz         → {ready: true}, or 503 {code, reason, detail: {reasons: [...]}} naming
                      why the Authority cannot serve now (readiness: the store does not answer,
                      its log is forked, the disk is below its reserve, the writer stalled);
                      unsigned: the codes only, an operator's signed request: the details
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ..wire import SignedRead
from ._errors import ErrorBody, documented, error_response
from ._front import Front, get_front
from ._read_access import admit, reader

router = APIRouter()


@router.get("/v1/authority", responses=documented(401, 429))
async def get_authority(
    request: Request, read: SignedRead | None = Depends(reader), front: Front = Depends(get_front)
) -> JSONResponse:
    """The Authority's public key; with a signed request, the reader's Groups too (every
    Group for an operator)."""
    authority = front.authority
    body: dict[str, Any] = {"public_key": authority.public_key}
    if read is not None:
        key = read.key
        operator = key in front.operators
        groups = await asyncio.to_thread(
            authority.groups if operator else lambda: authority.member_groups(key)
        )
        if groups or operator:  # a stranger's read shows nothing: no nonce kept
            admit(request, front, read)
        body["operator"] = operator
        body["groups"] = groups
    return JSONResponse(body)


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """Liveness: the process answers (an orchestrator restarts it when this fails)."""
    return JSONResponse({"ok": True})


@router.get("/readyz", responses={401: {"model": ErrorBody}, 503: {"model": ErrorBody}})
async def readyz(
    request: Request, read: SignedRead | None = Depends(reader), front: Front = Depends(get_front)
) -> JSONResponse:
    """Readiness: 200 ``{"ready": true}`` when the Authority can serve; else 503 with the
    first reason's ``code`` (``store_unavailable``, ``log_forked``, ``disk_below_reserve``,
    ``writer_stalled``) and every reason's code in ``detail.reasons`` (an orchestrator stops
    routing to it until this answers 200 again). Unsigned, it says only the codes; an
    operator's signed request also gets each reason's text and detail (paths, free bytes, the
    store's redacted location): host facts are not a stranger's to read."""
    reasons = await asyncio.to_thread(front.authority.readiness)
    if not reasons:
        return JSONResponse({"ready": True})
    first = reasons[0]
    if read is not None and read.key in front.operators:
        admit(request, front, read)
        response = error_response(
            503, first.code, first.reason, reasons=[r.body() for r in reasons]
        )
    else:
        codes = [str(r.code) for r in reasons]
        response = error_response(
            503,
            first.code,
            f"the Authority is not ready: {', '.join(codes)} (an operator's signed request "
            "reads why)",
            reasons=[{"code": c} for c in codes],
        )
    response.headers["Retry-After"] = "1"
    return response


__all__ = ["router"]
