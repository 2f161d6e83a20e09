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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import ProgressReport

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


__all__ = ["MIN_REVISION_MS", "ProgressState"]
