"""Handlers for Commands a Worker reports under an execution lease (spec 11.3, 11.4, 11.5).

Every one of them is fenced before the state table is consulted: the body must name the current
``lease_id`` and ``ownership_epoch``, the lease must be the actor's, active, unexpired and bound to
the actor's current Session Epoch. A delayed Command with an old lease id is rejected even when
the epoch is unchanged (MW-11.3-c). The Commands that end an execution or publish its content
(``work.submit``, ``work.fail``, ``artifact.publish``) are in :mod:`._handlers_results`.
"""

from __future__ import annotations

import json

from ...protocol import (
    CommandType,
    EventType,
    ProgressReport,
    RejectionCode,
    ResourceUsage,
    new_id,
)
from ._budgets import charge_work_item
from ._command_scope import Ctx, Reject, need
from ._items import (
    contract_of,
    end_leases,
    gate,
    load_item,
    parse,
    refuse_expired,
    release_hold,
    renew_hold,
)
from ._registry import command
from ._store import Row
from ._tokens import issue_token, public_token


def fence(ctx: Ctx, item: Row) -> Row:
    """Check the lease id and ownership epoch the Command names (MW-11.3-c); return the lease."""
    lease_id = need(ctx.body, "lease_id")
    epoch = need(ctx.body, "ownership_epoch", int)
    lease = ctx.one("leases.row", lease_id)
    if (
        lease is None
        or lease["work_item_id"] != item["work_item_id"]
        or (lease["group_id"] != item["group_id"])
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
        or lease["ownership_epoch"] != item["ownership_epoch"]
        or (item["owner"] != ctx.command.actor)
    ):
        raise Reject(
            RejectionCode.STALE_OWNERSHIP_EPOCH,
            "the Command's ownership epoch is not the current one",
            ownership_epoch=epoch,
            current=item["ownership_epoch"],
        )
    current = item["lease_id"]
    if item["state"] == "blocked" and lease["kind"] == "blocked":
        current = lease_id  # a blocked owner reports under its blocked lease (MW-11.4-c)
    if lease["kind"] == "queued":
        current = None  # a queued ownership lease holds the item; it carries no execution
    if current != lease_id or lease["status"] != "active":
        raise Reject(
            RejectionCode.STALE_LEASE,
            "the Command does not carry the current lease id",
            lease_id=lease_id,
            lease_status=lease["status"],
            current_lease_id=item["lease_id"],
        )
    refuse_expired(ctx, lease, "lease", lease_id)
    if lease["session_epoch"] != ctx.command.session_epoch:
        raise Reject(
            RejectionCode.STALE_SESSION_EPOCH,
            "the lease was granted to another session",
            lease_id=lease_id,
        )
    return lease


def charge_usage(ctx: Ctx, item: Row) -> ResourceUsage | None:
    """Add the body's ``usage`` delta; reject the whole Command on a budget overrun
    (MW-11.5-j)."""
    raw = ctx.body.get("usage")
    if raw is None:
        return None
    total, _ = charge_work_item(ctx, item, parse(ResourceUsage, raw, "usage"))
    return total


@command(CommandType.WORK_START, needs_session=True)
def work_start(ctx: Ctx) -> None:
    """Grant an execution lease bound to agent, session epoch, item and ownership epoch
    (MW-11.3-b), with a capability token that expires no later than it (MW-11.3-d)."""
    item = load_item(ctx)
    epoch = need(ctx.body, "ownership_epoch", int)
    if item["owner"] != ctx.command.actor:
        raise Reject(
            RejectionCode.NOT_OWNER, "only the WorkItem's owner may start it", owner=item["owner"]
        )
    if epoch != item["ownership_epoch"]:
        raise Reject(
            RejectionCode.STALE_OWNERSHIP_EPOCH,
            "the Command's ownership epoch is not current",
            ownership_epoch=epoch,
            current=item["ownership_epoch"],
        )
    gate(ctx, item)
    if item["start_deadline_ms"] is not None and ctx.now_ms >= item["start_deadline_ms"]:
        raise Reject(
            RejectionCode.START_DEADLINE_MISSED,
            "the start deadline has passed",
            start_deadline_ms=item["start_deadline_ms"],
        )
    contract = contract_of(item)
    if contract.approval_required and not item["approved"]:
        raise Reject(
            RejectionCode.APPROVAL_REQUIRED, "execution needs an approval.grant_execution first"
        )
    usage = ResourceUsage.model_validate_json(item["usage"])
    if usage.over(contract.budget):
        raise Reject(RejectionCode.BUDGET_EXCEEDED, "the WorkItem's budget is spent")
    lease_id = new_id("lease")
    expires = ctx.now_ms + contract.timeouts.lease_ms
    lease = {
        "lease_id": lease_id,
        "agent_id": ctx.command.actor,
        "session_epoch": ctx.command.session_epoch,
        "work_item_id": item["work_item_id"],
        "ownership_epoch": epoch,
        "started_at_ms": ctx.now_ms,
        "expires_at_ms": expires,
        "renewals": [],
    }
    ctx.run(
        "leases.insert_execution",
        lease_id,
        item["group_id"],
        item["work_item_id"],
        ctx.command.actor,
        ctx.command.session_epoch,
        epoch,
        ctx.now_ms,
        expires,
    )
    token = issue_token(ctx, lease_id, item, expires)
    checkpoint = json.loads(item["checkpoint"]) if item["checkpoint"] else None
    ctx.emit(
        EventType.WORK_STARTED,
        {"lease": lease, "capability_token": public_token(token), "checkpoint": checkpoint},
        work_item_id=item["work_item_id"],
    )
    release_hold(ctx, item, "started")  # the queued ownership lease ends (MW-11.3-a)
    ctx.reply.update(lease=lease, capability_token=token, checkpoint=checkpoint)


