"""Budget charging on the Authority (MW-11.5-i/j, MW-10.4-d): a WorkItem's usage and its whole
budget ancestry (WorkItem → Mission → parent Missions), online or reconciled after an outage.

A parent link names the parent's Group (:func:`._handlers_children.verify_parent`). Inside
the charging Group the ancestry is charged in the Command's transaction; a parent in another
Group is never written from here (no cross-Group transaction, spec 10.4): the charge stops at
the Group's edge with a ``mission.usage_forwarded`` Event naming the parent and the delta, and
the parent's Coordinator applies it in the parent's Group with ``mission.charge_child_usage``,
citing that Event by Group, sequence and hash — the Authority checks the citation against the
child Group's log and applies each forwarded Event once.
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol import Budget, CommandType, EventType, RejectionCode, ResourceUsage, Role
from ._command_scope import Ctx, Reject, need, need_id
from ._items import add_usage, anchor, contract_of, parse, set_item
from ._registry import command
from ._store import Row

USAGE_FORWARDED = EventType.MISSION_USAGE_FORWARDED
CHILD_USAGE_CHARGED = EventType.MISSION_CHILD_USAGE_CHARGED


def record_mission_budget(
    ctx: Ctx, mission_id: str, raw: Any, allowance: dict[str, Any] | None = None
) -> Budget | None:
    """Store a Mission's budget (``mission.create``'s optional ``budget``): every charge to
    one of its WorkItems, or to a child Mission's, counts against it. A child Mission of a
    parent in another Group also holds the ``allowance`` the parent's Group reserved for it
    (its ``mission.child_created``; :data:`LIMITS` names, each a limit): each dimension is
    bounded by the tighter of the two, here, locally (MW-10.4-d). Implements MW-11.5-j.

    Returns:
        The budget stored, or ``None`` (no limit).

    Raises:
        Reject: ``invalid_body`` — ``raw`` is not a :class:`Budget`.
    """
    budget = parse(Budget, raw, "budget") if raw is not None else None
    if allowance:
        budget = _within(budget or Budget(wall_clock_ms=None), allowance)
    if budget is not None:
        ctx.run(
            "mission_usage.save_budget",
            ctx.group_id,
            mission_id,
            budget.model_dump_json(),
            ResourceUsage().model_dump_json(),
        )
    return budget


#: The six dimensions of a :class:`ResourceUsage` (an allowance is keyed by them).
LIMITS = tuple(ResourceUsage.model_fields)


def _limits(budget: Budget) -> dict[str, int | None]:
    """``budget``'s limit in each :data:`LIMITS` dimension (``None``: none)."""
    out: dict[str, int | None] = {d: getattr(budget, d, None) for d in LIMITS}
    out["money_minor_units"] = budget.money.amount_minor_units if budget.money else None
    return out


def _within(budget: Budget, allowance: dict[str, Any]) -> Budget:
    """``budget`` with each dimension the ``allowance`` bounds lowered to it (money keeps the
    budget's currency, or takes ``allowance["currency"]``)."""
    update: dict[str, Any] = {}
    for dim, cap in allowance.items():
        if dim == "money_minor_units":
            own = budget.money
            amount = min(cap, own.amount_minor_units) if own else cap
            currency = own.currency if own else str(allowance.get("currency", "EUR"))
            update["money"] = {"amount_minor_units": amount, "currency": currency}
        elif dim in LIMITS:
            own_cap = getattr(budget, dim)
            update[dim] = cap if own_cap is None else min(cap, own_cap)
    return Budget.model_validate({**budget.model_dump(mode="json"), **update})


def reserve_allowance(ctx: Ctx, item: Row, raw: Any) -> dict[str, Any] | None:
    """At ``mission.create_child`` of a child in another Group: reserve the child's
    ``allowance`` from the parent Mission's budget and every budget above it in this Group,
    as usage, in this Command's transaction; the child's Group then bounds the child by it
    (:func:`record_mission_budget`), so no charge ever needs to cross the Groups' edge to keep
    a budget (MW-11.5-j without a cross-Group transaction, MW-10.4-d). The child's forwarded
    usage is then drawn from the reservation (:func:`mission_charge_child_usage`).

    Args:
        raw: the Command's ``allowance``: a :class:`Budget` (``None``: none). Only the
            dimensions it names with a value bound the child (no default applies).

    Returns:
        The allowance reserved, keyed by :data:`LIMITS` (plus ``currency`` for money), or
        ``None`` when the ancestry has no budget and no allowance was given.

    Raises:
        Reject: ``invalid_body`` (not a Budget); ``allowance_required`` (``dimensions``: a
            budget of the ancestry bounds them and the allowance does not);
            ``budget_exceeded`` (the ancestry cannot spare it). Implements MW-11.5-j.
    """
    given = _limits(parse(Budget, raw, "allowance")) if raw is not None else {}
    named = [
        "money_minor_units" if k == "money" else k
        for k, v in (raw.items() if isinstance(raw, dict) else ())
        if v is not None
    ]
    allowance: dict[str, int] = {d: v for d in named if (v := given.get(d)) is not None}
    bounded = _bounded_dimensions(ctx, item["mission_id"])
    open_dims = sorted(d for d in bounded if d not in allowance)
    if open_dims:  # Implements MW-11.5-j: an unbounded child could overrun the parent
        raise Reject(
            RejectionCode.ALLOWANCE_REQUIRED,
            "the parent's budget bounds dimensions the child's allowance leaves open",
            dimensions=open_dims,
        )
    if not allowance:
        return None
    reserved = ResourceUsage.model_validate({d: v for d, v in allowance.items()})
    charge_missions(ctx, item["mission_id"], reserved, via=item["work_item_id"], forward=False)
    out: dict[str, Any] = {**allowance}
    if isinstance(raw, dict) and isinstance(raw.get("money"), dict):
        out["currency"] = raw["money"]["currency"]
    return out


