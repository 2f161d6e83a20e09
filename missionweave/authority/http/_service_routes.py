"""The Authority's own face::

GET /v1/authority   → {public_key} to anyone; with a signed request also {operator, groups}
GET /healthz        → {ok: true} (not counted as hearing from a client: :mod:`._silence`)
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from ..wire import SignedRead
from ._errors import documented
from ._front import Front, get_front
from ._read_access import reader

router = APIRouter()


@router.get("/v1/authority", responses=documented(401, 429))
async def get_authority(
    read: SignedRead | None = Depends(reader), front: Front = Depends(get_front)
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
            front.remember(read)
        body["operator"] = operator
        body["groups"] = groups
    return JSONResponse(body)


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"ok": True})


__all__ = ["router"]
