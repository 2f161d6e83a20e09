"""WorkItem projection helpers shared by the work and lease handlers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ...protocol import (
    EventType,
    Evidence,
    RejectionCode,
    ResourceUsage,
    Transition,
    WorkContract,
    WorkItemState,
    check_transition,
    is_hash,
    new_id,
)
from ._command_scope import Ctx, Reject, dumps, need
from ._store import Row


def load_item(ctx: Ctx, work_item_id: str | None = None) -> Row:
    """The WorkItem row named by the body's ``work_item_id``; rejects ``unknown_work_item``."""
    wid = work_item_id or need(ctx.body, "work_item_id")
    row = ctx.one("work_items.row", ctx.group_id, wid)
    if row is None:
        raise Reject(RejectionCode.UNKNOWN_WORK_ITEM, f"no WorkItem {wid!r}", work_item_id=wid)
    return row


class LeaseKind(StrEnum):
    """The kinds of lease (the ``leases.kind`` column and the ``kind`` of lease Events)."""

    QUEUED = "queued"  # holds an accepted WorkItem until it starts (MW-11.3-a)
    EXECUTION = "execution"  # granted by work.start (MW-11.3-b)
    BLOCKED = "blocked"  # kept by a blocked owner (MW-11.4-c)


#: The code refusing an expired grant, by the grant's kind.
_EXPIRED = {"lease": RejectionCode.LEASE_EXPIRED, "offer": RejectionCode.OFFER_EXPIRED}
#: The Event closing a lease, by its new status.
_LEASE_CLOSED = {
    "released": EventType.LEASE_RELEASED,
    "expired": EventType.LEASE_EXPIRED,
    "revoked": EventType.LEASE_REVOKED,
}


def refuse_expired(ctx: Ctx, row: Row, kind: str, row_id: str) -> None:
    """Refuse a ``kind`` grant (``lease``, ``offer``) whose ``expires_at_ms`` has come.

    Raises:
        Reject: ``<kind>_expired`` with ``<kind>_id`` and ``expires_at_ms``.
    """
    if ctx.now_ms >= row["expires_at_ms"]:
        raise Reject(
            _EXPIRED[kind],
            f"the {kind} has expired",
            **{f"{kind}_id": row_id},
            expires_at_ms=row["expires_at_ms"],
        )


def running_mission(ctx: Ctx, mission_id: str) -> None:
    """Check that the Command's Group has Mission ``mission_id`` and that it is running.

    Raises:
        Reject: ``unknown_mission``; ``mission_closed`` (with its ``state``).
    """
    row = ctx.one("missions.state_by_group_id_mission_id", ctx.group_id, mission_id)
    if row is None:
        raise Reject(
            RejectionCode.UNKNOWN_MISSION, f"no Mission {mission_id!r}", mission_id=mission_id
        )
    if row["state"] != "running":
        raise Reject.wrong_state(
            RejectionCode.MISSION_CLOSED,
            f"Mission {mission_id!r}",
            row["state"],
            mission_id=mission_id,
        )


def gate(ctx: Ctx, item: Row | None, action: str | None = None) -> Transition:
    """Apply the state table (MW-10.2-c) for the Command's action on ``item``."""
    state = WorkItemState(item["state"]) if item is not None else None
    revision = ctx.body.get("revision")
    verdict = check_transition(
        state,
        action or ctx.command.type,
        ctx.roles,
        revision=revision if isinstance(revision, int) else None,
        current_revision=item["revision"] if item is not None else None,
    )
    if isinstance(verdict, Transition):
        return verdict
    raise Reject(verdict.code, verdict.reason, **verdict.detail)


def contract_of(item: Row) -> WorkContract:
    return WorkContract.model_validate_json(item["contract"])


M = TypeVar("M", bound=BaseModel)