def _bounded_dimensions(ctx: Ctx, mission_id: str) -> set[str]:
    """The :data:`LIMITS` dimensions some budget bounds on Mission ``mission_id`` of this Group
    and its parents in this Group."""
    out: set[str] = set()
    mission: str | None = mission_id
    seen: set[str] = set()
    while mission and mission not in seen:
        seen.add(mission)
        row = ctx.one("missions.parent_and_usage", ctx.group_id, mission)
        if row is None:
            break
        if row["budget"]:
            limits = _limits(Budget.model_validate_json(row["budget"]))
            out |= {d for d, v in limits.items() if v is not None}
        parent = json.loads(row["parent"]) if row["parent"] else None
        if not isinstance(parent, dict) or parent.get("group_id") != ctx.group_id:
            break
        mission = parent.get("mission_id")
    return out


def _beyond_reservation(
    reserved: dict[str, int], before: ResourceUsage, delta: ResourceUsage
) -> ResourceUsage:
    """The part of ``delta`` a child's reservation does not cover, the child's earlier charges
    (``before``) drawn from it first: in each dimension ``reserved`` names,
    ``max(0, before + delta - reserved) - max(0, before - reserved)``; elsewhere ``delta``."""
    out: dict[str, int] = {}
    for d in LIMITS:
        a, b = getattr(before, d), getattr(delta, d)
        cap = reserved.get(d)
        out[d] = b if cap is None else max(0, a + b - cap) - max(0, a - cap)
    return ResourceUsage.model_validate(out)


def charge_missions(
    ctx: Ctx, mission_id: str, delta: ResourceUsage, *, via: str, forward: bool = True
) -> list[dict[str, Any]]:
    """Add ``delta`` to Mission ``mission_id`` of ``ctx.group_id`` and to each parent Mission
    in this Group; the new totals, nearest first. Where the ancestry leaves the Group, a
    ``mission.usage_forwarded`` Event (``via``: the WorkItem or source charged) hands the
    rest to the parent's Group — unless ``forward`` is false (a reservation: the parent
    Mission there is bounded by the allowance it holds, :func:`reserve_allowance`).
    Implements MW-11.5-i, MW-11.5-j and MW-10.4-d.

    Raises:
        Reject: ``budget_exceeded`` naming the Mission whose budget it would overrun
            (MW-11.5-j); the caller's savepoint then writes nothing.
    """
    group = ctx.group_id
    totals: list[dict[str, Any]] = []
    mission: str | None = mission_id
    seen: set[str] = set()
    while mission and mission not in seen:
        seen.add(mission)
        row = ctx.one("missions.parent_and_usage", group, mission)
        if row is None:
            break
        used = ResourceUsage.model_validate_json(row["usage"]) if row["usage"] else None
        total = add_usage(used or ResourceUsage(), delta)
        if row["budget"]:
            over = total.over(Budget.model_validate_json(row["budget"]))
            if over:
                raise Reject(
                    RejectionCode.BUDGET_EXCEEDED,
                    "the usage exceeds the Mission's budget",
                    scope="mission",
                    mission_id=mission,
                    dimensions=over,
                    usage=total.model_dump(),
                )
        ctx.run("mission_usage.save_usage", group, mission, row["budget"], total.model_dump_json())
        totals.append({"mission_id": mission, "usage": total.model_dump()})
        parent = json.loads(row["parent"]) if row["parent"] else None
        if not isinstance(parent, dict) or not parent.get("group_id"):
            break  # a link without its Group (written before links were verified): not followed
        if parent["group_id"] != group:
            if not forward:
                break
            ctx.emit(
                USAGE_FORWARDED,
                {"child_mission_id": mission, "parent": parent, "delta": delta.model_dump(),
                 "via": via},
            )  # fmt: skip
            break
        mission = parent.get("mission_id")
    return totals