@command(CommandType.LEASE_RENEW, needs_session=True)
def lease_renew(ctx: Ctx) -> None:
    """Renew the current lease: an execution lease (usage charged, a new capability token;
    MW-11.3-d) or, for a queued WorkItem, its queued ownership lease (MW-11.3-a)."""
    item = load_item(ctx)
    if item["state"] == "queued":
        gate(ctx, item)
        renew_hold(ctx, item)
        return
    lease = fence(ctx, item)
    gate(ctx, item)
    usage = charge_usage(ctx, item)
    expires = ctx.now_ms + contract_of(item).timeouts.lease_ms
    renewals = [*json.loads(lease["renewals"]), ctx.now_ms]
    ctx.run(
        "leases.set_expires_at_ms_renewals", expires, json.dumps(renewals[-100:]), lease["lease_id"]
    )
    token = issue_token(ctx, lease["lease_id"], item, expires)
    body: dict[str, object] = {
        "lease_id": lease["lease_id"],
        "expires_at_ms": expires,
        "renewal": len(renewals),
        "capability_token": public_token(token),
    }
    if usage is not None:
        body["usage"] = usage.model_dump()
    ctx.emit(EventType.LEASE_RENEWED, body, work_item_id=item["work_item_id"])
    ctx.reply.update(expires_at_ms=expires, capability_token=token)


@command(CommandType.PROGRESS_REPORT, needs_session=True)
def progress_report(ctx: Ctx) -> None:
    """Structured progress (MW-11.4-a); an optional ``checkpoint`` is stored as the durable
    resume point without releasing the lease (a reassignment resumes from it, MW-11.5-a)."""
    item = load_item(ctx)
    fence(ctx, item)
    gate(ctx, item)
    report = parse(ProgressReport, ctx.body.get("report"), "report")
    cp = ctx.body.get("checkpoint")
    if cp is not None and (not isinstance(cp, dict) or not cp):
        raise Reject(
            RejectionCode.INVALID_BODY, "checkpoint must be a non-empty object", field="checkpoint"
        )
    charge_usage(ctx, item)
    body: dict[str, object] = {
        "lease_id": ctx.body["lease_id"],
        "report": report.model_dump(mode="json"),
    }
    if cp is not None:
        body["checkpoint"] = cp
    ctx.emit(EventType.WORK_PROGRESS_REPORTED, body, work_item_id=item["work_item_id"])


def _checkpoint(ctx: Ctx) -> dict[str, object]:
    cp = ctx.body.get("checkpoint")
    if not isinstance(cp, dict) or not cp:
        raise Reject(
            RejectionCode.CHECKPOINT_REQUIRED,
            "a durable checkpoint is required",
            field="checkpoint",
        )
    return cp


@command(CommandType.WORK_CHECKPOINT, needs_session=True)
def work_checkpoint(ctx: Ctx) -> None:
    """Durable progress releases the execution lease; ownership stays, bounded by a new start
    deadline (spec 10.2, MW-11.3-e, MW-11.3-g)."""
    item = load_item(ctx)
    fence(ctx, item)
    gate(ctx, item)
    cp = _checkpoint(ctx)
    charge_usage(ctx, item)
    end_leases(ctx, item, "released", "checkpoint")
    deadline = ctx.now_ms + contract_of(item).timeouts.start_deadline_ms
    ctx.emit(
        EventType.WORK_CHECKPOINTED,
        {"checkpoint": cp, "state": "queued", "start_deadline_ms": deadline},
        work_item_id=item["work_item_id"],
    )


@command(CommandType.WORK_BLOCK, needs_session=True)
def work_block(ctx: Ctx) -> None:
    """Checkpoint, name the resolution needed, release the slot, keep a bounded blocked lease
    (MW-11.4-c)."""
    item = load_item(ctx)
    fence(ctx, item)
    gate(ctx, item)
    resolution = ctx.body.get("resolution")
    if not resolution or not isinstance(resolution, (str, dict)):
        raise Reject(
            RejectionCode.INVALID_BODY,
            "work.block needs the resolution it needs",
            field="resolution",
        )
    cp = _checkpoint(ctx)
    charge_usage(ctx, item)
    end_leases(ctx, item, "released", "blocked")
    contract = contract_of(item)
    blocked_id = new_id("lease")
    expires = ctx.now_ms + contract.timeouts.blocked_lease_ms
    ctx.run(
        "leases.insert_blocked",
        blocked_id,
        item["group_id"],
        item["work_item_id"],
        ctx.command.actor,
        ctx.command.session_epoch,
        item["ownership_epoch"],
        ctx.now_ms,
        expires,
    )
    ctx.emit(
        EventType.WORK_BLOCKED,
        {
            "resolution": resolution,
            "checkpoint": cp,
            "state": "blocked",
            "blocked_lease_id": blocked_id,
            "blocked_lease_expires_at_ms": expires,
        },
        work_item_id=item["work_item_id"],
    )
