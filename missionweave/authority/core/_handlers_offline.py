"""Bounded offline execution on the Authority (spec 11.5, MW-11.5-f to j).

* :func:`handler_for` decides how a Command is applied: one naming a critical extension this
  Authority does not know is rejected (``unsupported_extension``); one carrying the
  bounded-offline binding goes to :func:`reconcile`; any other to its ordinary handler.
* :func:`reconcile` applies one buffered, rebased progress Command as one authoritative
  transaction (MW-11.5-h/i/j): check the binding against the historical lease, charge the
  offline resource delta to the WorkItem and its whole budget ancestry (WorkItem → Mission →
  parent Missions) with a ``resource_usage_recorded`` Event naming both sessions, then apply
  the report and checkpoint. Any refusal — a budget overrun included — writes nothing.

The rule that an outage of the Authority never costs an owner its lease lives in
:mod:`._outages`.

Every SQL statement of this feature is one of the small named functions at the top.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ...protocol import (
    BOUNDED_OFFLINE_EXECUTION,
    BUFFERABLE_COMMANDS,
    KNOWN_EXTENSIONS,
    RESOURCE_USAGE_RECORDED,
    Budget,
    Command,
    OfflineBinding,
    ProgressReport,
    ResourceUsage,
)
from ._command_scope import Ctx, Reject, dumps
from ._items import add_usage, contract_of, gate, load_item, parse, set_item
from ._registry import HANDLERS, Handler
from ._store import Row

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------ reads


def _lease_row(ctx: Ctx, lease_id: str) -> Row | None:
    return ctx.one("leases.row", lease_id)


def _mission_row(ctx: Ctx, group_id: str, mission_id: str) -> Row | None:
    return ctx.one("missions.parent_and_usage", group_id, mission_id)


def _save_mission_usage(
    ctx: Ctx, group_id: str, mission_id: str, budget: str | None, usage: ResourceUsage
) -> None:
    ctx.run("mission_usage.save_usage", group_id, mission_id, budget, usage.model_dump_json())


def _save_mission_budget(ctx: Ctx, mission_id: str, budget: Budget) -> None:
    ctx.run(
        "mission_usage.save_budget",
        ctx.group_id,
        mission_id,
        budget.model_dump_json(),
        ResourceUsage().model_dump_json(),
    )


# ------------------------------------------------------------------------- extensions


def handler_for(cmd: Command) -> Handler:
    """The function that applies ``cmd``: :func:`reconcile` for a Command carrying the
    bounded-offline binding, else the registered handler of its type.

    Raises:
        Reject: ``unsupported_extension`` — a critical extension this Authority does not know
            (MW-11.5-f), or one named critical but absent from ``extensions``.
    """
    for urn in cmd.critical_extensions:
        if urn not in KNOWN_EXTENSIONS:
            raise Reject(
                "unsupported_extension",
                "the Command needs an extension this Authority does not know",
                extension=urn,
            )
        if urn not in cmd.extensions:
            raise Reject(
                "unsupported_extension", "a critical extension has no value", extension=urn
            )
    if BOUNDED_OFFLINE_EXECUTION in cmd.extensions:
        if BOUNDED_OFFLINE_EXECUTION not in cmd.critical_extensions:
            raise Reject(
                "invalid_command",
                "the bounded-offline binding must be critical",
                extension=BOUNDED_OFFLINE_EXECUTION,
            )
        return reconcile
    return HANDLERS[cmd.type].fn


# ---------------------------------------------------------------------------- budgets


def record_mission_budget(ctx: Ctx, mission_id: str, raw: Any) -> None:
    """Store a Mission's budget (``mission.create``'s optional ``budget``): every charge to
    one of its WorkItems, or to a child Mission's, counts against it.

    Raises:
        Reject: ``invalid_body`` — ``raw`` is not a :class:`Budget`.
    """
    if raw is not None:
        _save_mission_budget(ctx, mission_id, parse(Budget, raw, "budget"))


def charge_ancestry(ctx: Ctx, item: Row, delta: ResourceUsage) -> list[dict[str, Any]]:
    """Add ``delta`` to the usage of ``item``'s Mission and each parent Mission (the WorkItem
    itself is the caller's); the new totals, nearest first.

    Raises:
        Reject: ``budget_exceeded`` naming the Mission whose budget it would overrun
            (MW-11.5-j); the caller's savepoint then writes nothing.
    """
    totals: list[dict[str, Any]] = []
    group, mission, seen = item["group_id"], item["mission_id"], set()
    while mission and mission not in seen:
        seen.add(mission)
        row = _mission_row(ctx, group, mission)
        if row is None:
            break
        used = ResourceUsage.model_validate_json(row["usage"]) if row["usage"] else None
        total = add_usage(used or ResourceUsage(), delta)
        if row["budget"]:
            over = total.over(Budget.model_validate_json(row["budget"]))
            if over:
                raise Reject(
                    "budget_exceeded",
                    "the usage exceeds the Mission's budget",
                    scope="mission",
                    mission_id=mission,
                    dimensions=over,
                    usage=total.model_dump(),
                )
        _save_mission_usage(ctx, group, mission, row["budget"], total)
        totals.append({"mission_id": mission, "usage": total.model_dump()})
        parent = json.loads(row["parent"]) if row["parent"] else None
        mission = parent.get("mission_id") if isinstance(parent, dict) else None
    return totals


def charge_work_item(
    ctx: Ctx, item: Row, delta: ResourceUsage
) -> tuple[ResourceUsage, list[dict[str, Any]]]:
    """Add ``delta`` to ``item``'s usage and to its whole budget ancestry (MW-11.5-i); the
    WorkItem's new total and the Missions' (:func:`charge_ancestry`).

    Raises:
        Reject: ``budget_exceeded`` (``scope`` ``work_item`` or ``mission``) when a total
            would overrun its budget (MW-11.5-j); the caller's savepoint then writes nothing.
    """
    total = add_usage(ResourceUsage.model_validate_json(item["usage"]), delta)
    over = total.over(contract_of(item).budget)
    if over:
        raise Reject(
            "budget_exceeded",
            "the usage exceeds the contract's budget",
            scope="work_item",
            dimensions=over,
            usage=total.model_dump(),
        )
    missions = charge_ancestry(ctx, item, delta)
    set_item(ctx, item, usage=total.model_dump_json())
    return total, missions


# ----------------------------------------------------------------------- reconciliation


def _superseded_by_own_session(ctx: Ctx, lease: Row, item: Row) -> bool:
    """The lease was revoked only because its agent opened a new session (it restarted while
    cut off) and nobody took the WorkItem since: its buffered progress still belongs."""
    return (
        lease["status"] == "revoked"
        and lease["session_epoch"] < ctx.command.session_epoch
        and item["state"] == "queued"
        and item["lease_id"] is None
    )


def reconcile(ctx: Ctx) -> None:
    """Apply one buffered progress Command (MW-11.5-h/i/j): check its binding, charge its
    offline delta with a ``resource_usage_recorded`` Event naming the historical and the
    reconciling session, then record the report (and checkpoint) as ``work.progress_reported``
    with ``reconciled`` set.

    Rejections (each writes nothing): ``extension_not_applicable`` (not a progress Command),
    ``invalid_body`` (a malformed binding or report, or a ``usage`` in the body: the delta is
    the binding's), ``outside_work_item`` (binding, body and lease name different WorkItems,
    Groups, leases or agents), ``owner_changed`` (the WorkItem has another owner or ownership
    epoch), ``outside_grace_window`` (buffered before the lease or after its expiry plus the
    contract's ``offline_grace_ms``), ``lease_closed`` (the lease ended — released, expired,
    revoked — other than by the agent's own restart), ``budget_exceeded`` (the WorkItem's or
    an ancestor Mission's budget).
    """
    cmd = ctx.command
    if cmd.type not in BUFFERABLE_COMMANDS:
        raise Reject(
            "extension_not_applicable",
            f"{cmd.type} cannot be buffered offline",
            type=cmd.type,
            bufferable=sorted(BUFFERABLE_COMMANDS),
        )
    b = parse(OfflineBinding, cmd.extensions[BOUNDED_OFFLINE_EXECUTION], "extensions")
    if "usage" in ctx.body:
        raise Reject(
            "invalid_body", "a buffered Command charges the binding's usage", field="usage"
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
            "outside_work_item",
            "the binding does not match the Command",
            binding_work_item_id=b.work_item_id,
            work_item_id=ctx.body.get("work_item_id"),
        )
    item = load_item(ctx)
    lease = _lease_row(ctx, b.lease_id)
    if (
        lease is None
        or (lease["group_id"], lease["work_item_id"]) != (item["group_id"], item["work_item_id"])
        or lease["kind"] != "execution"
        or lease["agent_id"] != cmd.actor
        or lease["session_epoch"] != b.session_epoch
        or lease["ownership_epoch"] != b.ownership_epoch
    ):
        raise Reject(
            "outside_work_item",
            "no such execution lease of this agent and WorkItem",
            lease_id=b.lease_id,
            work_item_id=b.work_item_id,
        )
    if item["owner"] != cmd.actor or item["ownership_epoch"] != b.ownership_epoch:
        raise Reject(
            "owner_changed",
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
            "outside_grace_window",
            "the buffered progress falls outside the lease and its grace period",
            buffered_at_ms=b.buffered_at_ms,
            lease_started_at_ms=lease["started_at_ms"],
            grace_deadline_ms=grace,
        )
    active = lease["status"] == "active" and item["lease_id"] == b.lease_id
    if not active and not _superseded_by_own_session(ctx, lease, item):
        raise Reject(
            "lease_closed",
            "the lease was closed before the progress arrived",
            lease_id=b.lease_id,
            lease_status=lease["status"],
            state=item["state"],
        )
    if active:
        gate(ctx, item)
    report = parse(ProgressReport, ctx.body.get("report"), "report")
    cp = ctx.body.get("checkpoint")
    if cp is not None and (not isinstance(cp, dict) or not cp):
        raise Reject("invalid_body", "checkpoint must be a non-empty object", field="checkpoint")
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
    body: dict[str, Any] = {
        "lease_id": b.lease_id,
        "report": report.model_dump(mode="json"),
        "reconciled": {"buffered_at_ms": b.buffered_at_ms, "session_epoch": b.session_epoch},
    }
    if cp is not None:
        set_item(ctx, item, checkpoint=dumps(cp))
        body["checkpoint"] = cp
    ctx.emit("work.progress_reported", body, work_item_id=wid)


__all__ = [
    "charge_ancestry",
    "charge_work_item",
    "handler_for",
    "reconcile",
    "record_mission_budget",
]
