"""Handlers for Commands a Worker reports under an execution lease (spec 11.3, 11.4, 11.5).

Every one of them is fenced (:func:`._fence.fence`, MW-11.3-c) before the state table is
consulted: the body must name the current ``lease_id`` and ``ownership_epoch``, the lease must be
the actor's, active, unexpired and (but for a queued ownership lease) bound to the actor's current
Session Epoch. A delayed Command with an old lease id is rejected even when the epoch is
unchanged. The Commands that end an execution or publish its content
(``work.submit``, ``work.fail``, ``artifact.publish``) are in :mod:`._handlers_results`.
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol import (
    CommandType,
    EventType,
    ProgressReport,
    RejectionCode,
    ResourceUsage,
)
from ._budgets import charge_work_item
from ._command_scope import Ctx, Reject, need
from ._fence import fence
from ._items import (
    LeaseKind,
    contract_of,
    end_leases,
    gate,
    grant_lease,
    load_item,
    parse,
    release_hold,
    renew_hold,
)
from ._registry import command
from ._store import Row
from ._tokens import issue_token, public_token


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
    expires = ctx.now_ms + contract.timeouts.lease_ms
    lease_id = grant_lease(ctx, item, LeaseKind.EXECUTION, epoch, expires)
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
    """Renew the current lease, once :func:`fence` passed it: an execution lease (usage
    charged, a new capability token; MW-11.3-d) or, for a queued WorkItem, its queued ownership
    lease (:func:`._items.renew_hold`, MW-11.3-a)."""
    item = load_item(ctx)
    lease = fence(ctx, item)
    gate(ctx, item)
    if lease["kind"] == LeaseKind.QUEUED:  # the fence passes a hold only to a queued WorkItem
        renew_hold(ctx, item, lease)
        return
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
    body = progress_body(ctx, ctx.body["lease_id"])
    charge_usage(ctx, item)
    ctx.emit(EventType.WORK_PROGRESS_REPORTED, body, work_item_id=item["work_item_id"])


def progress_body(ctx: Ctx, lease_id: str) -> dict[str, Any]:
    """The ``work.progress_reported`` body of a ``progress.report``, online or reconciled from
    an offline buffer (MW-11.4-a, MW-11.5-h): ``lease_id``, the body's ``report`` as a
    :class:`~missionweave.protocol.ProgressReport` and its optional ``checkpoint``.

    Raises:
        Reject: ``invalid_body`` — ``report`` is not a valid ProgressReport, or ``checkpoint``
            is present but not a non-empty object.
    """
    report = parse(ProgressReport, ctx.body.get("report"), "report")
    cp = ctx.body.get("checkpoint")
    if cp is not None and (not isinstance(cp, dict) or not cp):
        raise Reject(
            RejectionCode.INVALID_BODY, "checkpoint must be a non-empty object", field="checkpoint"
        )
    body: dict[str, Any] = {"lease_id": lease_id, "report": report.model_dump(mode="json")}
    if cp is not None:
        body["checkpoint"] = cp
    return body


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
    Implements MW-11.4-c."""
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
    expires = ctx.now_ms + contract_of(item).timeouts.blocked_lease_ms
    blocked_id = grant_lease(ctx, item, LeaseKind.BLOCKED, item["ownership_epoch"], expires)
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