def parse(
    model: type[M],
    value: Any,
    field: str,
    *,
    code: RejectionCode = RejectionCode.INVALID_BODY,
    reason: str = "",
) -> M:
    """Validate ``value`` as ``model`` or reject with ``code`` (``invalid_body`` unless told)
    and ``reason``, naming the field and pydantic's errors (``loc``, ``msg``)."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise Reject(
            code,
            reason or f"{field} is not a valid {model.__name__}",
            field=field,
            errors=[{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors()],
        ) from None


def parse_evidence(ctx: Ctx, *, required: bool) -> list[Evidence]:
    raw = ctx.body.get("evidence", [])
    if not isinstance(raw, list):
        raise Reject(RejectionCode.INVALID_BODY, "evidence must be a list", field="evidence")
    out = [parse(Evidence, e, "evidence") for e in raw]
    if required and not out:
        raise Reject(RejectionCode.EVIDENCE_REQUIRED, f"{ctx.command.type} requires Evidence")
    return out


def cited(evidence: Iterable[Evidence]) -> list[str]:
    """The Artifact hashes a list of Evidence references, in order."""
    return [h for e in evidence for h in e.artifacts]


def evidence_hashes(evidence: Iterable[Evidence]) -> list[str]:
    """Every Artifact hash a list of Evidence names: what it cites (``artifacts``) and a
    ``subject`` that is a SHA-256 hash, in order (MW-13.3-d checks them all)."""
    out: list[str] = []
    for e in evidence:
        out.extend(e.artifacts)
        if is_hash(e.subject):
            out.append(e.subject)
    return out


def set_item(ctx: Ctx, item: Row, **cols: Any) -> None:
    """Update columns of ``item``'s row that the fold does not own (``contract``, ``usage``,
    ``child_mission_id``); the others change only with the Event that changes them
    (:mod:`._fold`).

    Raises:
        ValueError: ``cols`` names a folded column.
    """
    ctx.set_work_item(item["group_id"], item["work_item_id"], cols)


def end_leases(ctx: Ctx, item: Row, status: str, reason: str) -> None:
    """Close every active lease of ``item`` with ``status`` (released/expired/revoked)."""
    for lease in ctx.all(
        "leases.active_of_item",
        item["group_id"],
        item["work_item_id"],
    ):
        ctx.run("leases.set_status", status, lease["lease_id"])
        ctx.emit(
            _LEASE_CLOSED[status],
            {"lease_id": lease["lease_id"], "kind": lease["kind"], "reason": reason},
            work_item_id=item["work_item_id"],
        )


def grant_lease(ctx: Ctx, item: Row, kind: LeaseKind, epoch: int, expires_at_ms: int) -> str:
    """Grant the Command's actor an active lease of ``kind`` on ``item``, bound to its Session
    Epoch and ownership ``epoch``, from now until ``expires_at_ms`` (epoch ms); return its
    ``lease_id``. The caller records the grant's Event."""
    lease_id = new_id("lease")
    ctx.run(
        "leases.insert",
        lease_id,
        kind.value,
        item["group_id"],
        item["work_item_id"],
        ctx.command.actor,
        ctx.command.session_epoch,
        epoch,
        ctx.now_ms,
        expires_at_ms,
    )
    return lease_id


def grant_hold(ctx: Ctx, item: Row, epoch: int, start_deadline_ms: int) -> dict[str, Any]:
    """Hold a just-accepted WorkItem under a queued ownership lease (kind ``queued``): bound
    to the owner, its session and ``epoch``, expiring one ``lease_ms`` from now and never
    after ``start_deadline_ms``. The owner renews it with ``lease.renew`` while the item waits
    for a slot (:func:`renew_hold`); ``work.start`` releases it. Implements MW-11.3-a.

    Returns:
        The hold as the grant names it: ``lease_id``, ``kind``, ``ownership_epoch``,
        ``expires_at_ms`` (epoch ms).
    """
    expires = min(ctx.now_ms + contract_of(item).timeouts.lease_ms, start_deadline_ms)
    lease_id = grant_lease(ctx, item, LeaseKind.QUEUED, epoch, expires)
    return {
        "lease_id": lease_id,
        "kind": LeaseKind.QUEUED,
        "ownership_epoch": epoch,
        "expires_at_ms": expires,
    }


def renew_hold(ctx: Ctx, item: Row, hold: Row) -> None:
    """``lease.renew`` of ``item``'s queued ownership lease ``hold``, once :func:`._fence.fence`
    passed it (MW-11.3-a): it is extended by one ``lease_ms``, never past the start deadline,
    and grants no capability token. Emits ``lease.renewed`` (``kind`` ``queued``); replies
    ``expires_at_ms`` (epoch ms). Implements MW-11.3-a."""
    deadline = item["start_deadline_ms"]
    expires = ctx.now_ms + contract_of(item).timeouts.lease_ms
    if deadline is not None:
        expires = min(expires, int(deadline))
    renewals = [*json.loads(hold["renewals"]), ctx.now_ms]
    lease_id = hold["lease_id"]
    ctx.run("leases.set_expires_at_ms_renewals", expires, json.dumps(renewals[-100:]), lease_id)
    ctx.emit(
        EventType.LEASE_RENEWED,
        {"lease_id": lease_id, "kind": LeaseKind.QUEUED, "expires_at_ms": expires,
         "renewal": len(renewals)},
        work_item_id=item["work_item_id"],
    )  # fmt: skip
    ctx.reply.update(expires_at_ms=expires)


