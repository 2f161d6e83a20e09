"""The Authority's answers as the workflow and the runtime see them."""

from __future__ import annotations

from ..authority.wire import SubmitResult
from ..protocol.temporal_contract import CommandVerdict

#: Rejection codes that mean "this lease, session or ownership is no longer yours": the
#: fencing checks of MW-11.3-c, plus a WorkItem that moved on (cancelled, reassigned).
FENCE_CODES = frozenset(
    {
        "unknown_lease",
        "not_owner",
        "stale_ownership_epoch",
        "stale_lease",
        "lease_expired",
        "stale_session_epoch",
        "no_session",
        "not_a_member",
        "stale_membership_epoch",
        "transition_not_allowed",
    }
)


def command_verdict(result: SubmitResult) -> CommandVerdict:
    """Convert the Authority's :class:`SubmitResult` into a :class:`CommandVerdict`: Events as
    :class:`EventSummary` items (body without the ``contract`` key), the reply kept whole.
    The conversion itself is :meth:`SubmitResult.verdict`, shared with the coordinator."""
    return result.verdict()


def is_fenced_out(verdict: CommandVerdict) -> bool:
    """Whether a rejection (or a ``recorded`` late result) says the lease is lost."""
    if verdict.status == "recorded":
        return True
    return (
        verdict.status == "rejected"
        and verdict.rejection is not None
        and verdict.rejection.code in FENCE_CODES
    )


__all__ = ["FENCE_CODES", "command_verdict", "is_fenced_out"]
