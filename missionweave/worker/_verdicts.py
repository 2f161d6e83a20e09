"""The Authority's answers as the workflow and the runtime see them."""

from __future__ import annotations

from typing import Any

from ..authority import SubmitResult
from ..protocol.mission import CommandVerdict, EventSummary

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

#: Event body keys too heavy for a workflow payload (the contract is in the workflow's state).
_HEAVY = frozenset({"contract"})


def _light(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in _HEAVY}


def command_verdict(result: SubmitResult) -> CommandVerdict:
    """Convert the Authority's :class:`SubmitResult` into a :class:`CommandVerdict`.

    Events become :class:`EventSummary` items (seq, type, work item, body without the
    ``contract`` key); the reply (lease, capability token, …) is kept whole.
    """
    return CommandVerdict(
        command_id=result.command_id,
        status=result.status,
        rejection=result.rejection,
        events=[
            EventSummary(seq=e.seq, type=e.type, work_item_id=e.work_item_id, body=_light(e.body))
            for e in result.events
        ],
        reply=dict(result.reply),
    )


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
