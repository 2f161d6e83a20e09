"""The WorkItem state machine of spec 10.2, as data, and the one function that applies it.

:data:`TRANSITIONS` is the table; :func:`check_transition` answers "may this actor, in this role,
take this action on a WorkItem in this state at this revision", and returns the next state or a
:class:`Rejection`. Both the Authority and the Mission workflow call it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from ._errors import Rejection
from ._rejection_codes import RejectionCode
from ._vocabulary import CommandType


class WorkItemState(StrEnum):
    """States of a WorkItem (spec 10.2). ``proposed`` is the open work proposal."""

    PROPOSED = "proposed"
    OPEN = "open"
    OFFERED = "offered"
    QUEUED = "queued"
    ACTIVE = "active"
    BLOCKED = "blocked"
    SUBMITTED = "submitted"
    VERIFIED = "verified"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Role(StrEnum):
    """Roles a Group member may hold (docs/design.md §2)."""

    MEMBER = "member"
    WORKER = "worker"
    COORDINATOR = "coordinator"
    REVIEWER = "reviewer"
    MISSION_OWNER = "mission_owner"
    OWNER = "owner"  # the Group's administrator: manages membership


#: Terminal for the WorkItem revision (MW-10.2-a).
TERMINAL_STATES = frozenset({WorkItemState.VERIFIED, WorkItemState.CANCELLED})


def state_counts(states: Iterable[WorkItemState]) -> dict[str, int]:
    """How many WorkItems are in each state (by the state's wire string; absent: none), as a
    Mission's status and result count them."""
    out: dict[str, int] = {}
    for s in states:
        out[s.value] = out.get(s.value, 0) + 1
    return out


#: States from which a Mission's failure or cancellation propagates (spec 10.2 last row).
UNFINISHED_STATES = frozenset(
    WorkItemState(n) for n in ("open", "offered", "queued", "active", "blocked", "submitted")
)

_COORD = frozenset({Role.COORDINATOR})
_OWNER_WORKER = frozenset({Role.WORKER})


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the table.

    Attributes:
        action: the Command type (``work.offer`` …) or a system trigger (``child.approved``).
        sources: states it may be taken from; ``None`` in the set means "no WorkItem yet".
        targets: the states it may lead to; the Authority picks one from the command's facts.
        roles: roles allowed to take it (any one suffices).
        owner_only: the actor must be the WorkItem's current owner (with a current lease where
            the Authority requires one).
        note: the table's note.
    """

    action: str
    sources: frozenset[WorkItemState | None]
    targets: tuple[WorkItemState, ...]
    roles: frozenset[Role]
    owner_only: bool = False
    note: str = ""


_ANY_MEMBER = frozenset(Role)
_COORD_OR_MISSION_OWNER = frozenset({Role.COORDINATOR, Role.MISSION_OWNER})


def _row(
    action: str,
    sources: str | frozenset[WorkItemState | None],
    targets: str,
    roles: frozenset[Role],
    *,
    owner_only: bool = False,
    note: str = "",
) -> Transition:
    """One row of :data:`TRANSITIONS`, its states named by value and space-separated as the
    spec's table writes them (``none``: no WorkItem yet)."""
    if isinstance(sources, str):
        sources = frozenset(None if n == "none" else WorkItemState(n) for n in sources.split())
    return Transition(
        action,
        sources,
        tuple(WorkItemState(n) for n in targets.split()),
        roles,
        owner_only=owner_only,
        note=note,
    )


