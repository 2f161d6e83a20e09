"""The Commands' routes (protocol section 16)::

    POST /v1/commands         one Command → SubmitResult (200, or 409 rejected — 429
                              ``rate_limited`` with Retry-After, 507 ``insufficient_storage``;
                              413, 422)
    POST /v1/commands/batch   up to :data:`MAX_BATCH_REQUEST` Commands → [SubmitResult] (200)

Both go through the app's one :class:`~._batch.BatchWriter` (group commit); a Command that
could never be signed or appended is refused here, before it joins a shared transaction. A
request one of whose Commands proved its signer (:func:`proved_signer`) authenticates its
connection (issue 37 item 5: :func:`~._connections.mark_authenticated`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from ...protocol import CanonicalizationError, Command, RejectionCode
from ..wire import SubmitResult
from ._connections import mark_authenticated
from ._errors import documented, error_response
from ._front import Front, get_front
from ._limits import MAX_COMMAND_BYTES

#: Most Commands accepted by one ``POST /v1/commands/batch``.
MAX_BATCH_REQUEST = 1000
#: The status of a rejected Command, by code, where it is not 409 (issue 37, item 5).
REJECTED_STATUS: dict[str, int] = {
    RejectionCode.RATE_LIMITED: 429,
    RejectionCode.INSUFFICIENT_STORAGE: 507,
}

#: The refusals that do not prove a Command's signer a member, an agent or an operator: the
#: codes ``Authority._verify_actor`` (core/_engine.py) answers before or instead of a verified
#: signature — a stranger's own key signs validly, so ``operator_required`` and
#: ``not_a_member`` prove nothing; ``invalid_command`` is also a handler's verdict after the
#: signature, left out to be safe (an honest client rarely sends one).
UNVERIFIED = frozenset(
    {
        RejectionCode.BAD_SIGNATURE,
        RejectionCode.INVALID_COMMAND,
        RejectionCode.NOT_A_MEMBER,
        RejectionCode.OPERATOR_REQUIRED,
        RejectionCode.UNKNOWN_ACTOR,
        RejectionCode.UNKNOWN_COMMAND,
    }
)

router = APIRouter()


def proved_signer(results: Sequence[SubmitResult]) -> bool:
    """Whether one of ``results`` is the verdict on a Command whose signature verified under a
    member's, an agent's or an operator's key: accepted, or refused for another reason than
    :data:`UNVERIFIED` (``stale_membership_epoch``, ``rate_limited``, a state rule …)."""
    return any(r.rejection is None or r.rejection.code not in UNVERIFIED for r in results)


def _answered(request: Request, results: Sequence[SubmitResult]) -> None:
    if proved_signer(results):
        mark_authenticated(request.scope)


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
            return error_response(
                422, RejectionCode.INVALID_COMMAND, str(exc), index=i, command_id=cmd.command_id
            )
        if size > MAX_COMMAND_BYTES:
            return error_response(
                413,
                RejectionCode.COMMAND_TOO_LARGE,
                f"a Command is at most {MAX_COMMAND_BYTES} bytes",
                index=i,
                command_id=cmd.command_id,
                bytes=size,
                max_bytes=MAX_COMMAND_BYTES,
            )
    return None


@router.post(
    "/v1/commands",
    responses={
        **documented(413),
        200: {"model": SubmitResult},
        **{s: {"model": SubmitResult} for s in (409, 429, 507)},
    },
)
async def post_command(
    command: Command, request: Request, front: Front = Depends(get_front)
) -> JSONResponse:
    refused = _unsignable([command])
    if refused is not None:
        return refused
    (result,) = await front.writer.submit([command])
    _answered(request, [result])
    if result.status != "rejected" or result.rejection is None:
        return JSONResponse(_result(result))
    response = JSONResponse(
        _result(result), status_code=REJECTED_STATUS.get(result.rejection.code, 409)
    )
    retry_ms = result.rejection.detail.get("retry_after_ms")
    if isinstance(retry_ms, int):
        response.headers["Retry-After"] = str(math.ceil(retry_ms / 1000))
    return response


@router.post(
    "/v1/commands/batch", responses={**documented(413), 200: {"model": list[SubmitResult]}}
)
async def post_batch(
    request: Request,
    commands: list[Command] = Body(..., max_length=MAX_BATCH_REQUEST),
    front: Front = Depends(get_front),
) -> JSONResponse:
    # max_length is checked before any element is validated: a long list costs nothing
    refused = _unsignable(commands)
    if refused is not None:
        return refused
    results = await front.writer.submit(commands)
    _answered(request, results)
    return JSONResponse([_result(r) for r in results])


__all__ = ["MAX_BATCH_REQUEST", "REJECTED_STATUS", "UNVERIFIED", "proved_signer", "router"]
