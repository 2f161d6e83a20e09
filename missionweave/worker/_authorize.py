"""The Temporal client of :meth:`WorkContext.authorize_work`: the one Update an agent sends.

A handler that adds WorkItems to its Mission (MW-10.4-a) asks the Mission workflow, by name,
through the ``authorize_work`` update (:class:`AuthorizeWorkInput`); the workflow's validator
refuses a change it cannot take, and its handler waits until the Authority has answered every
``work.authorize``. Temporal admits at most 10 Updates in flight per workflow (the 11th fails
with ResourceExhausted); the same update id makes every retry idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ..protocol import RejectionCode, WorkContract, digest
from ..protocol.temporal_contract import (
    AUTHORIZE_WORK_UPDATE,
    AuthorizeWorkInput,
    CommandVerdict,
    SubmitCommandsResult,
    WorkItemSpec,
    mission_workflow_id,
)
from ._errors import WorkerError
from ._input import offload_inputs
from ._retry import Backoff, retrying

if TYPE_CHECKING:
    from ._context import WorkContext

#: Temporal answers worth retrying: busy (the 10-updates bound), unavailable, timed out, or not
#: found (a workflow between runs, or not started yet).
RETRYABLE = frozenset(
    {
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.ABORTED,
        RPCStatusCode.NOT_FOUND,
    }
)


@dataclass(frozen=True, slots=True)
class UpdateRetry:
    """Backoff for updates Temporal could not take.

    Attributes:
        initial_backoff: wait before the first retry.
        max_backoff: the longest wait between retries.
        max_attempts: attempts in all before giving up.
        rpc_timeout: the deadline of one update call.
    """

    initial_backoff: timedelta = timedelta(milliseconds=100)
    max_backoff: timedelta = timedelta(seconds=2)
    max_attempts: int = 10
    rpc_timeout: timedelta = timedelta(seconds=30)


class WorkAuthorizationRejected(WorkerError):
    """:meth:`WorkContext.authorize_work` was refused; nothing was added (or, for an Authority
    refusal, not everything: ``verdicts`` says which items were authorized).

    Attributes:
        code: ``cycle``, ``self_loop``, ``unknown_id``, ``duplicate_id``, ``mission_closed``
            (the workflow's validator, MW-10.4-c), ``input_too_large`` or
            ``mission_inputs_too_large`` (what the Mission could not carry; ``detail`` has
            ``bytes`` and ``max_bytes``); the Authority's rejection code of the first
            refused item; ``update_rejected`` (a refusal without a code), ``update_error``
            (Temporal refused the call) or ``workflow_unreachable`` (retries exhausted).
        reason: one sentence.
        detail: machine-readable facts (workflow id, update id, item id, …).
        verdicts: the Authority's verdicts when the update itself went through.
    """

    def __init__(
        self,
        code: str,
        reason: str,
        detail: Mapping[str, Any] | None = None,
        verdicts: Iterable[CommandVerdict] = (),
    ) -> None:
        super().__init__(f"authorize_work rejected: {code}: {reason}")
        self.code = code
        self.reason = reason
        self.detail: dict[str, Any] = dict(detail or {})
        self.verdicts = list(verdicts)


def _temporal_busy(exc: BaseException) -> bool:
    """Whether Temporal may take the same update a moment later."""
    if isinstance(exc, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    return isinstance(exc, RPCError) and exc.status in RETRYABLE


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RPCError):
        return f"{exc.status.name}: {exc.message}"
    return str(exc)


async def authorize_work(
    ctx: WorkContext,
    items: Iterable[WorkItemSpec],
    edges: Iterable[tuple[str, str]],
    *,
    contracts: Mapping[str, WorkContract] | None,
    update_id: str | None,
    retry: UpdateRetry | None,
) -> list[CommandVerdict]:
    """:meth:`WorkContext.authorize_work` for ``ctx`` (its docstring says the whole of it):
    check the change, fence it (``ctx.guard()``), offload the inputs too large to carry inline,
    derive the update id and send the update.
    """
    named = dict(contracts or {})
    specs = AuthorizeWorkInput.model_validate(
        {"items": list(items), "contracts": named}
    ).items  # references resolved against ``contracts``, or refused
    pairs = [(str(a), str(b)) for a, b in edges]
    if not activity.in_activity():
        raise WorkerError("authorize_work runs inside the execute_work_item activity")
    await ctx.guard()
    # what the Mission could not carry inline goes by reference (a claim check)
    specs = await offload_inputs(ctx, specs)
    uid = update_id or ctx.idempotency_key(
        "authorize_work:" + digest([[s.work_item_id for s in specs], [list(p) for p in pairs]])
    )
    verdicts = await send_authorize_work(
        AuthorizeWorkInput(items=specs, edges=pairs, contracts=named),
        mission_id=ctx.mission_id,
        update_id=uid,
        retry=retry or UpdateRetry(),
        logger=ctx.logger,
    )
    ctx.logger.info("authorized %d WorkItem(s) and %d edge(s)", len(specs), len(pairs))
    return verdicts


async def send_authorize_work(
    change: AuthorizeWorkInput,
    *,
    mission_id: str,
    update_id: str,
    retry: UpdateRetry,
    logger: logging.LoggerAdapter[logging.Logger],
) -> list[CommandVerdict]:
    """Send ``change`` as the ``authorize_work`` update of the Mission workflow this activity
    serves (MW-10.4-a), retrying while Temporal is busy or briefly unreachable.

    Args:
        change: the items (inputs already offloaded), edges and named contracts.
        mission_id: the Mission (its workflow id when the activity info names none).
        update_id: the Temporal update id: the same id is answered, not applied twice.
        retry: the backoff and its bound.
        logger: where each retry is noted (the handler's logger, with its ids).

    Returns:
        The Authority's verdicts, all ``accepted``.

    Raises:
        WorkAuthorizationRejected: the validator refused (its code, or ``update_rejected``),
            the Authority refused an item (its code; ``verdicts`` tells which), Temporal
            refused the call (``update_error``) or stayed busy or away through every attempt
            (``workflow_unreachable``).
    """
    workflow_id = activity.info().workflow_id or mission_workflow_id(mission_id)
    handle = activity.client().get_workflow_handle(workflow_id)
    facts = {"workflow_id": workflow_id, "update_id": update_id}
    try:
        result = await retrying(
            lambda: handle.execute_update(
                AUTHORIZE_WORK_UPDATE,
                change,
                id=update_id,
                result_type=SubmitCommandsResult,
                rpc_timeout=retry.rpc_timeout,
            ),
            when=_temporal_busy,
            backoff=Backoff(
                retry.initial_backoff.total_seconds(), retry.max_backoff.total_seconds()
            ),
            max_attempts=retry.max_attempts,
            before_wait=lambda exc, wait_s: logger.info(
                "authorize_work: %s; retrying in %.2fs", _describe(exc), wait_s
            ),
        )
    except WorkflowUpdateFailedError as exc:  # the validator refused: nothing added
        cause = exc.cause
        code = cause.type if isinstance(cause, ApplicationError) and cause.type else None
        given = cause.details if isinstance(cause, ApplicationError) else ()
        extra = given[0] if given and isinstance(given[0], dict) else {}
        raise WorkAuthorizationRejected(
            code or RejectionCode.UPDATE_REJECTED, str(cause) or str(exc), {**extra, **facts}
        ) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError as exc:  # through every attempt
        raise WorkAuthorizationRejected(
            RejectionCode.WORKFLOW_UNREACHABLE, str(exc), facts
        ) from None
    except RPCError as exc:
        if exc.status in RETRYABLE:  # busy or away through every attempt
            raise WorkAuthorizationRejected(
                RejectionCode.WORKFLOW_UNREACHABLE, _describe(exc), facts
            ) from None
        raise WorkAuthorizationRejected(
            RejectionCode.UPDATE_ERROR, exc.message, {**facts, "status": exc.status.name}
        ) from None
    refused = [v for v in result.verdicts if not v.accepted]
    if refused:
        rej = refused[0].rejection
        raise WorkAuthorizationRejected(
            rej.code if rej else refused[0].status,
            rej.reason if rej else "the Authority did not accept work.authorize",
            {**facts, **(rej.detail if rej else {}), "refused": len(refused)},
            result.verdicts,
        )
    return list(result.verdicts)


__all__ = [
    "RETRYABLE",
    "UpdateRetry",
    "WorkAuthorizationRejected",
    "authorize_work",
    "send_authorize_work",
]
