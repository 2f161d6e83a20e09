"""Sending an agent's signed Commands to a Mission workflow as Temporal Updates
(docs/design.md §4.4-5).

``accept_offer``, ``decline_offer`` and ``start_work`` each carry
``AgentCommandInput(command=<signed Command>)`` with ``update_id = command.command_id`` and
answer a :class:`CommandVerdict`. At most 10 updates can be in flight per workflow (the 11th
fails with ResourceExhausted), so the sender bounds its own in-flight updates per workflow and
retries with backoff when Temporal is busy or briefly unreachable; the same update id and the
same signed Command make every retry idempotent (the workflow deduplicates update ids within a
run, the Authority deduplicates command ids across runs).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ..authority import now_ms
from ..protocol import Command, Rejection
from ..protocol.mission import AgentCommandInput, CommandVerdict, mission_workflow_id

log = logging.getLogger(__name__)

_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

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


def _rejected(command: Command, code: str, reason: str, **detail: object) -> CommandVerdict:
    return CommandVerdict(
        command_id=command.command_id,
        status="rejected",
        rejection=Rejection(code=code, reason=reason, detail=dict(detail)),
    )


class UpdateSender:
    """Sends Updates to Mission workflows, with bounded concurrency and retries.

    Args:
        client: the Temporal client (its data converter must be the pydantic one).
        retry: the backoff settings.
        max_in_flight: most updates in flight per workflow from this agent (Temporal allows 10
            per workflow in all).
        clock: epoch-millisecond clock (retry deadlines).

    Attributes:
        attempts: update calls made.
        retries: calls retried after a retryable answer.
    """

    def __init__(
        self,
        client: Client,
        *,
        retry: UpdateRetry | None = None,
        max_in_flight: int = 4,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.clock = clock
        self.client = client
        self.retry = retry or UpdateRetry()
        self.max_in_flight = max_in_flight
        self._gates: dict[str, asyncio.Semaphore] = {}
        self.attempts = self.retries = 0

    async def send(
        self,
        mission_id: str,
        update: str,
        command: Command,
        *,
        deadline_ms: int | None = None,
        then_start: Command | None = None,
    ) -> CommandVerdict:
        """Send ``command`` as Update ``update`` to the Mission's workflow.

        Args:
            mission_id: the Mission (workflow id ``mission-<mission_id>``).
            update: ``accept_offer``, ``decline_offer`` or ``start_work``.
            command: the agent's signed Command; its id is the update id.
            deadline_ms: stop retrying at this time, epoch milliseconds (an offer's expiry, a
                start deadline).
            then_start: with ``accept_offer``: the agent's ``work.start`` for the same WorkItem,
                submitted right after the acceptance (its verdict: ``CommandVerdict.start``).

        Returns:
            The workflow's verdict. A refusal by the update's validator, or a workflow that
            stayed unreachable, is a ``rejected`` verdict (``update_rejected`` /
            ``workflow_unreachable``), never an exception: losing an offer race is normal.
        """
        wid = mission_workflow_id(mission_id)
        gate = self._gates.setdefault(wid, asyncio.Semaphore(self.max_in_flight))
        handle = self.client.get_workflow_handle(wid)
        arg = AgentCommandInput(command=command, then_start=then_start)
        r = self.retry
        delay = r.initial_backoff.total_seconds()
        last = "no attempt"
        for attempt in range(1, r.max_attempts + 1):
            self.attempts += 1
            try:
                async with gate:
                    result: CommandVerdict = await handle.execute_update(
                        update,
                        arg,
                        id=command.command_id,
                        result_type=CommandVerdict,
                        rpc_timeout=r.rpc_timeout,
                    )
                return result
            except WorkflowUpdateFailedError as exc:
                # The validator refused it before it touched history. A snake_case
                # ApplicationError type is kept as the code; anything else is update_rejected.
                cause = exc.cause
                kind = cause.type if isinstance(cause, ApplicationError) else None
                code = kind if kind and _CODE.match(kind) else "update_rejected"
                reason = str(cause) or str(exc)
                error_type = kind or type(cause).__name__
                return _rejected(
                    command, code, reason, workflow_id=wid, update=update, error_type=error_type
                )
            except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
                last = str(exc)
            except RPCError as exc:
                if exc.status not in RETRYABLE:
                    log.error("update %s to %s failed: %s", update, wid, exc)
                    return _rejected(
                        command,
                        "update_error",
                        exc.message,
                        workflow_id=wid,
                        status=exc.status.name,
                    )
                last = f"{exc.status.name}: {exc.message}"
            if attempt == r.max_attempts or (
                deadline_ms is not None and self.clock() + delay * 1000 >= deadline_ms
            ):
                break
            self.retries += 1
            log.info("update %s to %s: %s; retrying in %.2fs", update, wid, last, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, r.max_backoff.total_seconds())
        log.warning("update %s to %s gave up: %s", update, wid, last)
        return _rejected(command, "workflow_unreachable", last, workflow_id=wid, update=update)


__all__ = ["RETRYABLE", "UpdateRetry", "UpdateSender"]
