"""``WorkContext``: what a handler sees of its WorkItem, its lease and the runtime (DESIGN §4.6).

Each execution slot gets its own context — ids, lease, checkpoint, usage meters and
idempotency keys are never shared between slots (MW-11.1-e).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn

from temporalio import activity

from ..authority.client import AuthorityUnavailable
from ..protocol import Evidence, ProgressReport, WorkContract, attempt_key, idempotency_key
from ..protocol.mission import ExecuteWorkItemInput, LeaseGrant
from ._errors import Blocked, Pause
from ._lease import LeaseSession, UsageMeter

log = logging.getLogger(__name__)

ProgressHook = Callable[[ProgressReport], Awaitable[None]]


def heartbeat(details: dict[str, Any]) -> None:
    """Temporal heartbeat with ``details`` when running inside an activity (else nothing)."""
    if activity.in_activity():
        activity.heartbeat(details)


class WorkContext:
    """The handler's view of one execution.

    Attributes:
        agent_id: this agent.
        group_id: the Group whose log records the WorkItem.
        mission_id: the Mission.
        work_item_id: the WorkItem.
        contract: its work contract (MW-10.1-a).
        attempt: the execution attempt (1 for the first).
        usage: this slot's usage meters; deltas go with every renewal and report.
        logger: a logger whose records carry the ids.
    """

    def __init__(
        self,
        work: ExecuteWorkItemInput,
        session: LeaseSession,
        *,
        on_progress: ProgressHook | None = None,
    ) -> None:
        self._work = work
        self._session = session
        self._on_progress = on_progress
        self._checkpoint = dict(work.checkpoint) if work.checkpoint else None
        self._pause_reason: str | None = None
        self.agent_id = session.actor.agent_id
        self.group_id = work.group_id
        self.mission_id = work.mission_id
        self.work_item_id = work.work_item_id
        self.contract: WorkContract = work.contract
        self.attempt = work.attempt
        self.usage: UsageMeter = session.usage
        self.logger = logging.LoggerAdapter(
            logging.getLogger("missionweave.handler"),
            {
                "group_id": work.group_id,
                "mission_id": work.mission_id,
                "work_item_id": work.work_item_id,
                "ownership_epoch": work.lease.ownership_epoch,
            },
        )

    # ---------------------------------------------------------------------------- facts

    @property
    def lease(self) -> LeaseGrant:
        """The current execution lease (its expiry and token follow renewals)."""
        return self._session.lease

    @property
    def ownership_epoch(self) -> int:
        """The ownership epoch this execution runs under (MW-11.3-a)."""
        return self._session.lease.ownership_epoch

    @property
    def capability_token(self) -> dict[str, Any]:
        """The current capability token, bound to the lease (MW-11.3-d)."""
        return self._session.lease.capability_token

    @property
    def checkpoint(self) -> dict[str, Any] | None:
        """The last durable checkpoint (from the Authority, or the last :meth:`save`)."""
        return self._checkpoint

    def idempotency_key(self, op_id: str) -> str:
        """The stable key of external operation ``op_id`` under this ownership epoch: the same
        in every retry and resume of this epoch, different after a reassignment (MW-16-f).

        Raises:
            ValueError: ``op_id`` is empty.
        """
        return idempotency_key(self.mission_id, self.work_item_id, self.ownership_epoch, op_id)

    def attempt_key(self, op_id: str, n: int) -> str:
        """A deterministic key for attempt ``n`` (≥ 1) of operation ``op_id``, for external APIs
        that need a fresh key per retry (MW-11.4-e).

        Raises:
            ValueError: ``op_id`` is empty or ``n`` < 1.
        """
        return attempt_key(self.idempotency_key(op_id), n)

    def evidence(
        self,
        criterion: str,
        result: str = "pass",
        *,
        method: str,
        summary: str = "",
        artifacts: Iterable[str] = (),
    ) -> Evidence:
        """Evidence for one acceptance criterion, with subject, producer and time filled in
        (MW-13.2-c). ``summary`` is a short factual statement, never a reasoning transcript.

        Raises:
            pydantic.ValidationError: ``result`` is not pass/fail/inconclusive, or the summary is
                over 2,000 characters.
        """
        return Evidence(
            subject=self.work_item_id,
            criterion=criterion,
            method=method,
            result=result,
            producer=self.agent_id,
            timestamp_ms=self._session.clock(),
            artifacts=list(artifacts),
            summary=summary,
        )

    # -------------------------------------------------------------------------- reports

    async def save(self, state: dict[str, Any], *, phase: str = "checkpoint") -> None:
        """Record a durable checkpoint: Temporal heartbeat details (a hint for the next
        attempt) and a signed ``progress.report`` carrying ``checkpoint=state``, which the
        Authority stores as the resume point of a reassignment (MW-11.5-a).

        While the Authority is unreachable the checkpoint is kept locally and the handler goes
        on (MW-11.5-c); the final report carries it.

        Raises:
            ValueError: ``state`` is empty.
            LeaseLost: the Authority says the lease is gone: stop now.
        """
        if not state:
            raise ValueError("a checkpoint is a non-empty dict")
        self._checkpoint = dict(state)
        heartbeat(self.heartbeat_details())
        report = ProgressReport(phase=phase)
        await self._send_progress(report, checkpoint=self._checkpoint)

    async def report(
        self,
        phase: str,
        *,
        milestones: Iterable[str] = (),
        next_checkpoint: str | None = None,
        blockers: Iterable[str] = (),
        estimate_remaining_ms: int | None = None,
        evidence_refs: Iterable[str] = (),
    ) -> None:
        """Report structured progress (MW-11.4-a, MW-11.4-b): a signed ``progress.report`` to
        the Authority, and the latest report to the Mission workflow when one is reachable.

        Args:
            phase: the current phase, e.g. ``"hashing"``.
            milestones: milestones completed so far.
            next_checkpoint: the next safe point, in words.
            blockers: what stands in the way, if anything.
            estimate_remaining_ms: revised estimate of the remaining time, milliseconds.
            evidence_refs: ids or hashes of Evidence produced so far.

        Raises:
            LeaseLost: the Authority says the lease is gone.
        """
        report = ProgressReport(
            phase=phase,
            milestones_completed=list(milestones),
            next_checkpoint=next_checkpoint,
            blockers=list(blockers),
            estimate_remaining_ms=estimate_remaining_ms,
            evidence_refs=list(evidence_refs),
        )
        await self._send_progress(report, checkpoint=None)

    async def _send_progress(
        self, report: ProgressReport, *, checkpoint: dict[str, Any] | None
    ) -> None:
        extra: dict[str, Any] = {"report": report.model_dump(mode="json")}
        if checkpoint is not None:
            extra["checkpoint"] = checkpoint
        try:
            verdict = await self._session.fenced("progress.report", extra)
        except AuthorityUnavailable as exc:
            self.logger.warning("progress not reported (Authority unreachable): %s", exc)
            return
        if self._session.lost is not None:
            raise self._session.lost
        if not verdict.accepted and verdict.rejection is not None:
            self.logger.warning("progress.report rejected: %s", verdict.rejection.code)
        if self._on_progress is not None:
            try:
                await self._on_progress(report)
            except Exception as exc:  # progress to the workflow is a courtesy, never fatal
                self.logger.info("progress signal not delivered: %r", exc)

    def heartbeat_details(self) -> dict[str, Any]:
        """What goes into Temporal heartbeats: ids, lease, last checkpoint (a hint only; the
        durable checkpoint lives in the Authority)."""
        return {
            "work_item_id": self.work_item_id,
            "lease_id": self.lease.lease_id,
            "ownership_epoch": self.ownership_epoch,
            "checkpoint": self._checkpoint,
        }

    # ------------------------------------------------------------------------- control

    def should_pause(self) -> bool:
        """Whether the runtime asks this handler to stop at its next safe point: the scheduler
        needs the slot, or the worker is shutting down (cooperative preemption, MW-11.3-g).
        Answer with ``return ctx.pause(state)`` (or ``raise Pause(state)``)."""
        if self._pause_reason is not None:
            return True
        return activity.in_activity() and activity.is_worker_shutdown()

    def request_pause(self, reason: str) -> None:
        """Ask the handler to pause at its next safe point (the runtime calls this)."""
        if self._pause_reason is None:
            self.logger.info("pause requested: %s", reason)
            self._pause_reason = reason

    def pause(self, state: dict[str, Any]) -> Pause:
        """The value to return to pause at checkpoint ``state`` (``return ctx.pause(state)``).

        Raises:
            ValueError: ``state`` is empty.
        """
        return Pause(state)

    def block(self, resolution: dict[str, Any], state: dict[str, Any]) -> NoReturn:
        """Stop because something is needed: ``work.block`` with ``resolution`` and the
        checkpoint ``state`` (MW-11.4-c). Never returns.

        Raises:
            Blocked: always.
            ValueError: ``resolution`` or ``state`` is empty.
        """
        raise Blocked(resolution, state)

    async def guard(self) -> None:
        """Call before any external side effect: asks the Authority (``GET /v1/leases/{id}``)
        whether the lease is still valid and checks the capability token's expiry. Temporal
        tells a timed-out attempt nothing until its next heartbeat, so this is the real fence
        (MW-11.5-d).

        Raises:
            LeaseLost: the lease is gone or cannot be confirmed.
        """
        await self._session.check()


__all__ = ["ProgressHook", "WorkContext", "heartbeat"]
