"""Child Missions on the Authority (spec 10.2's child rows, MW-10.4-d, MW-11.5-i).

* ``mission.create_child`` blocks the parent WorkItem and closes its ownership while the child
  Mission runs; its ``mission.child_created`` Event is the link's anchor.
* A child Mission's ``mission.create`` carries ``parent`` = ``{group_id, mission_id,
  work_item_id}`` (and the parent workflow's id), verified here against that anchor: the
  parent WorkItem is blocked for this very child, in this very Group (:func:`verify_parent`).
  The stored link cites the anchor Event by sequence and hash.
* ``mission.child_approved`` / ``mission.child_failed`` move only a WorkItem blocked by
  ``mission.create_child`` for that child; an approval also needs the child Mission completed,
  linked to this WorkItem (MW-10.2-c).
* Budgets up the ancestry (MW-11.5-i) never cross a Group inside one transaction (MW-10.4-d):
  a charge that reaches a parent in another Group is recorded in the child's Group as
  ``mission.usage_forwarded``, and ``mission.charge_child_usage`` in the parent's Group applies
  it there, citing that Event by Group, sequence and hash (:mod:`._budgets`). The parent's
  budget is kept by an allowance reserved at ``mission.create_child`` and enforced in the
  child's Group (MW-11.5-j).
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol import CommandType, EventType, Evidence, RejectionCode
from ._budgets import reserve_allowance
from ._command_scope import Ctx, Reject, need, need_id
from ._handlers_context import may_use_in_mission, refuse_other_missions
from ._items import (
    anchor,
    contract_of,
    end_leases,
    evidence_hashes,
    gate,
    load_item,
    set_item,
    withdraw_offers,
)
from ._registry import command
from ._store import Row
from ._submission import evidence_per_criterion


def _blocked_for_child(item: Row | None, child_mission_id: str) -> bool:
    """Whether ``item`` is blocked by ``mission.create_child`` for ``child_mission_id``: a
    Worker's own block keeps its owner (and a blocked lease); the child's closes ownership."""
    return (
        item is not None
        and item["state"] == "blocked"
        and item["owner"] is None
        and item["child_mission_id"] == child_mission_id
    )


def verify_parent(ctx: Ctx, mission_id: str, raw: Any) -> dict[str, Any]:
    """The verified parent link of child Mission ``mission_id`` created in ``ctx.group_id``.

    Args:
        raw: the Command's ``parent``: ``{group_id, mission_id, work_item_id}`` (identifiers),
            optionally ``workflow_id`` (the parent's Temporal workflow, kept as given).

    Returns:
        The link to store and log: the four fields and ``anchor`` = ``{seq, hash}`` of the
        parent Group's ``mission.child_created`` Event for this child.

    Raises:
        Reject: ``invalid_body`` (a field missing or not an identifier); ``invalid_parent``
            (no such Mission or WorkItem in that Group, or the WorkItem is not blocked by
            ``mission.create_child`` for this Mission in this Group). Implements MW-10.4-d.
    """
    if not isinstance(raw, dict):
        raise Reject(RejectionCode.INVALID_BODY, "parent must be an object", field="parent")
    link: dict[str, Any] = {k: need_id(raw, k) for k in ("group_id", "mission_id", "work_item_id")}
    if "workflow_id" in raw:
        link["workflow_id"] = need(raw, "workflow_id")
    pg, pm, pw = link["group_id"], link["mission_id"], link["work_item_id"]
    item = ctx.one("work_items.row", pg, pw)
    event = anchor(ctx, pg, pw)
    if (
        item is None
        or item["mission_id"] != pm
        or not _blocked_for_child(item, mission_id)
        or event is None
        or event["body"].get("child_mission_id") != mission_id
        or event["body"].get("child_group_id") != ctx.group_id
    ):
        raise Reject(
            RejectionCode.INVALID_PARENT,
            "the parent WorkItem is not blocked by mission.create_child for this Mission",
            parent=link,
            state=item["state"] if item is not None else None,
        )
    link["anchor"] = {"seq": event["seq"], "hash": event["hash"]}
    return link


@command(CommandType.MISSION_CREATE_CHILD)
def mission_create_child(ctx: Ctx) -> None:
    """Block the parent item and close its ownership while the child Mission runs.

    For a child in another Group (``child_group_id``), the child's ``allowance`` (a
    :class:`~missionweave.protocol.Budget`) is reserved from the parent's budget ancestry
    here and recorded in ``mission.child_created``; the child's Group bounds the child by it
    (:func:`._budgets.reserve_allowance`, MW-11.5-j, MW-10.4-d).

    Raises:
        Reject: the state table's; ``allowance_required``, ``budget_exceeded``.
    """
    item = load_item(ctx)
    gate(ctx, item)
    child = need_id(ctx.body, "child_mission_id")
    child_group = need_id(ctx.body, "child_group_id") if "child_group_id" in ctx.body else None
    body: dict[str, Any] = {
        "child_mission_id": child,
        "state": "blocked",
        "child_group_id": child_group or ctx.group_id,
    }
    if body["child_group_id"] != ctx.group_id:  # a budget is kept in the child's Group
        allowance = reserve_allowance(ctx, item, ctx.body.get("allowance"))
        if allowance is not None:
            body["allowance"] = allowance
    end_leases(ctx, item, "revoked", "child_mission")
    withdraw_offers(ctx, item, "child_mission")
    set_item(ctx, item, child_mission_id=child)
    ctx.emit(EventType.MISSION_CHILD_CREATED, body, work_item_id=item["work_item_id"])


def _child_parent(ctx: Ctx) -> tuple[Row, dict[str, Any] | None, str]:
    """The WorkItem blocked for the Command's ``child_mission_id``, the child Mission's row
    (``state``, ``parent``) in the Group the link names, if it exists, and that Group.

    Raises:
        Reject: the state table's (MW-10.2-c); ``unknown_child`` — the WorkItem is not blocked
            by ``mission.create_child`` for that child Mission.
    """
    item = load_item(ctx)
    gate(ctx, item)
    child = need_id(ctx.body, "child_mission_id")
    event = anchor(ctx, ctx.group_id, item["work_item_id"])
    if not _blocked_for_child(item, child) or event is None:
        raise Reject(
            RejectionCode.UNKNOWN_CHILD,
            "the WorkItem is not blocked by mission.create_child for that child Mission",
            child_mission_id=child,
            current_child=item["child_mission_id"] if item["owner"] is None else None,
        )
    group = str(event["body"]["child_group_id"])
    row = ctx.one("missions.state_and_parent", group, child)
    return item, dict(row) if row is not None else None, group


def _links_here(ctx: Ctx, item: Row, child: dict[str, Any] | None) -> bool:
    parent = json.loads(child["parent"]) if child and child["parent"] else None
    return isinstance(parent, dict) and (
        parent.get("group_id"),
        parent.get("mission_id"),
        parent.get("work_item_id"),
    ) == (ctx.group_id, item["mission_id"], item["work_item_id"])


@command(CommandType.MISSION_CHILD_APPROVED)
def mission_child_approved(ctx: Ctx) -> None:
    """blocked → verified: the child's Approval becomes the WorkItem's Evidence. Only for the
    child Mission ``mission.create_child`` named, once it completed with its link to this
    WorkItem (MW-10.2-c).

    The child's result is held to the rules ``work.accept_result`` applies to a submission
    (:func:`_checked_child_result`): a child that completed no WorkItem has no result, a
    ``human`` criterion needs the child's granted Approval, the Evidence answers every
    acceptance criterion and cites only Artifacts of this Mission, of the linked child Mission
    or promoted ones.

    Raises:
        Reject: :func:`_child_parent`'s; ``child_not_completed`` (the child Mission does not
            exist, is not linked to this WorkItem, has not completed, or verified no WorkItem);
            :func:`_checked_child_result`'s.
    """
    item, child, group = _child_parent(ctx)
    if child is None or child["state"] != "completed" or not _links_here(ctx, item, child):
        raise Reject(
            RejectionCode.CHILD_NOT_COMPLETED,
            "the child Mission has not completed as this WorkItem's child",
            child_mission_id=item["child_mission_id"],
            child_state=child["state"] if child else None,
        )
    evidence = _checked_child_result(ctx, item, group)
    ctx.emit(
        EventType.MISSION_CHILD_APPROVED,
        {
            "child_mission_id": item["child_mission_id"],
            "state": "verified",
            "evidence": [e.model_dump() for e in evidence],
        },
        work_item_id=item["work_item_id"],
    )


def _checked_child_result(ctx: Ctx, item: Row, group: str) -> list[Evidence]:
    """The Evidence of a ``mission.child_approved`` for ``item``, whose completed child Mission
    ``item["child_mission_id"]`` lives in Group ``group``, checked as ``work.accept_result``
    and ``work.submit`` check a result (MW-10.2-c, MW-13.2-a/b, MW-13.3-d).

    Raises:
        Reject: ``child_not_completed`` (``verified_items``: 0 — the child verified no
            WorkItem: it did no work to approve); ``approval_required`` (the contract has a
            ``human`` criterion and no WorkItem of the child Mission holds a MissionOwner's
            granted result Approval); ``evidence_required`` / ``evidence_missing`` (an
            acceptance criterion without Evidence); ``cross_mission_content``
            (``artifact_hash``: an Artifact neither this Mission's, the child's nor promoted).

    Implements MW-10.2-c.
    """
    child = str(item["child_mission_id"])
    verified = [
        r for r in ctx.all("work_items.rows_by_mission", group, child) if r["state"] == "verified"
    ]
    if not verified:  # Implements MW-10.2-c: completed with no work is no result
        raise Reject(
            RejectionCode.CHILD_NOT_COMPLETED,
            "the child Mission verified no WorkItem: there is no result to approve",
            child_mission_id=child,
            verified_items=0,
        )
    contract = contract_of(item)
    if any(c.kind == "human" for c in contract.acceptance_criteria) and not any(
        (d := ctx.one("result_approvals.decision", group, r["work_item_id"], r["ownership_epoch"]))
        is not None
        and d["decision"] == "granted"
        for r in verified
    ):  # Implements MW-10.2-c: the child's Approval answers a human criterion
        raise Reject(
            RejectionCode.APPROVAL_REQUIRED,
            "a human acceptance criterion needs the child Mission's granted result Approval",
            child_mission_id=child,
        )
    evidence = evidence_per_criterion(ctx, item)
    for h in dict.fromkeys(evidence_hashes(evidence)):
        if may_use_in_mission(ctx.store, group, h, child) is True:
            continue  # the linked child Mission's own result
        refuse_other_missions(ctx, item["mission_id"], [h])  # Implements MW-13.3-d
    return evidence


@command(CommandType.MISSION_CHILD_FAILED)
def mission_child_failed(ctx: Ctx) -> None:
    """blocked → blocked or failed, as the declared child-failure ``policy`` says. Only for
    the child Mission ``mission.create_child`` named, and not while it runs or once it
    completed (a child whose creation was refused never existed: it failed) (MW-10.2-c).

    Raises:
        Reject: :func:`_child_parent`'s; ``child_not_failed`` (the child Mission is running or
            completed); ``invalid_body`` (``policy`` is not ``stay_blocked`` or ``fail``).
    """
    item, child, _ = _child_parent(ctx)
    if (
        child is not None
        and _links_here(ctx, item, child)
        and child["state"]
        in (
            "running",
            "completed",
        )
    ):
        raise Reject(
            RejectionCode.CHILD_NOT_FAILED,
            f"the child Mission is {child['state']}",
            child_mission_id=item["child_mission_id"],
            child_state=child["state"],
        )
    policy = ctx.body.get("policy")
    if policy not in ("stay_blocked", "fail"):
        raise Reject(
            RejectionCode.INVALID_BODY, "policy must be stay_blocked or fail", field="policy"
        )
    state = "failed" if policy == "fail" else "blocked"
    ctx.emit(
        EventType.MISSION_CHILD_FAILED,
        {"child_mission_id": item["child_mission_id"], "state": state, "policy": policy},
        work_item_id=item["work_item_id"],
    )
