"""How the Authority's HTTP front answers a failure, and the one place its exception handlers
are registered (:func:`add_error_handlers`).

Every error body is :class:`ErrorBody` ``{"code", "reason", "detail"}``, whatever raised it:

    ===============================  ======  ==================================================
    raised                           status  code
    ===============================  ======  ==================================================
    ``RequestValidationError``       422     ``invalid_command`` on ``/v1/commands*``, else
                                             ``invalid_request``; ``detail.errors`` lists them
    Starlette ``HTTPException``      its     ``not_found`` (404), ``method_not_allowed`` (405,
                                             with ``Allow``), else ``http_error``
    ``ReadRefused``                  its     its code (401 carries ``Accept-Signature``)
    :class:`TooManyReads`            429     ``too_many_reads`` or ``read_shed``, with
                                             ``Retry-After``
    ``UnknownGroupError``            404     ``unknown_group``
    ``StoreUnavailableError``        503     ``store_unavailable`` (``log_forked`` for a
                                             ``StoreForkedError``) with ``Retry-After``
    anything else                    500     ``internal_error`` (logged; ``detail.type``)
    ===============================  ======  ==================================================
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...protocol import RejectionCode
from ..core import StoreForkedError, StoreUnavailableError
from ..wire import ACCEPT_SIGNATURE, ReadRefused, UnknownGroupError
from ._metrics import read_refused

log = logging.getLogger(__name__)

#: The error statuses of every signed read: unsigned (401), not a member (403), too many (429).
READ_ERRORS = (401, 403, 429)


class ErrorBody(BaseModel):
    """Every error answer: a stable ``code``, one human ``reason``, machine-readable ``detail``."""

    code: str
    reason: str
    detail: dict[str, Any]


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route's error answers: 422 and ``statuses``, all
    :class:`ErrorBody`."""
    return {s: {"model": ErrorBody} for s in (422, *statuses)}


def error_body(code: str, reason: str, **detail: Any) -> dict[str, Any]:
    """The structured error body every failing route answers with."""
    return {"code": code, "reason": reason, "detail": detail}


def error_response(status: int, code: str, reason: str, **detail: Any) -> JSONResponse:
    """An :func:`error_body` answered with HTTP ``status``."""
    return JSONResponse(error_body(code, reason, **detail), status_code=status)


class TooManyReads(Exception):
    """A large read refused by the read gate (:mod:`._read_gate`) or shed under pressure
    (:mod:`._read_lane`); answered 429.

    Args:
        detail: the refusal: ``scope`` (``key`` or ``total`` for the gate, ``writes`` or
            ``reads`` for shedding), ``retry_after_s`` and the like, all echoed in the
            answer's ``detail``.
        code: ``too_many_reads`` (the gate) or ``read_shed``.
    """

    def __init__(self, detail: dict[str, Any], code: str = RejectionCode.TOO_MANY_READS) -> None:
        super().__init__("too many reads")
        self.detail, self.code = detail, code


def _read_refusal_reason(code: str, refused: dict[str, Any]) -> str:
    if code == RejectionCode.READ_SHED:
        why = (
            f"a Command has waited {refused['waited_ms']} ms"
            if refused["scope"] == "writes"
            else f"{refused['backlog']} reads wait for a thread"
        )
        return f"reads are shed while Commands go first ({why})"
    scope = "this key's" if refused["scope"] == "key" else "the server's"
    return f"{scope} large reads in flight are at their bound ({refused['max']})"


async def _too_many_reads(_: Request, exc: TooManyReads) -> JSONResponse:
    refused = exc.detail
    read_refused(exc.code)
    response = error_response(
        429,
        exc.code,
        f"{_read_refusal_reason(exc.code, refused)}: retry after {refused['retry_after_s']} s",
        **refused,
    )
    response.headers["Retry-After"] = str(refused["retry_after_s"])
    return response


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
    return error_response(422, code, reason, errors=errors)


async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(
        exc.status_code, RejectionCode.HTTP_ERROR
    )
    response = error_response(exc.status_code, code, str(exc.detail))
    response.headers.update(exc.headers or {})  # 405 keeps its Allow
    return response


async def _refused(_: Request, exc: ReadRefused) -> JSONResponse:
    read_refused(exc.code)
    response = error_response(exc.status, exc.code, exc.reason, **exc.detail)
    if exc.status == 401:
        response.headers["Accept-Signature"] = ACCEPT_SIGNATURE
    return response


async def _unknown_group(_: Request, exc: UnknownGroupError) -> JSONResponse:
    gid = exc.group_id
    return error_response(404, RejectionCode.UNKNOWN_GROUP, f"unknown group {gid!r}", group_id=gid)


async def _store_unavailable(_: Request, exc: StoreUnavailableError) -> JSONResponse:
    """The database, not the request, failed (issue 37): 503 with ``Retry-After``; a Command
    sent again with the same id is answered by that id if it did commit."""
    detail: dict[str, Any] = {"retry_after_s": exc.retry_after_s}
    if isinstance(exc, StoreForkedError):
        detail["forks"] = exc.forks
    response = error_response(503, exc.code, exc.reason, **detail)
    response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


async def _internal(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error")
    return error_response(
        500, RejectionCode.INTERNAL_ERROR, "the Authority failed to answer", type=type(exc).__name__
    )


def add_error_handlers(app: FastAPI) -> None:
    """Register the front's exception handlers on ``app`` (the table above)."""
    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(StarletteHTTPException)(_http)
    app.exception_handler(ReadRefused)(_refused)
    app.exception_handler(UnknownGroupError)(_unknown_group)
    app.exception_handler(StoreUnavailableError)(_store_unavailable)
    app.exception_handler(Exception)(_internal)
    app.exception_handler(TooManyReads)(_too_many_reads)


__all__ = [
    "READ_ERRORS",
    "ErrorBody",
    "TooManyReads",
    "add_error_handlers",
    "documented",
    "error_body",
    "error_response",
]
