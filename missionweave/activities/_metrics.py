"""What the coordinator's activities record (docs/metrics.md): offers and their verdicts,
rankings that found nobody, reassignments by cause, review outcomes.

Recorded here, in activity code, never in the workflow (its code is replayed). A reassignment
is an offer of a WorkItem that had been offered before; its cause is read from the Events of
the Authority's verdict on the new offer: an owner closed (``ownership.closed``, its reason),
the previous offer withdrawn unanswered (``offer_expired``), or none of both while the
WorkItem was still ``offered`` (every candidate declined: ``offer_declined``).
"""

from __future__ import annotations

from ..metrics import add
from ..metrics import series as s
from ..protocol import EventType
from ..protocol.temporal_contract import (
    CommandVerdict,
    ReviewResult,
    SelectCandidatesResult,
)

#: The reasons of ``ownership.closed`` exported as they are (others: ``owner_closed``).
OWNER_CLOSED = frozenset(s.EXPIRY_REASONS)


def reassignment_cause(verdict: CommandVerdict) -> str | None:
    """Why an accepted ``work.offer`` offers its WorkItem again, or ``None`` for a first
    offer (see the module docstring)."""
    if not verdict.accepted:
        return None
    offered = next((e for e in verdict.events if e.type == EventType.WORK_OFFERED), None)
    if offered is None:
        return None
    for e in verdict.events:
        if e.type == EventType.OWNERSHIP_CLOSED:
            reason = e.body.get("reason")
            return reason if reason in OWNER_CLOSED else "owner_closed"
    if any(e.type == EventType.OFFER_WITHDRAWN for e in verdict.events):
        return "offer_expired"
    previous = offered.body.get("previous_state")
    if previous == "offered":
        return "offer_declined"
    if previous == "failed":
        return "retry_after_failure"
    if previous in ("queued", "active", "blocked"):
        return "requeued"
    return None


def record_ranking(result: SelectCandidatesResult) -> None:
    """Count one ranking: nobody found (and why), or the offer made and the Authority's
    verdict on it, and a reassignment's cause."""
    if not result.candidates:
        add(s.COORDINATOR_UNPLACED, reason="saturated" if result.saturated else "no_eligible_agent")
        return
    verdict = result.verdict
    if verdict is None:
        return
    code = verdict.rejection.code if verdict.rejection is not None else "none"
    add(s.COORDINATOR_OFFERS, status=verdict.status, code=code)
    cause = reassignment_cause(verdict)
    if cause is not None:
        add(s.COORDINATOR_REASSIGNMENTS, cause=cause)


def record_review(result: ReviewResult) -> None:
    """Count one review of steps 1–2: passed, or failed at its first failed step."""
    failed = next((step.step for step in result.steps if not step.passed), None)
    outcome = "passed" if result.passed else "failed"
    add(s.COORDINATOR_REVIEWS, outcome=outcome, failed_step=failed or "none")


__all__ = ["OWNER_CLOSED", "reassignment_cause", "record_ranking", "record_review"]