def release_hold(ctx: Ctx, item: Row, reason: str) -> None:
    """End ``item``'s queued ownership lease, if it has one (``lease.released``)."""
    if item["lease_id"] is None:
        return
    lease = ctx.one("leases.row", item["lease_id"])
    if lease is not None and lease["kind"] == LeaseKind.QUEUED and lease["status"] == "active":
        ctx.run("leases.set_status", "released", lease["lease_id"])
        ctx.emit(
            EventType.LEASE_RELEASED,
            {"lease_id": lease["lease_id"], "kind": LeaseKind.QUEUED, "reason": reason},
            work_item_id=item["work_item_id"],
        )


def owner_expired(ctx: Ctx, item: Row) -> str | None:
    """Why ``item``'s owner no longer holds it (``start_deadline_missed``,
    ``ownership_lease_expired``: a queued hold not renewed, MW-11.3-a; ``lease_expired``,
    ``blocked_lease_expired``), or ``None`` when the owner is still valid."""
    if item["owner"] is None:
        return None
    state = WorkItemState(item["state"])
    if state is WorkItemState.QUEUED:
        dl = item["start_deadline_ms"]
        if dl is not None and ctx.now_ms >= dl:
            return "start_deadline_missed"
        hold = ctx.one("leases.row", item["lease_id"]) if item["lease_id"] else None
        if (
            hold is not None
            and hold["kind"] == LeaseKind.QUEUED
            and hold["status"] == "active"
            and ctx.now_ms >= hold["expires_at_ms"]
        ):
            return "ownership_lease_expired"
        return None
    lease = ctx.one(
        "leases.latest_active_of_item",
        item["group_id"],
        item["work_item_id"],
    )
    if lease is None:
        return "lease_expired" if state in (WorkItemState.ACTIVE, WorkItemState.BLOCKED) else None
    if ctx.now_ms >= lease["expires_at_ms"]:
        return "blocked_lease_expired" if lease["kind"] == LeaseKind.BLOCKED else "lease_expired"
    return None


def close_owner(ctx: Ctx, item: Row, reason: str) -> None:
    """Close the current ownership: expire its leases and record ``ownership.closed``."""
    end_leases(
        ctx, item, "expired" if "expired" in reason or "missed" in reason else "revoked", reason
    )
    ctx.emit(
        EventType.OWNERSHIP_CLOSED,
        {"owner": item["owner"], "ownership_epoch": item["ownership_epoch"], "reason": reason},
        work_item_id=item["work_item_id"],
    )


def withdraw_offers(ctx: Ctx, item: Row, reason: str, *, keep: str | None = None) -> None:
    for offer in ctx.all(
        "offers.open_of_item",
        item["group_id"],
        item["work_item_id"],
    ):
        if offer["offer_id"] == keep:
            continue
        ctx.run("offers.withdraw", offer["offer_id"])
        ctx.emit(
            EventType.OFFER_WITHDRAWN,
            {
                "offer_id": offer["offer_id"],
                "candidates": json.loads(offer["candidates"]),
                "reason": reason,
            },
            work_item_id=item["work_item_id"],
        )


__all__ = ["dumps"]


def add_usage(used: ResourceUsage, delta: ResourceUsage) -> ResourceUsage:
    """``used`` + ``delta``, for a charge (MW-11.5-i/j).

    Raises:
        Reject: ``budget_exceeded`` — a total would pass 2**53 - 1, the largest integer the
            log can hold (whatever the budget says).
    """
    try:
        return used.plus(delta)
    except OverflowError as exc:
        raise Reject(RejectionCode.BUDGET_EXCEEDED, "a usage total would pass 2**53 - 1",
                     dimensions=exc.args[0]) from None  # fmt: skip


def anchor(ctx: Ctx, group_id: str, work_item_id: str) -> dict[str, Any] | None:
    """The latest ``mission.child_created`` Event of WorkItem ``work_item_id`` in Group
    ``group_id`` (the whole Event as JSON: a child Mission's link's anchor), or ``None``."""
    t = EventType.MISSION_CHILD_CREATED
    row = ctx.one("events.latest_of_item", group_id, t, work_item_id, group_id, t, work_item_id)
    return json.loads(row[0]) if row is not None else None
