"""The lease fence (MW-11.3-c): the one check every Command reported under a lease passes
before the state table is consulted — ``lease.renew`` of a queued ownership lease
(MW-11.3-a), of an execution lease, of a blocked lease (MW-11.4-c), and every Command an
execution reports (progress, checkpoint, block, submit, fail, publish, token rotation).
"""

from __future__ import annotations

from ...protocol import CommandType, RejectionCode, WorkItemState
from ._command_scope import Ctx, Reject, need
from ._items import LeaseKind, refuse_expired
from ._store import Row


def fence(ctx: Ctx, item: Row) -> Row:
    """Check that the Command holds ``item``'s current lease (MW-11.3-c) and return its row.

    The body names ``lease_id`` and ``ownership_epoch`` (int). The lease must be this
    WorkItem's, the actor's, of the WorkItem's current ownership epoch and owner, the current
    one (:func:`_current_lease_id`), ``active`` and unexpired; an execution or blocked lease
    must also be bound to the actor's current Session Epoch. A queued ownership lease is the
    agent's, not a session's: any session of the owning agent renews it (a replaced runtime's
    successor starts the item; MW-11.3-a). A delayed Command with an old lease id is refused
    even when the epoch is unchanged. Implements MW-11.3-c.

    Returns:
        The lease's row (``leases.row``).

    Raises:
        Reject: ``invalid_body`` (a field missing or mistyped), ``unknown_lease`` (no such
            lease of this WorkItem), ``not_owner`` (another agent's lease),
            ``stale_ownership_epoch`` (the epoch or owner moved on), ``stale_lease`` (not the
            current lease, or no longer active), ``lease_expired``, ``stale_session_epoch``.
    """
    lease_id = need(ctx.body, "lease_id")
    epoch = need(ctx.body, "ownership_epoch", int)
    lease = ctx.one("leases.row", lease_id)
    if lease is None or (lease["group_id"], lease["work_item_id"]) != (
        item["group_id"],
        item["work_item_id"],
    ):
        raise Reject(
            RejectionCode.UNKNOWN_LEASE, "no such lease for this WorkItem", lease_id=lease_id
        )
    if lease["agent_id"] != ctx.command.actor:
        raise Reject(
            RejectionCode.NOT_OWNER, "the lease belongs to another agent", lease_id=lease_id
        )
    if (
        epoch != item["ownership_epoch"]
        or lease["ownership_epoch"] != epoch
        or item["owner"] != ctx.command.actor
    ):
        raise Reject(
            RejectionCode.STALE_OWNERSHIP_EPOCH,
            "the Command's ownership epoch is not the current one",
            ownership_epoch=epoch,
            current=item["ownership_epoch"],
        )
    if _current_lease_id(ctx, item, lease) != lease_id or lease["status"] != "active":
        raise Reject(
            RejectionCode.STALE_LEASE,
            "the Command does not carry the current lease id",
            lease_id=lease_id,
            lease_status=lease["status"],
            current_lease_id=item["lease_id"],
        )
    refuse_expired(ctx, lease, "lease", lease_id)
    if (
        LeaseKind(lease["kind"]) is not LeaseKind.QUEUED
        and lease["session_epoch"] != ctx.command.session_epoch
    ):
        raise Reject(
            RejectionCode.STALE_SESSION_EPOCH,
            "the lease was granted to another session",
            lease_id=lease_id,
        )
    return lease


def _current_lease_id(ctx: Ctx, item: Row, lease: Row) -> str | None:
    """The lease id a Command of kind ``lease``'s must carry on ``item`` (``None``: none will
    do). The WorkItem's ``lease_id`` column is its execution lease while ``active`` and its
    queued ownership lease while ``queued`` (:func:`._fold.facts_of`)."""
    state = WorkItemState(item["state"])
    kind = LeaseKind(lease["kind"])
    current: str | None = item["lease_id"]
    if kind is LeaseKind.QUEUED:
        # a queued ownership lease holds the item but carries no execution: only its renewal
        # names it (MW-11.3-a)
        renewing = ctx.command.type == CommandType.LEASE_RENEW
        return current if renewing and state is WorkItemState.QUEUED else None
    if kind is LeaseKind.BLOCKED and state is WorkItemState.BLOCKED:
        current = lease["lease_id"]  # a blocked owner reports under its blocked lease (MW-11.4-c)
    return current
