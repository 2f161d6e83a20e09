"""Bounded offline execution on the Authority (spec 11.5, MW-11.5-f to j).

Which Commands come here is decided by :func:`._dispatch.handler_for` (those carrying the
bounded-offline binding). :func:`reconcile` applies one buffered, rebased progress Command as
one authoritative transaction (MW-11.5-h/i/j): check the binding against the historical lease,
charge the offline resource delta to the WorkItem and its whole budget ancestry (WorkItem →
Mission → parent Missions) with a ``resource_usage_recorded`` Event naming both sessions, then
apply the report and checkpoint (the charging itself, shared with online submissions:
:mod:`._budgets`). Any refusal — a budget overrun included — writes nothing.

The rule that an outage of the Authority never costs an owner its lease lives in
:mod:`._outages`.

Every SQL statement of this feature is one of the small named functions at the top.
"""

from __future__ import annotations

import json
import logging

from ...protocol import (
    BOUNDED_OFFLINE_EXECUTION,
    BUFFERABLE_COMMANDS,
    RESOURCE_USAGE_RECORDED,
    EventType,
    OfflineBinding,
    RejectionCode,
    ResourceUsage,
    WorkItemState,
    transition_for,
)
from ._budgets import charge_work_item
from ._command_scope import Ctx, Reject
from ._handlers_lease import progress_body
from ._items import LeaseKind, contract_of, gate, load_item, owner_expired, parse
from ._store import Row

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------ reads


def _lease_row(ctx: Ctx, lease_id: str) -> Row | None:
    return ctx.one("leases.row", lease_id)


# ----------------------------------------------------------------------- reconciliation


def _superseded_by_own_session(ctx: Ctx, lease: Row, item: Row) -> bool:
    """The lease was revoked only because its agent opened a new session (it restarted while
    cut off: the ``lease.revoked`` Event says ``session_replaced``) and nothing happened to the
    WorkItem since — still queued at the same owner and ownership epoch (checked before), no
    new lease: its buffered progress still belongs. The one exception to "after the lease was
    closed" (MW-11.5-h), which MW-11.5-g/i need; the argument: ``docs/spec/READINGS.md``."""
    if not (
        lease["status"] == "revoked"
        and lease["session_epoch"] < ctx.command.session_epoch
        and WorkItemState(item["state"]) is WorkItemState.QUEUED
        and item["lease_id"] is None
    ):
        return False
    row = ctx.one(
        "events.latest_of_item", item["group_id"], EventType.LEASE_REVOKED, item["work_item_id"],
        item["group_id"], EventType.LEASE_REVOKED, item["work_item_id"],
    )  # fmt: skip
    revoked = json.loads(row[0])["body"] if row is not None else {}
    return revoked.get("lease_id") == lease["lease_id"] and revoked.get("reason") == (
        "session_replaced"
    )


def _refuse_without_role(ctx: Ctx) -> None:
    """The reconciling actor holds, now, a role the state table gives the Command (progress is
    a ``worker``'s): an owner that lost the role is refused as it is online, whichever path —
    a live lease or :func:`_superseded_by_own_session` — its progress would take
    (MW-11.5-h, MW-10.2-c).

    Raises:
        Reject: ``role_not_allowed`` (``needed``: the roles the table allows).
    """
    row = transition_for(ctx.command.type)
    allowed = row.roles if row is not None else frozenset()
    if not allowed & ctx.roles:  # Implements MW-11.5-h: a changed owner is no owner
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED,
            f"{ctx.command.type} needs the {' or '.join(sorted(allowed))} role",
            needed=sorted(allowed),
        )


def _refuse_lapsed(ctx: Ctx, item: Row, lease: Row, grace_deadline_ms: int) -> None:
    """Refuse progress arriving once the owner's hold lapsed, as online (MW-11.5-h): at or past
    the lease's expiry plus the contract's ``offline_grace_ms`` (``grace_deadline_ms``; the
    expiry as the Authority holds it, outages credited, MW-11.5-c), or — the WorkItem back in
    ``queued`` after the agent's own restart — once its start deadline or queued hold passed
    (:func:`._items.owner_expired`). The reading: ``docs/spec/READINGS.md`` (MW-11.5-h, the
    window).

    Raises:
        Reject: ``lease_expired`` (``lease_id``, ``expires_at_ms``, ``grace_deadline_ms``,
            ``lapsed``: why the hold ended).
    """
    lapsed = "lease_expired" if ctx.now_ms >= grace_deadline_ms else None
    if lapsed is None and WorkItemState(item["state"]) is WorkItemState.QUEUED:
        lapsed = owner_expired(ctx, item)
    if lapsed is not None:  # Implements MW-11.5-h: the same report online is lease_expired
        raise Reject(
            RejectionCode.LEASE_EXPIRED,
            "the lease and its offline grace ended before the progress arrived",
            lease_id=lease["lease_id"],
            expires_at_ms=lease["expires_at_ms"],
            grace_deadline_ms=grace_deadline_ms,
            lapsed=lapsed,
        )


