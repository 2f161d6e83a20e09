"""The one WorkItem reducer: ``(facts, event) → facts``, pure, from the Authority's Events.

The Authority keeps each WorkItem as a row and records every change as an Event; whoever
needs the WorkItem's state elsewhere — the Mission workflow, an agent's local projection, a
test checking the Authority — folds the Group's Events through :func:`reduce_work_item` and
gets the same answer. It reads only the Event (type, body, sequence, ``recorded_at_ms``),
never a clock, so a replay rebuilds the same facts (MW-10.2-a, MW-11.1-b).

The Authority's rows are themselves this fold: its engine applies each WorkItem Event through
:func:`reduce_work_item` as it is emitted and writes the columns that changed
(``authority/core/_fold.py``). The stateful test (``tests/authority/test_stateful.py``) checks
after every step that every folded column of every row equals the fold of the log.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._states import WorkItemState
from ._vocabulary import EventType


class EventLike(Protocol):
    """What the reducer reads of an Event (a :class:`~missionweave.protocol.Event` or the
    workflow's ``EventSummary``)."""

    @property
    def type(self) -> str: ...

    @property
    def seq(self) -> int: ...

    @property
    def body(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class WorkItemFacts:
    """What the log says of one WorkItem.

    Attributes:
        state: the WorkItem's state (``None`` before ``work.authorized`` / ``work.proposed``).
        mission_id: its Mission.
        revision: the contract revision.
        owner: the current owner (``None`` once ownership is closed).
        ownership_epoch: the ownership epoch, raised by each acceptance (MW-11.3-a).
        key_version: the idempotency key version of that epoch (``work.offer_accepted``'s
            ``key_version``; 1 when it names none), kept for every execution of the epoch
            (MW-16-f, :func:`~missionweave.protocol.idempotency_key`).
        lease: the current execution lease as granted (``work.started``'s ``lease`` with its
            public ``capability_token``), ``None`` when none is held.
        hold_id: the queued ownership lease that holds an accepted WorkItem until it starts
            (``work.offer_accepted``'s ``hold``, MW-11.3-a), ``None`` once it ended.
        start_deadline_ms: when a queued item must have started, epoch ms (MW-11.5-a).
        offer_id / offer_expires_at_ms / offer_candidates: the open offer.
        declined: candidates of the open offer that declined it.
        approved: ``approval.execution_granted`` for the current ownership.
        checkpoint: the newest durable checkpoint (the resume point, MW-11.5-a).
        blocked_until_ms: the end of the blocked lease.
        attempts: failed executions so far.
        retryable: whether the last failure may be retried (``work.failed``'s ``retryable``).
        error: what the last failure said: the summary of ``work.failed``'s failing Evidence
            (a handler's exception type and message, paths redacted; a failed review step).
        failed_owner: who held it when it last failed (``work.failed``'s ``owner``).
        retry_exhausted: the retry bound the last failure reached (``max_attempts``,
            ``max_total_wait_ms``, ``deadline``, ``cost_cap`` or ``budget``; MW-11.4-d), ``None``
            when the Authority left a retry.
        outputs / artifacts / evidence: the last submission (``work.submitted``).
        queued_at_ms: when it last entered its owner's queue (the Event's ``recorded_at_ms``).
        approval: the MissionOwner's decision on the result (the ``approval.result_*`` body,
            with ``type`` and ``seq``).
        seq: the sequence number of the last Event that concerned it.
    """

    state: WorkItemState | None = None
    mission_id: str | None = None
    revision: int = 1
    owner: str | None = None
    ownership_epoch: int = 0
    key_version: int = 1
    lease: dict[str, Any] | None = None
    hold_id: str | None = None
    start_deadline_ms: int | None = None
    offer_id: str | None = None
    offer_expires_at_ms: int | None = None
    offer_candidates: tuple[str, ...] = ()
    declined: tuple[str, ...] = ()
    approved: bool = False
    checkpoint: dict[str, Any] | None = None
    blocked_until_ms: int | None = None
    attempts: int = 0
    retryable: bool = True
    error: str | None = None
    failed_owner: str | None = None
    retry_exhausted: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    artifacts: tuple[str, ...] = ()
    evidence: tuple[dict[str, Any], ...] = ()
    queued_at_ms: int | None = None
    approval: dict[str, Any] | None = None
    seq: int = 0

    @property
    def lease_id(self) -> str | None:
        return None if self.lease is None else str(self.lease["lease_id"])


_NO_OFFER: dict[str, Any] = {"offer_id": None, "offer_expires_at_ms": None,
                             "offer_candidates": (), "declined": ()}  # fmt: skip
_NO_OWNER: dict[str, Any] = {"owner": None, "lease": None, "hold_id": None,
                             "start_deadline_ms": None}  # fmt: skip


def reduce_work_item(f: WorkItemFacts, e: EventLike) -> WorkItemFacts:
    """The facts after Event ``e`` (which must concern this WorkItem); ``f`` unchanged for an
    Event type that does not change a WorkItem. Pure and total: never raises on a well-formed
    Authority Event. Implements MW-10.3-a."""
    b, t = e.body, e.type
    at = b.get("recorded_at_ms", getattr(e, "recorded_at_ms", None))
    new: dict[str, Any] = {"seq": e.seq}
    match t:
        case EventType.WORK_AUTHORIZED | EventType.WORK_PROPOSED:
            new.update(
                state=WorkItemState.OPEN
                if t == EventType.WORK_AUTHORIZED
                else WorkItemState.PROPOSED,
                mission_id=str(b["mission_id"]),
                revision=int(b.get("contract", {}).get("revision", 1)),
            )
        case EventType.WORK_CONTRACT_REVISED:
            new["revision"] = int(b["revision"])
        case EventType.WORK_DEPENDENCIES_ADDED:  # edges are part of the contract (MW-10.1-a)
            new["revision"] = int(b.get("revision", f.revision))
        case EventType.WORK_OFFERED:
            new.update(
                state=WorkItemState.OFFERED,
                offer_id=str(b["offer_id"]),
                offer_expires_at_ms=int(b["expires_at_ms"]),
                offer_candidates=tuple(str(c) for c in b["candidates"]),
                declined=(),
                revision=int(b.get("revision", f.revision)),
            )
            if f.mission_id is None and "mission_id" in b:
                new["mission_id"] = str(b["mission_id"])
        case EventType.OFFER_WITHDRAWN:
            if b.get("offer_id") == f.offer_id:
                new.update(**_NO_OFFER)
        case EventType.WORK_OFFER_DECLINED:
            if b.get("offer_id") == f.offer_id:
                new["declined"] = (*f.declined, str(b["agent_id"]))
                if b.get("all_declined"):  # the Authority closed the offer
                    new.update(**_NO_OFFER)
        case EventType.OWNERSHIP_CLOSED:
            new.update(**_NO_OWNER)
        case EventType.WORK_OFFER_ACCEPTED:
            hold = b.get("hold")
            new.update(
                hold_id=str(hold["lease_id"]) if isinstance(hold, dict) else None,
                **_NO_OFFER,
                state=WorkItemState.QUEUED,
                owner=str(b["owner"]),
                lease=None,
                ownership_epoch=int(b["ownership_epoch"]),
                key_version=int(b.get("key_version", 1)),  # absent before mwk2_ keys
                approved=False,
                start_deadline_ms=int(b["start_deadline_ms"]),
                queued_at_ms=at,
            )
        case EventType.APPROVAL_EXECUTION_GRANTED:
            new["approved"] = True
        case EventType.WORK_STARTED:
            token, lease = b.get("capability_token", {}), b["lease"]
            # the lease names its holder and epoch: a reader that missed the acceptance (it
            # saw only this agent's later Events) still knows the owner
            new.update(
                state=WorkItemState.ACTIVE,
                start_deadline_ms=None,
                hold_id=None,  # work.start ends the queued ownership lease
                owner=str(lease["agent_id"]),
                ownership_epoch=int(lease["ownership_epoch"]),
                lease={**lease, "capability_token": token},
            )
            # the Authority's durable resume point, also one a former owner saved with
            # progress.report before its lease expired (MW-11.5-a)
            if b.get("checkpoint") is not None:
                new["checkpoint"] = b["checkpoint"]
        case EventType.LEASE_RENEWED:
            if f.lease is not None and b.get("lease_id") == f.lease_id:
                new["lease"] = {
                    **f.lease,
                    "expires_at_ms": b["expires_at_ms"],
                    "capability_token": b.get("capability_token", {}),
                }
        case EventType.CAPABILITY_TOKEN_ROTATED:  # MW-11.3-d: a new token under the same lease
            if f.lease is not None and b.get("lease_id") == f.lease_id:
                new["lease"] = {**f.lease, "capability_token": b.get("capability_token", {})}
        case EventType.WORK_PROGRESS_REPORTED:
            if b.get("checkpoint"):
                new["checkpoint"] = b["checkpoint"]
        case EventType.WORK_CHECKPOINTED:
            new.update(
                _released(WorkItemState.QUEUED, b),
                start_deadline_ms=b.get("start_deadline_ms"),
                queued_at_ms=at,
            )
        case EventType.WORK_BLOCKED:
            new.update(
                _released(WorkItemState.BLOCKED, b),
                blocked_until_ms=b.get("blocked_lease_expires_at_ms"),
            )
        case EventType.WORK_UNBLOCKED:
            new.update(
                state=WorkItemState(str(b["state"])),
                blocked_until_ms=None,
                start_deadline_ms=b.get("start_deadline_ms"),
            )
            if new["state"] is WorkItemState.QUEUED:
                new["queued_at_ms"] = at
            else:
                new.update(**_NO_OWNER)
        case EventType.LEASE_REVOKED | EventType.LEASE_RELEASED | EventType.LEASE_EXPIRED:
            if b.get("reason") == "session_replaced" and b.get("state") == "queued":
                # the owner's runtime was replaced (MW-11.3-f): back to its queue
                new.update(
                    state=WorkItemState.QUEUED,
                    lease=None,
                    queued_at_ms=at,
                    start_deadline_ms=b.get("start_deadline_ms"),
                )
            elif f.lease is not None and b.get("lease_id") == f.lease_id:
                new["lease"] = None
            elif f.hold_id is not None and b.get("lease_id") == f.hold_id:
                new["hold_id"] = None
        case EventType.WORK_SUBMITTED:
            new.update(
                state=WorkItemState.SUBMITTED,
                lease=None,
                outputs=dict(b.get("outputs") or {}),
                artifacts=tuple(b.get("artifacts") or ()),
                evidence=tuple(b.get("evidence") or ()),
            )
        case EventType.WORK_RESULT_ACCEPTED | EventType.MISSION_CHILD_APPROVED:
            new["state"] = WorkItemState.VERIFIED
        case EventType.WORK_FAILED:
            new.update(
                **_NO_OWNER,
                **_NO_OFFER,
                state=WorkItemState.FAILED,
                attempts=int(b.get("attempts", f.attempts)),
                retryable=bool(b.get("retryable", True)),
                error=_failure(b),
                retry_exhausted=_bound(b),
                failed_owner=b.get("owner"),
            )
        case EventType.WORK_CANCELLED:
            new.update(**_NO_OFFER, state=WorkItemState.CANCELLED, lease=None)
        case EventType.MISSION_CHILD_CREATED:
            new.update(**_NO_OWNER, **_NO_OFFER, state=WorkItemState.BLOCKED)
        case EventType.MISSION_CHILD_FAILED:
            new["state"] = WorkItemState(str(b["state"]))
        case EventType.APPROVAL_RESULT_GRANTED | EventType.APPROVAL_RESULT_DENIED:
            new["approval"] = {**b, "type": t, "seq": e.seq}
        case _:
            pass
    return _replaced(f, new)


_FIELDS = tuple(fd.name for fd in dataclasses.fields(WorkItemFacts))
_set = object.__setattr__


def _released(state: WorkItemState, body: dict[str, Any]) -> dict[str, Any]:
    """Execution released with durable progress (``work.checkpointed``, ``work.blocked``): the
    item is in ``state``, its execution lease is over and the body's checkpoint is kept."""
    return {"state": state, "lease": None, "checkpoint": body.get("checkpoint")}


def _replaced(f: WorkItemFacts, new: dict[str, Any]) -> WorkItemFacts:
    """``dataclasses.replace(f, **new)`` at a third of its cost (it runs for every WorkItem
    Event the Authority appends; ``new`` names only fields, built above)."""
    out = object.__new__(WorkItemFacts)
    for name in _FIELDS:
        _set(out, name, new[name] if name in new else getattr(f, name))
    return out


#: The Event types :func:`reduce_work_item` folds into a WorkItem's facts.
FOLDED_EVENT_TYPES: frozenset[str] = frozenset({
    EventType.WORK_AUTHORIZED, EventType.WORK_PROPOSED, EventType.WORK_CONTRACT_REVISED,
    EventType.WORK_DEPENDENCIES_ADDED, EventType.WORK_OFFERED, EventType.OFFER_WITHDRAWN,
    EventType.WORK_OFFER_DECLINED, EventType.OWNERSHIP_CLOSED, EventType.WORK_OFFER_ACCEPTED,
    EventType.APPROVAL_EXECUTION_GRANTED, EventType.WORK_STARTED, EventType.LEASE_RENEWED,
    EventType.CAPABILITY_TOKEN_ROTATED, EventType.WORK_PROGRESS_REPORTED,
    EventType.WORK_CHECKPOINTED, EventType.WORK_BLOCKED, EventType.WORK_UNBLOCKED,
    EventType.LEASE_REVOKED, EventType.LEASE_RELEASED, EventType.LEASE_EXPIRED,
    EventType.WORK_SUBMITTED, EventType.WORK_RESULT_ACCEPTED, EventType.MISSION_CHILD_APPROVED,
    EventType.WORK_FAILED, EventType.WORK_CANCELLED, EventType.MISSION_CHILD_CREATED,
    EventType.MISSION_CHILD_FAILED, EventType.APPROVAL_RESULT_GRANTED,
    EventType.APPROVAL_RESULT_DENIED,
})  # fmt: skip
#: Event types that name a WorkItem but change none of its facts (the reducer passes them).
INERT_EVENT_TYPES: frozenset[str] = frozenset({
    EventType.WORK_LATE_RESULT_RECORDED, EventType.ARTIFACT_PUBLISHED,
    EventType.WORK_SCHEDULE_DISCLOSED, EventType.MISSION_USAGE_FORWARDED,
    EventType.MISSION_CHILD_USAGE_CHARGED, EventType.RESOURCE_USAGE_RECORDED,
})  # fmt: skip
#: Every Event type the reducer knows; the Authority refuses to emit any other with a
#: ``work_item_id`` (a handler bug, never a caller's).
WORK_ITEM_EVENT_TYPES: frozenset[str] = FOLDED_EVENT_TYPES | INERT_EVENT_TYPES


def _bound(body: dict[str, Any]) -> str | None:
    """The retry bound a ``work.failed`` body says was reached (MW-11.4-d), if any."""
    exhausted = body.get("retry_exhausted")
    return str(exhausted["bound"]) if isinstance(exhausted, dict) and "bound" in exhausted else None


def _failure(body: dict[str, Any]) -> str | None:
    """The summary of a ``work.failed`` body's first failing Evidence (``None``: none says)."""
    for ev in body.get("evidence") or ():
        if isinstance(ev, dict) and ev.get("result") == "fail" and ev.get("summary"):
            return str(ev["summary"])
    return None


def reduce_events(
    events: list[Any],
    facts: dict[str, WorkItemFacts] | None = None,
) -> dict[str, WorkItemFacts]:
    """Fold ``events`` (in log order) into facts per WorkItem id; Events without a WorkItem
    are skipped. ``facts``: a starting point, updated in place and returned."""
    out = {} if facts is None else facts
    for e in events:
        wid = e.work_item_id
        if wid:
            out[wid] = reduce_work_item(out.get(wid, WorkItemFacts()), e)
    return out


__all__ = [
    "FOLDED_EVENT_TYPES",
    "INERT_EVENT_TYPES",
    "WORK_ITEM_EVENT_TYPES",
    "EventLike",
    "WorkItemFacts",
    "reduce_events",
    "reduce_work_item",
]
