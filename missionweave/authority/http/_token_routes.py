"""``POST /v1/capability-tokens/verify``: a tool gateway asks whether a capability token lets
its bearer do an operation now (MW-11.3-d). The checks are
:func:`missionweave.authority.core.verify_capability_token`.

Who may call it: whoever holds the whole token — the token is the credential, as it is for the
tool gateway its holder hands it to; no signed request is needed. What it reveals: for a token
this Authority did not sign (forged, altered, guessed, or the log's public form, which lacks
the bearer ``signature``) only ``valid: false``, ``code: invalid_token``; for a genuine one its
standing and the facts the token states already. A request that is not shaped like
``{token, operation?}`` is a 422 ``invalid_request``.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from ..core import verify_capability_token
from ..wire import VERIFY_PATH, TokenCheck, TokenVerifyRequest
from ._errors import documented
from ._front import Front, get_front

router = APIRouter()


@router.post(VERIFY_PATH, responses={**documented(413), 200: {"model": TokenCheck}})
async def verify_token(
    request: TokenVerifyRequest, front: Front = Depends(get_front)
) -> JSONResponse:
    check = await asyncio.to_thread(
        verify_capability_token, front.authority, request.token, request.operation
    )
    return JSONResponse(check.model_dump(mode="json"))


__all__ = ["router"]