def reconcile(ctx: Ctx) -> None:
    """Apply one buffered progress Command (MW-11.5-h/i/j): check its binding, charge its
    offline delta with a ``resource_usage_recorded`` Event naming the historical and the
    reconciling session, then record the report (and checkpoint) as ``work.progress_reported``
    with ``reconciled`` set. Implements MW-11.5-h and MW-11.5-i.

    Rejections (each writes nothing): ``extension_not_applicable`` (not a progress Command),
    ``invalid_body`` (a malformed binding or report, or a ``usage`` in the body: the delta is
    the binding's), ``outside_work_item`` (binding, body and lease name different WorkItems,
    Groups, leases or agents), ``owner_changed`` (the WorkItem has another owner or ownership
    epoch), ``role_not_allowed`` (the actor lost the worker role, :func:`_refuse_without_role`),
    ``outside_grace_window`` (buffered before the lease or after its expiry plus the contract's
    ``offline_grace_ms``), ``lease_expired`` (arriving at or after that expiry plus grace, or
    once a queued hold lapsed, :func:`_refuse_lapsed`), ``lease_closed`` (the lease ended —
    released, expired, revoked — other than by the agent's own restart,
    :func:`_superseded_by_own_session`), ``budget_exceeded`` (the WorkItem's or an ancestor
    Mission's budget).
    """
    cmd = ctx.command
    if cmd.type not in BUFFERABLE_COMMANDS:
        raise Reject(
            RejectionCode.EXTENSION_NOT_APPLICABLE,
            f"{cmd.type} cannot be buffered offline",
            type=cmd.type,
            bufferable=sorted(BUFFERABLE_COMMANDS),
        )
    b = parse(OfflineBinding, cmd.extensions[BOUNDED_OFFLINE_EXECUTION], "extensions")
    if "usage" in ctx.body:
        raise Reject(
            RejectionCode.INVALID_BODY,
            "a buffered Command charges the binding's usage",
            field="usage",
        )
    named = (
        ctx.body.get("work_item_id"),
        ctx.body.get("lease_id"),
        ctx.body.get("ownership_epoch"),
    )
    if (b.agent_id, b.group_id) != (cmd.actor, cmd.group_id) or named != (
        b.work_item_id,
        b.lease_id,
        b.ownership_epoch,
    ):
        raise Reject(
            RejectionCode.OUTSIDE_WORK_ITEM,
            "the binding does not match the Command",
            binding_work_item_id=b.work_item_id,
            work_item_id=ctx.body.get("work_item_id"),
        )
    item = load_item(ctx)
    _refuse_without_role(ctx)
    lease = _lease_row(ctx, b.lease_id)
    if (
        lease is None
        or (lease["group_id"], lease["work_item_id"]) != (item["group_id"], item["work_item_id"])
        or LeaseKind(lease["kind"]) is not LeaseKind.EXECUTION
        or lease["agent_id"] != cmd.actor
        or lease["session_epoch"] != b.session_epoch
        or lease["ownership_epoch"] != b.ownership_epoch
    ):
        raise Reject(
            RejectionCode.OUTSIDE_WORK_ITEM,
            "no such execution lease of this agent and WorkItem",
            lease_id=b.lease_id,
            work_item_id=b.work_item_id,
        )
    if item["owner"] != cmd.actor or item["ownership_epoch"] != b.ownership_epoch:
        raise Reject(
            RejectionCode.OWNER_CHANGED,
            "the WorkItem changed owner since the lease was granted",
            ownership_epoch=b.ownership_epoch,
            current=item["ownership_epoch"],
        )
    grace = lease["expires_at_ms"] + contract_of(item).timeouts.offline_grace_ms
    if not (
        lease["started_at_ms"] <= b.disconnected_at_ms <= b.buffered_at_ms <= grace
        and b.grace_deadline_ms <= grace
    ):
        raise Reject(
            RejectionCode.OUTSIDE_GRACE_WINDOW,
            "the buffered progress falls outside the lease and its grace period",
            buffered_at_ms=b.buffered_at_ms,
            lease_started_at_ms=lease["started_at_ms"],
            grace_deadline_ms=grace,
        )
    _refuse_lapsed(ctx, item, lease, grace)
    active = lease["status"] == "active" and item["lease_id"] == b.lease_id
    if not active and not _superseded_by_own_session(ctx, lease, item):
        raise Reject(
            RejectionCode.LEASE_CLOSED,
            "the lease was closed before the progress arrived",
            lease_id=b.lease_id,
            lease_status=lease["status"],
            state=item["state"],
        )
    if active:
        gate(ctx, item)
    body = progress_body(ctx, b.lease_id)
    wid = item["work_item_id"]
    if b.usage != ResourceUsage():
        total, missions = charge_work_item(ctx, item, b.usage)
        totals = {"work_item": total.model_dump(), "missions": missions}
        ctx.emit(
            RESOURCE_USAGE_RECORDED,
            {
                "delta": b.usage.model_dump(),
                "totals": totals,
                "historical_session": {
                    "agent_id": b.agent_id,
                    "session_epoch": b.session_epoch,
                    "lease_id": b.lease_id,
                    "ownership_epoch": b.ownership_epoch,
                },
                "reconciling_session": {
                    "agent_id": cmd.actor,
                    "session_epoch": cmd.session_epoch,
                    "membership_epoch": cmd.membership_epoch,
                },
                "buffered_at_ms": b.buffered_at_ms,
                "disconnected_at_ms": b.disconnected_at_ms,
            },
            work_item_id=wid,
        )
    body["reconciled"] = {"buffered_at_ms": b.buffered_at_ms, "session_epoch": b.session_epoch}
    ctx.emit(EventType.WORK_PROGRESS_REPORTED, body, work_item_id=wid)


__all__ = ["reconcile"]
