"""What the runtime reports by itself (MW-11.4-b): the structured state of a checkpoint, and a
revised estimate when the last one no longer holds.

:class:`ProgressState` keeps the handler's last structured report (phase, milestones, next
checkpoint, blockers, Evidence references) and the execution's expected end — from the last
``estimate_remaining_ms`` the handler reported, else from the handler's declared
``estimate_ms``. Two things follow:

- every durable checkpoint (``ctx.save``) is reported with that whole state and the
  current remaining estimate, not a bare phase;
- when the expected end has passed and the handler is still running, the estimate has
  changed materially: the runtime revises it — the remaining time becomes half the time
  elapsed so far, so each revision pushes the end out by at least half again and the reports
  thin out geometrically — and reports it at its next heartbeat.

:class:`ProgressReporter` sends the reports of one execution — the handler's and these — as
signed ``progress.report`` Commands, buffered while the Authority is unreachable, and hands
each to the Mission workflow's hook.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..authority.client import AuthorityUnavailable
from ..protocol import CommandType, ProgressReport
from ..protocol.temporal_contract import CommandVerdict
from ._errors import LeaseLost
from ._lease import LeaseSession

#: Where an execution's progress reports also go (the Mission workflow's ``report_progress``).
ProgressHook = Callable[[ProgressReport], Awaitable[None]]

#: The smallest remaining time a revision announces, milliseconds.
MIN_REVISION_MS = 1_000


@dataclass(slots=True)
class ProgressState:
    """One execution's reported progress and expected end.

    Args:
        started_ms: when the execution started, epoch milliseconds.
        estimate_ms: the handler's declared duration of one execution, milliseconds
            (``None``: no expected end until the handler reports an estimate).
    """

    started_ms: int
    estimate_ms: int | None = None
    last: ProgressReport = field(default_factory=lambda: ProgressReport(phase="started"))
    expected_end_ms: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.estimate_ms is not None:
            self.expected_end_ms = self.started_ms + self.estimate_ms

    def remaining_ms(self, now_ms: int) -> int | None:
        """The current estimate of the remaining time (0 once the expected end has passed),
        or ``None`` when nothing is expected."""
        if self.expected_end_ms is None:
            return None
        return max(0, self.expected_end_ms - now_ms)

    def reported(self, report: ProgressReport, now_ms: int) -> None:
        """Note a report sent (the handler's or the runtime's); an estimate in it sets the
        expected end."""
        self.last = report
        if report.estimate_remaining_ms is not None:
            self.expected_end_ms = now_ms + report.estimate_remaining_ms

    def at_checkpoint(self, phase: str, now_ms: int) -> ProgressReport:
        """The report of a durable checkpoint: the last structured report under ``phase``,
        with the current remaining estimate."""
        return self.last.model_copy(
            update={"phase": phase, "estimate_remaining_ms": self.remaining_ms(now_ms)}
        )

    def revision(self, now_ms: int) -> ProgressReport | None:
        """The report of a material estimate change, or ``None``: the expected end has passed
        while the execution runs on; the remaining time becomes half the time elapsed (at
        least :data:`MIN_REVISION_MS`). The caller sends it and then calls :meth:`reported`."""
        if self.expected_end_ms is None or now_ms < self.expected_end_ms:
            return None
        remaining = max(MIN_REVISION_MS, (now_ms - self.started_ms) // 2)
        return self.last.model_copy(update={"estimate_remaining_ms": remaining})


class ProgressReporter:
    """Sends one execution's progress reports (MW-11.4-a/b) and keeps its
    :class:`ProgressState`.

    Args:
        session: the execution's lease session.
        on_progress: also send each accepted report here (a courtesy: failures are logged).
        logger: the handler's logger, with its ids.
    """

    def __init__(
        self,
        session: LeaseSession,
        *,
        on_progress: ProgressHook | None,
        logger: logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self._session = session
        self._on_progress = on_progress
        self._logger = logger
        self.state = ProgressState(session.clock())

    def set_estimate(self, estimate_ms: int | None) -> None:
        """The handler's declared duration of one execution, milliseconds."""
        self.state = ProgressState(self.state.started_ms, estimate_ms, self.state.last)

    async def checkpoint(self, phase: str, durable: dict[str, Any]) -> CommandVerdict | None:
        """Report the durable checkpoint ``durable`` with the whole last report under
        ``phase`` (:meth:`send` says what comes back)."""
        report = self.state.at_checkpoint(phase, self._session.clock())
        return await self.send(report, checkpoint=durable)

    async def revise(self) -> bool:
        """Report a materially changed estimate (:meth:`ProgressState.revision`); whether one
        was reported. A lost lease is not raised: the heartbeat loop handles it."""
        revised = self.state.revision(self._session.clock())
        if revised is None:
            return False
        try:
            await self.send(revised, checkpoint=None)
        except LeaseLost:
            return False
        self._logger.info("estimate revised: %s ms remaining", revised.estimate_remaining_ms)
        return True

    async def send(
        self, report: ProgressReport, *, checkpoint: dict[str, Any] | None
    ) -> CommandVerdict | None:
        """Send ``report`` (with ``checkpoint``, when one is recorded) as a signed
        ``progress.report``.

        Returns:
            The Authority's verdict, or ``None`` when the Authority was unreachable and the
            report was buffered offline with its usage delta (MW-11.5-c).

        Raises:
            LeaseLost: the Authority says the lease is gone, or stayed unreachable past the
                grace deadline.
        """
        self.state.reported(report, self._session.clock())
        extra: dict[str, Any] = {"report": report.model_dump(mode="json")}
        if checkpoint is not None:
            extra["checkpoint"] = checkpoint
        async with self._session.charging:  # after the verdict on a charge in flight
            prepared = self._session.prepare(CommandType.PROGRESS_REPORT, extra)
            try:
                verdict = await self._session.send(prepared)
            except AuthorityUnavailable as exc:
                # buffered with its usage delta, durable, reconciled on reconnection (MW-11.5-c)
                cmd = self._session.buffer_offline(prepared)
                self._logger.warning(
                    "Authority unreachable (%s): progress %s buffered", exc, cmd.command_id
                )
                return None
        if self._session.lost is not None:
            raise self._session.lost
        if not verdict.accepted and verdict.rejection is not None:
            self._logger.warning("progress.report rejected: %s", verdict.rejection.code)
        if self._on_progress is not None:
            try:
                await self._on_progress(report)
            except Exception as exc:  # progress to the workflow is a courtesy, never fatal
                self._logger.info("progress signal not delivered: %r", exc)
        return verdict


__all__ = ["MIN_REVISION_MS", "ProgressHook", "ProgressReporter", "ProgressState"]