def charge_work_item(
    ctx: Ctx, item: Row, delta: ResourceUsage
) -> tuple[ResourceUsage, list[dict[str, Any]]]:
    """Add ``delta`` to ``item``'s usage and to its whole budget ancestry (MW-11.5-i); the
    WorkItem's new total and the Missions' (:func:`charge_missions`). Implements MW-11.5-j.

    Raises:
        Reject: ``budget_exceeded`` (``scope`` ``work_item`` or ``mission``) when a total
            would overrun its budget (MW-11.5-j); the caller's savepoint then writes nothing.
    """
    total = add_usage(ResourceUsage.model_validate_json(item["usage"]), delta)
    over = total.over(contract_of(item).budget)
    if over:
        raise Reject(
            RejectionCode.BUDGET_EXCEEDED,
            "the usage exceeds the contract's budget",
            scope="work_item",
            dimensions=over,
            usage=total.model_dump(),
        )
    missions = charge_missions(ctx, item["mission_id"], delta, via=item["work_item_id"])
    set_item(ctx, item, usage=total.model_dump_json())
    return total, missions


@command(CommandType.MISSION_CHARGE_CHILD_USAGE)
def mission_charge_child_usage(ctx: Ctx) -> None:
    """Charge a child Mission's forwarded usage to its parent Mission in this Group.

    Body: ``source`` = ``{group_id, seq, hash}`` of a ``mission.usage_forwarded`` Event in the
    child's Group. The Event must exist with that hash and name a parent in this Group; each
    is applied once. Emits ``mission.child_usage_charged`` (the source, the delta and the
    totals). Implements MW-11.5-i across Groups without a cross-Group transaction (MW-10.4-d).

    Raises:
        Reject: ``role_not_allowed`` (not the coordinator); ``invalid_body``;
            ``unknown_source`` (no such Event, another hash or type, or a parent elsewhere);
            ``already_charged``; ``budget_exceeded`` (MW-11.5-j).
    """
    if Role.COORDINATOR not in ctx.roles:
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED, "mission.charge_child_usage needs the coordinator role"
        )
    src = ctx.body.get("source")
    if not isinstance(src, dict):
        raise Reject(RejectionCode.INVALID_BODY, "source must be an object", field="source")
    group, seq, digest = need_id(src, "group_id"), need(src, "seq", int), need(src, "hash")
    row = ctx.one("events.one", group, seq, group, seq)
    event = json.loads(row[0]) if row is not None else None
    parent = event["body"].get("parent", {}) if event is not None else {}
    if (
        event is None
        or event["hash"] != digest
        or event["type"] != USAGE_FORWARDED
        or parent.get("group_id") != ctx.group_id
    ):
        raise Reject(
            RejectionCode.UNKNOWN_SOURCE,
            "no forwarded usage with that hash for this Group",
            source=src,
        )
    source = {"group_id": group, "seq": seq, "hash": digest}
    child = event["body"]["child_mission_id"]
    before = ResourceUsage()  # this child's forwarded usage charged so far
    for done in ctx.all("events.of_type", ctx.group_id, CHILD_USAGE_CHARGED,
                        ctx.group_id, CHILD_USAGE_CHARGED):  # fmt: skip
        body = json.loads(done[0])["body"]
        if body["source"] == source:
            raise Reject(
                RejectionCode.ALREADY_CHARGED, "that forwarded usage was charged", source=source
            )
        if body["child_mission_id"] == child:
            before = add_usage(before, ResourceUsage.model_validate(body["delta"]))
    delta = ResourceUsage.model_validate(event["body"]["delta"])
    mission = str(parent.get("mission_id"))
    if ctx.one("missions.state_by_group_id_mission_id", ctx.group_id, mission) is None:
        raise Reject(
            RejectionCode.UNKNOWN_SOURCE, "the parent Mission is not in this Group", source=src
        )
    reserved = _reservation(ctx, parent, child)
    charged = _beyond_reservation(reserved, before, delta)
    totals = charge_missions(ctx, mission, charged, via=f"{group}#{seq}")
    ctx.emit(
        CHILD_USAGE_CHARGED,
        {"source": source, "child_mission_id": child, "mission_id": mission,
         "delta": delta.model_dump(), "beyond_allowance": charged.model_dump(),
         "totals": totals},
    )  # fmt: skip


def _reservation(ctx: Ctx, parent: dict[str, Any], child: str) -> dict[str, int]:
    """The allowance reserved for child Mission ``child`` by the ``mission.child_created`` of
    the parent WorkItem ``parent["work_item_id"]`` in this Group (empty: none)."""
    event = anchor(ctx, ctx.group_id, str(parent.get("work_item_id")))
    if event is None or event["body"].get("child_mission_id") != child:
        return {}
    allowance = event["body"].get("allowance") or {}
    return {d: int(v) for d, v in allowance.items() if d in LIMITS}
