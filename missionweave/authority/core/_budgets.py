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
from ._items import add_usage, contract_of, parse, set_item
from ._registry import command
from ._store import Row

USAGE_FORWARDED = EventType.MISSION_USAGE_FORWARDED
CHILD_USAGE_CHARGED = EventType.MISSION_CHILD_USAGE_CHARGED


def record_mission_budget(ctx: Ctx, mission_id: str, raw: Any) -> None:
    """Store a Mission's budget (``mission.create``'s optional ``budget``): every charge to
    one of its WorkItems, or to a child Mission's, counts against it.

    Raises:
        Reject: ``invalid_body`` — ``raw`` is not a :class:`Budget`.
    """
    if raw is not None:
        ctx.run(
            "mission_usage.save_budget",
            ctx.group_id,
            mission_id,
            parse(Budget, raw, "budget").model_dump_json(),
            ResourceUsage().model_dump_json(),
        )


def charge_missions(
    ctx: Ctx, mission_id: str, delta: ResourceUsage, *, via: str
) -> list[dict[str, Any]]:
    """Add ``delta`` to Mission ``mission_id`` of ``ctx.group_id`` and to each parent Mission
    in this Group; the new totals, nearest first. Where the ancestry leaves the Group, a
    ``mission.usage_forwarded`` Event (``via``: the WorkItem or source charged) hands the
    rest to the parent's Group. Implements MW-11.5-i, MW-11.5-j and MW-10.4-d.

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
    for done in ctx.all("events.of_type", ctx.group_id, CHILD_USAGE_CHARGED,
                        ctx.group_id, CHILD_USAGE_CHARGED):  # fmt: skip
        if json.loads(done[0])["body"]["source"] == source:
            raise Reject(
                RejectionCode.ALREADY_CHARGED, "that forwarded usage was charged", source=source
            )
    delta = ResourceUsage.model_validate(event["body"]["delta"])
    mission = str(parent.get("mission_id"))
    if ctx.one("missions.state_by_group_id_mission_id", ctx.group_id, mission) is None:
        raise Reject(
            RejectionCode.UNKNOWN_SOURCE, "the parent Mission is not in this Group", source=src
        )
    totals = charge_missions(ctx, mission, delta, via=f"{group}#{seq}")
    ctx.emit(
        CHILD_USAGE_CHARGED,
        {"source": source, "child_mission_id": event["body"]["child_mission_id"],
         "mission_id": mission, "delta": delta.model_dump(), "totals": totals},
    )  # fmt: skip