TRANSITIONS: tuple[Transition, ...] = (
    _row(CommandType.WORK_PROPOSE, "none", "proposed", _ANY_MEMBER,
         note="any Group member may propose; no WorkItem exists yet"),
    _row(CommandType.WORK_AUTHORIZE, "none proposed", "open", _COORD,
         note="the Coordinator or a scoped delegate creates the WorkItem"),
    _row(CommandType.WORK_OFFER, "open offered queued active blocked failed", "offered", _COORD,
         note="only with no active owner; an expired owner is closed first"),
    _row(CommandType.WORK_ACCEPT_OFFER, "offered", "queued", _OWNER_WORKER,
         note="the atomic ownership epoch begins"),
    _row(CommandType.WORK_DECLINE_OFFER, "offered", "offered", _OWNER_WORKER,
         note="a structured reason; the offer stays for other candidates"),
    _row(CommandType.APPROVAL_GRANT_EXECUTION, "queued", "queued", frozenset({Role.MISSION_OWNER}),
         note="satisfies the start gate"),
    _row(CommandType.WORK_START, "queued", "active", _OWNER_WORKER,
         owner_only=True, note="a valid ownership and an execution lease are required"),
    _row(CommandType.LEASE_RENEW, "queued active", "queued active", _OWNER_WORKER, owner_only=True,
         note="the queued ownership lease or the execution lease (MW-11.3-a)"),
    _row(CommandType.PROGRESS_REPORT, "active blocked", "active blocked", _OWNER_WORKER,
         owner_only=True, note="structured progress (MW-11.4-a)"),
    _row(CommandType.WORK_CHECKPOINT, "active", "queued", _OWNER_WORKER,
         owner_only=True, note="durable progress releases execution"),
    _row(CommandType.WORK_BLOCK, "active", "blocked", _OWNER_WORKER,
         owner_only=True, note="checkpoint and a bounded blocked lease"),
    _row(CommandType.WORK_UNBLOCK, "blocked", "queued open", _COORD,
         note="back to its queue, or re-offered once ownership has expired"),
    _row(CommandType.WORK_SUBMIT, "active", "submitted", _OWNER_WORKER,
         owner_only=True, note="artifacts and Evidence required"),
    _row(CommandType.WORK_ACCEPT_RESULT, "submitted", "verified", _COORD,
         note="the Coordinator's review passes (reviewers supply Evidence)"),
    _row(CommandType.WORK_FAIL, UNFINISHED_STATES, "failed",
         frozenset({Role.COORDINATOR, Role.WORKER}),
         note="failure Evidence required"),
    _row(CommandType.WORK_CANCEL, UNFINISHED_STATES, "cancelled", _COORD_OR_MISSION_OWNER),
    _row(CommandType.MISSION_CREATE_CHILD, "open offered queued active blocked", "blocked", _COORD,
         note="ownership is closed while the linked child Mission runs"),
    _row(CommandType.MISSION_CHILD_APPROVED, "blocked", "verified", _COORD,
         note="the child's Approval becomes the parent WorkItem's Evidence"),
    _row(CommandType.MISSION_CHILD_FAILED, "blocked", "blocked failed", _COORD,
         note="the declared child-failure policy decides"),
    _row(CommandType.MISSION_FAIL, UNFINISHED_STATES, "failed", _COORD_OR_MISSION_OWNER,
         note="the Mission's terminal state propagates"),
    _row(CommandType.MISSION_CANCEL, UNFINISHED_STATES, "cancelled", _COORD_OR_MISSION_OWNER,
         note="the Mission's terminal state propagates"),
)  # fmt: skip

_BY_ACTION: dict[str, Transition] = {t.action: t for t in TRANSITIONS}
#: Every WorkItem action the table knows.
WORK_ACTIONS = frozenset(_BY_ACTION)


def transition_for(action: str) -> Transition | None:
    """The table row for ``action``, or ``None`` when the table has no such action."""
    return _BY_ACTION.get(action)


def check_transition(
    state: WorkItemState | None,
    action: str,
    roles: frozenset[Role] | set[Role],
    *,
    revision: int | None = None,
    current_revision: int | None = None,
) -> Transition | Rejection:
    """Whether ``action`` is allowed from ``state`` for an actor holding ``roles``.

    Args:
        state: the WorkItem's current state, ``None`` when no WorkItem exists yet.
        action: the Command type, e.g. ``"work.accept_offer"``.
        roles: the actor's roles in the Group.
        revision: the contract revision the Command was made against, if it names one.
        current_revision: the WorkItem's current contract revision.

    Returns:
        The :class:`Transition` row when allowed; otherwise a :class:`Rejection` with code
        ``unknown_action``, ``transition_not_allowed`` (state), ``role_not_allowed`` or
        ``stale_revision``.

    Implements MW-10.2-a, MW-10.2-b and MW-10.2-c: terminal states have no outgoing row,
    ``failed`` leaves only by ``work.offer`` (or cancellation at Mission level), and every other
    transition is refused.
    """
    row = _BY_ACTION.get(action)
    if row is None:
        return Rejection(
            code=RejectionCode.UNKNOWN_ACTION,
            reason=f"{action!r} is not a WorkItem action",
            detail={"action": action},
        )
    if state not in row.sources:
        return Rejection(
            code=RejectionCode.TRANSITION_NOT_ALLOWED,
            reason=f"{action} is not allowed from state {state or 'none'}",
            detail={
                "action": action,
                "state": state and str(state),
                "allowed_from": sorted(str(s) if s else "none" for s in row.sources),
            },
        )
    if not (row.roles & set(roles)):
        return Rejection(
            code=RejectionCode.ROLE_NOT_ALLOWED,
            reason=f"{action} needs one of the roles {sorted(r.value for r in row.roles)}",
            detail={"action": action, "roles": sorted(str(r) for r in roles)},
        )
    if revision is not None and current_revision is not None and revision != current_revision:
        return Rejection(
            code=RejectionCode.STALE_REVISION,
            reason=f"command made against contract revision {revision}, current is "
            f"{current_revision}",
            detail={"revision": revision, "current_revision": current_revision},
        )
    return row
