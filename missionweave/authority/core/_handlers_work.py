"""Handlers for Mission and WorkItem Commands issued by Coordinators, MissionOwners and members:
``mission.create``, ``work.propose``, ``work.authorize``, ``work.offer`` (10.3),
``work.accept_offer``, ``work.decline_offer``, ``approval.grant_execution``, ``work.unblock``,
``approval.grant_result`` / ``approval.deny_result`` (a MissionOwner's decision on a reviewed
result), ``work.accept_result``, ``work.cancel``, ``mission.create_child`` and the child / Mission
outcome Commands. Worker-reported lease Commands live in ``_handlers_lease``, and the ones that
end an execution or publish its content in ``_handlers_results``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...protocol import (
    KEY_VERSIONS,
    UNFINISHED_STATES,
    CommandType,
    DeclineReason,
    EventType,
    RejectionCode,
    ResourceUsage,
    Role,
    Transition,
    Urgency,
    WorkContract,
    WorkItemState,
    check_transition,
    dependencies_satisfied,
    is_hash,
    is_material_revision,
    new_id,
)
from ._budgets import record_mission_budget
from ._command_scope import Ctx, Reject, dumps, need, need_id, need_label
from ._handlers_children import verify_parent
from ._handlers_context import refuse_other_missions
from ._identity import IdKind, register_identity
from ._items import (
    anchor,
    close_owner,
    contract_of,
    end_leases,
    evidence_hashes,
    gate,
    grant_hold,
    load_item,
    owner_expired,
    parse,
    parse_evidence,
    refuse_expired,
    running_mission,
    set_item,
    withdraw_offers,
)
from ._registry import command
from ._selection import AUTHORITY_CHECKS, checked_basis
from ._store import Row

_REASON = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@command(CommandType.MISSION_CREATE)
def mission_create(ctx: Ctx) -> None:
    """Create a running Mission (optionally with a ``budget``). A child Mission's ``parent``
    names the parent's Group, Mission and WorkItem and is verified against the parent's
    ``mission.child_created`` (:func:`verify_parent`, MW-10.4-d); the stored and logged link
    cites that Event by sequence and hash, and budget charges follow it (MW-11.5-i).

    Raises:
        Reject: ``role_not_allowed``, ``invalid_body``, ``mission_exists``, ``invalid_parent``;
            ``unnormalized_id``, ``confusable_id`` (:func:`._identity.register_identity`).
    """
    if "coordinator" not in ctx.roles and "mission_owner" not in ctx.roles:
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED, "mission.create needs coordinator or mission_owner"
        )
    mid = need_id(ctx.body, "mission_id")
    if ctx.one("missions.exists_by_group_id_mission_id", ctx.group_id, mid):
        raise Reject(
            RejectionCode.MISSION_EXISTS, f"Mission {mid!r} already exists", mission_id=mid
        )
    register_identity(ctx, IdKind.MISSION, mid, "mission_id", group_id=ctx.group_id)
    raw = ctx.body.get("parent")
    parent = verify_parent(ctx, mid, raw) if raw is not None else None
    ctx.run(
        "missions.insert",
        ctx.group_id,
        mid,
        "running",
        dumps(parent) if parent else None,
    )
    allowance = None
    if parent is not None:  # reserved in the parent's Group: kept here (MW-11.5-j)
        event = anchor(ctx, parent["group_id"], parent["work_item_id"])
        allowance = event["body"].get("allowance") if event is not None else None
    record_mission_budget(ctx, mid, ctx.body.get("budget"), allowance)  # charged by MW-11.5-i
    body: dict[str, Any] = {"mission_id": mid, "title": need_label(ctx.body, "title")}
    if parent:
        body["parent"] = parent
    if ctx.body.get("budget") is not None:
        body["budget"] = ctx.body["budget"]
    if allowance:
        body["allowance"] = allowance  # the parent's reservation bounds this Mission too
    ctx.emit(EventType.MISSION_CREATED, body)


def _new_item(ctx: Ctx, *, proposed_ok: bool) -> tuple[str, str, Row | None]:
    """The Command's ``work_item_id`` and ``mission_id`` (a running Mission), and the row
    already under that id: ``None``, or — with ``proposed_ok`` — a proposed WorkItem.

    Raises:
        Reject: ``duplicate_id`` (WorkItem ids are unique within the Group: the detail names
            the Mission holding it), ``unnormalized_id`` or ``confusable_id`` (a new id,
            :func:`._identity.register_identity`), or :func:`running_mission`'s.
    """
    wid = need_id(ctx.body, "work_item_id")
    mid = need(ctx.body, "mission_id")
    running_mission(ctx, mid)
    existing = ctx.one("work_items.row", ctx.group_id, wid)
    if existing is not None and not (proposed_ok and existing["state"] == "proposed"):
        raise Reject(
            RejectionCode.DUPLICATE_ID,
            f"WorkItem {wid!r} already exists in Mission {existing['mission_id']!r}",
            work_item_id=wid,
            mission_id=existing["mission_id"],
        )
    if existing is None:  # a proposal being authorized was registered when proposed
        register_identity(
            ctx, IdKind.WORK_ITEM, wid, "work_item_id", group_id=ctx.group_id, mission_id=mid
        )
    return wid, mid, existing


@command(CommandType.WORK_PROPOSE)
def work_propose(ctx: Ctx) -> None:
    wid, mid, _ = _new_item(ctx, proposed_ok=False)
    gate(ctx, None)
    contract = parse(WorkContract, ctx.body.get("contract"), "contract")
    refuse_other_missions(ctx, mid, contract.inputs)  # MW-13.3-d
    ctx.emit(
        EventType.WORK_PROPOSED,
        {"mission_id": mid, "contract": contract.wire()},
        work_item_id=wid,
        new_row=_new_row(contract, []),
    )


@command(CommandType.WORK_AUTHORIZE)
def work_authorize(ctx: Ctx) -> None:
    """Create a WorkItem (``open``); its dependencies must already exist in the Mission, so no
    cycle or self-loop can form (MW-10.4-c)."""
    wid, mid, existing = _new_item(ctx, proposed_ok=True)
    gate(ctx, existing)
    contract = parse(WorkContract, ctx.body.get("contract"), "contract")
    refuse_other_missions(ctx, mid, contract.inputs)  # MW-13.3-d
    deps = ctx.body.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise Reject(
            RejectionCode.INVALID_BODY, "dependencies must be a list of ids", field="dependencies"
        )
    for dep in deps:
        if dep == wid:
            raise Reject(
                RejectionCode.SELF_LOOP, f"WorkItem {wid} depends on itself", work_item_id=wid
            )
        row = ctx.one(
            "work_items.admitted_mission_id",
            ctx.group_id,
            dep,
        )
        if row is None:
            raise Reject(
                RejectionCode.UNKNOWN_ID, f"dependency {dep!r} is not a WorkItem", dependency=dep
            )
    ctx.emit(
        EventType.WORK_AUTHORIZED,
        {"mission_id": mid, "contract": contract.wire(), "dependencies": deps, "state": "open"},
        work_item_id=wid,
        new_row=_new_row(contract, deps),
    )


def _new_row(contract: WorkContract, dependencies: list[str]) -> dict[str, str]:
    """The columns of a new WorkItem's row that the fold does not own."""
    return {
        "contract": contract.model_dump_json(),
        "dependencies": json.dumps(dependencies),
        "usage": ResourceUsage().model_dump_json(),
    }


@command(CommandType.WORK_OFFER)
def work_offer(ctx: Ctx) -> None:
    """Offer to one agent or a bounded candidate set (MW-10.3-a/b/c); reserves no ownership.
    Each candidate's selection basis must be complete and true (:func:`checked_basis`,
    MW-10.3-f); ``work.offered`` records it with what the Authority checked."""
    item = load_item(ctx)
    reason = owner_expired(ctx, item)
    if item["owner"] is not None and reason is None and item["state"] != "failed":
        raise Reject(
            RejectionCode.OWNER_ACTIVE,
            "the WorkItem has an active owner",
            owner=item["owner"],
            ownership_epoch=item["ownership_epoch"],
        )
    gate(ctx, item)
    _dependencies_met(ctx, item)
    candidates = ctx.body.get("candidates")
    if (
        not isinstance(candidates, list)
        or not candidates
        or not all(isinstance(c, str) and c for c in candidates)
        or len(set(candidates)) != len(candidates)
    ):
        raise Reject(
            RejectionCode.INVALID_BODY, "candidates must be distinct agent ids", field="candidates"
        )
    if len(candidates) > ctx.config.max_candidates:
        raise Reject(
            RejectionCode.TOO_MANY_CANDIDATES,
            "the candidate set is over its bound",
            max_candidates=ctx.config.max_candidates,
        )
    contract = contract_of(item)
    if len(candidates) > 1 and contract.urgency is not Urgency.URGENT:
        raise Reject(
            RejectionCode.CANDIDATE_SET_NOT_ALLOWED,
            "a candidate set is for urgent WorkItems; offer sequentially",
            urgency=contract.urgency.value,
        )
    for c in candidates:
        if not ctx.one(
            "members.is_active_worker",
            ctx.group_id,
            c,
        ):
            raise Reject(
                RejectionCode.NOT_A_WORKER,
                f"candidate {c!r} is not a worker of the group",
                candidate=c,
            )
    expires = need(ctx.body, "expires_at_ms", int)
    if not ctx.now_ms < expires <= ctx.now_ms + ctx.config.max_offer_ms:
        raise Reject(
            RejectionCode.INVALID_EXPIRY,
            "the offer's expiry is in the past or too far ahead",
            expires_at_ms=expires,
            now_ms=ctx.now_ms,
        )
    basis_raw = ctx.body.get("selection_basis", {})
    if not isinstance(basis_raw, dict) or set(basis_raw) != set(candidates):
        raise Reject(
            RejectionCode.SELECTION_BASIS_REQUIRED,
            "a selection basis is required for every candidate (MW-10.3-f)",
        )
    new_contract = ctx.body.get("contract")
    revision = item["revision"]
    if new_contract is not None:
        revised = parse(WorkContract, new_contract, "contract")
        refuse_other_missions(ctx, item["mission_id"], revised.inputs)  # MW-13.3-d
        if is_material_revision(contract, revised) and revised.revision <= contract.revision:
            raise Reject(
                RejectionCode.REVISION_REQUIRED,
                "a material change must increment the revision",
                current_revision=contract.revision,
            )
        if revised.revision < contract.revision:
            raise Reject(RejectionCode.STALE_REVISION, "the contract revision went backwards")
        revision = revised.revision
        contract = revised
        set_item(ctx, item, contract=revised.model_dump_json())
        if revision != item["revision"]:
            ctx.emit(
                EventType.WORK_CONTRACT_REVISED,
                {"revision": revision, "contract": revised.wire()},
                work_item_id=item["work_item_id"],
            )
    basis = {
        c: checked_basis(ctx, c, basis_raw[c], contract.required_capabilities) for c in candidates
    }
    if reason is not None:
        close_owner(ctx, item, reason)
    withdraw_offers(ctx, item, "replaced")
    offer_id = new_id("ofr")
    ctx.run(
        "offers.insert",
        offer_id,
        ctx.group_id,
        item["work_item_id"],
        json.dumps(candidates),
        "{}",
        dumps(basis),
        expires,
        revision,
    )
    ctx.emit(
        EventType.WORK_OFFERED,
        {
            "offer_id": offer_id,
            "candidates": candidates,
            "expires_at_ms": expires,
            "revision": revision,
            "selection_basis": basis,
            "authority_checks": list(AUTHORITY_CHECKS),
            "mission_id": item["mission_id"],
            "required_capabilities": contract.required_capabilities,
            "previous_state": item["state"],
        },
        work_item_id=item["work_item_id"],
    )
    ctx.reply["offer_id"] = offer_id


def _dependencies_met(ctx: Ctx, item: Row) -> None:
    """Refuse to offer a WorkItem whose dependencies do not satisfy its strategy (MW-10.4-b)."""
    deps = json.loads(item["dependencies"])
    if not deps:
        return
    rows = ctx.store.work_item_states(ctx.group_id, deps)
    states = {r["work_item_id"]: WorkItemState(r["state"]) for r in rows}
    strategy = contract_of(item).dependency_strategy
    if not dependencies_satisfied(strategy, [states.get(d) for d in deps]):
        raise Reject(
            RejectionCode.DEPENDENCIES_UNMET,
            f"dependencies do not satisfy {strategy.value}",
            dependencies={d: str(states.get(d)) for d in deps},
            strategy=strategy.value,
        )


def _open_offer(ctx: Ctx, item: object) -> dict[str, object]:
    offer_id = need(ctx.body, "offer_id")
    row = ctx.one("offers.row", offer_id, ctx.group_id)
    if row is None or row["work_item_id"] != ctx.body.get("work_item_id"):
        raise Reject(
            RejectionCode.UNKNOWN_OFFER,
            f"no offer {offer_id!r} for this WorkItem",
            offer_id=offer_id,
        )
    if row["status"] != "open":
        raise Reject(
            RejectionCode.OFFER_CLOSED,
            f"the offer is {row['status']}",
            offer_id=offer_id,
            status=row["status"],
        )
    refuse_expired(ctx, row, "offer", offer_id)
    candidates = json.loads(row["candidates"])
    if ctx.command.actor not in candidates:
        raise Reject(
            RejectionCode.NOT_A_CANDIDATE,
            "the offer is not addressed to this agent",
            offer_id=offer_id,
        )
    if ctx.command.actor in json.loads(row["declined"]):
        raise Reject(
            RejectionCode.ALREADY_DECLINED, "this agent declined the offer", offer_id=offer_id
        )
    return dict(row)


@command(CommandType.WORK_ACCEPT_OFFER, needs_session=True)
def work_accept_offer(ctx: Ctx) -> None:
    """The first valid acceptance wins a new ownership epoch; losing offers are withdrawn in the
    same transaction (MW-10.3-c). Implements MW-11.3-a: the ownership grant carries the epoch,
    the start deadline and the queued ownership lease that holds the WorkItem until it starts
    (``hold``: :func:`~._items.grant_hold`), which the owner renews with ``lease.renew``.
    Implements MW-10.1-b."""
    item = load_item(ctx)
    offer = _open_offer(ctx, item)
    gate(ctx, item)
    if ctx.body.get("revision") != item["revision"] or offer["revision"] != item["revision"]:
        raise Reject(
            RejectionCode.STALE_REVISION,
            "acceptance must name the current contract revision",
            revision=ctx.body.get("revision"),
            current_revision=item["revision"],
        )
    contract = contract_of(item)
    if contract.open_questions:
        raise Reject(
            RejectionCode.CONTRACT_AMBIGUOUS,
            "essential ambiguities must be resolved first",
            open_questions=contract.open_questions,
        )
    epoch = item["ownership_epoch"] + 1
    keys = _key_version(ctx)
    deadline = ctx.now_ms + contract.timeouts.start_deadline_ms
    ctx.run("offers.accept", offer["offer_id"])
    hold = grant_hold(ctx, item, epoch, deadline)
    basis = json.loads(str(offer["selection_basis"]))[ctx.command.actor]
    ctx.emit(
        EventType.WORK_OFFER_ACCEPTED,
        {
            "offer_id": offer["offer_id"],
            "owner": ctx.command.actor,
            "ownership_epoch": epoch,
            "start_deadline_ms": deadline,
            "hold": hold,
            "revision": item["revision"],
            "selection_basis": basis,
            "session_epoch": ctx.command.session_epoch,
            **keys,
        },
        work_item_id=item["work_item_id"],
    )
    losers = [c for c in json.loads(str(offer["candidates"])) if c != ctx.command.actor]
    if losers:
        ctx.emit(
            EventType.OFFER_WITHDRAWN,
            {"offer_id": offer["offer_id"], "candidates": losers, "reason": "accepted_by_other"},
            work_item_id=item["work_item_id"],
        )
    withdraw_offers(ctx, item, "accepted_by_other", keep=str(offer["offer_id"]))
    ctx.reply.update(ownership_epoch=epoch, start_deadline_ms=deadline, hold=hold, **keys)


def _key_version(ctx: Ctx) -> dict[str, int]:
    """The acceptance's ``key_version`` as ``work.offer_accepted`` records it: the idempotency
    key version of the ownership epoch it begins (MW-16-f; docs/spec/READINGS.md). ``{}`` when
    the body names none (version 1, the Event as before).

    Raises:
        Reject: ``invalid_body``: not a known key version.
    """
    if "key_version" not in ctx.body:
        return {}
    value = ctx.body["key_version"]
    if type(value) is not int or value not in KEY_VERSIONS:
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"key_version must be one of {sorted(KEY_VERSIONS)}",
            field="key_version",
        )
    return {"key_version": value}


@command(CommandType.WORK_DECLINE_OFFER, needs_session=True)
def work_decline_offer(ctx: Ctx) -> None:
    """Decline with a structured reason (MW-10.3-e); the offer stays open for others.
    Implements MW-10.3-e."""
    item = load_item(ctx)
    offer = _open_offer(ctx, item)
    gate(ctx, item)
    reason = need(ctx.body, "reason")
    if not _REASON.match(reason):
        raise Reject(
            RejectionCode.INVALID_BODY,
            "reason must be a structured token",
            standard=[r.value for r in DeclineReason],
        )
    declined = json.loads(str(offer["declined"]))
    declined[ctx.command.actor] = reason
    everyone = set(json.loads(str(offer["candidates"]))) <= set(declined)
    ctx.run(
        "offers.set_declined_status",
        dumps(declined),
        "declined" if everyone else "open",
        offer["offer_id"],
    )
    detail = ctx.body.get("detail", {})
    ctx.emit(
        EventType.WORK_OFFER_DECLINED,
        {
            "offer_id": offer["offer_id"],
            "agent_id": ctx.command.actor,
            "reason": reason,
            "standard_reason": reason in DeclineReason.__members__.values(),
            "detail": detail if isinstance(detail, dict) else {},
            "all_declined": everyone,
        },
        work_item_id=item["work_item_id"],
    )


@command(CommandType.APPROVAL_GRANT_EXECUTION)
def approval_grant(ctx: Ctx) -> None:
    item = load_item(ctx)
    gate(ctx, item)
    ctx.emit(
        EventType.APPROVAL_EXECUTION_GRANTED,
        {"ownership_epoch": item["ownership_epoch"]},
        work_item_id=item["work_item_id"],
    )


@command(CommandType.WORK_UNBLOCK)
def work_unblock(ctx: Ctx) -> None:
    """Back to the owner's queue while the blocked lease holds; otherwise to ``open``."""
    item = load_item(ctx)
    gate(ctx, item)
    expired = owner_expired(ctx, item) or (None if item["owner"] else "no_owner")
    resolution = ctx.body.get("resolution", {})
    if expired is None:
        end_leases(ctx, item, "released", "unblocked")
        deadline = ctx.now_ms + contract_of(item).timeouts.start_deadline_ms
        state, extra = "queued", {"start_deadline_ms": deadline}
    else:
        if item["owner"] is not None:
            close_owner(ctx, item, expired)
        state, extra = "open", {}
    ctx.emit(
        EventType.WORK_UNBLOCKED,
        {"state": state, "resolution": resolution, **extra},
        work_item_id=item["work_item_id"],
    )


def _result_decision(ctx: Ctx, granted: bool) -> None:
    """A MissionOwner's decision on a submitted result (MW-13.2-b step 5), once per submission.

    Checks, in order: the ``mission_owner`` role (``role_not_allowed``); the WorkItem is
    ``submitted`` (``transition_not_allowed``); ``review_digest`` is SHA-256 hex and a denial has
    a ``reason`` (``invalid_body``); the approver is not the WorkItem's owner
    (``self_approval``); no decision yet for this ownership epoch (``already_decided``).
    """
    if Role.MISSION_OWNER not in ctx.roles:
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED,
            f"{ctx.command.type} needs the mission_owner role",
            needed="mission_owner",
        )
    item = load_item(ctx)
    if item["state"] != WorkItemState.SUBMITTED.value:
        raise Reject(
            RejectionCode.TRANSITION_NOT_ALLOWED,
            f"{ctx.command.type} needs a submitted WorkItem, not {item['state']}",
            action=ctx.command.type,
            state=item["state"],
        )
    review = need(ctx.body, "review_digest")
    if not is_hash(review):
        raise Reject(
            RejectionCode.INVALID_BODY, "review_digest must be SHA-256 hex", field="review_digest"
        )
    reason = ctx.body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > 2000 or (not granted and not reason):
        raise Reject(
            RejectionCode.INVALID_BODY,
            "reason is a string of at most 2,000 characters, required to deny",
            field="reason",
        )
    if ctx.command.actor == item["owner"]:
        raise Reject(
            RejectionCode.SELF_APPROVAL, "the WorkItem's owner may not approve its own result"
        )
    decided = ctx.one(
        "result_approvals.decision_approver",
        ctx.group_id,
        item["work_item_id"],
        item["ownership_epoch"],
    )
    if decided is not None:
        raise Reject(
            RejectionCode.ALREADY_DECIDED,
            f"the result was already {decided['decision']}",
            decision=decided["decision"],
            approver=decided["approver"],
        )
    decision = "granted" if granted else "denied"
    ctx.run(
        "result_approvals.insert",
        ctx.group_id,
        item["work_item_id"],
        item["ownership_epoch"],
        decision,
        ctx.command.actor,
        review,
        ctx.now_ms,
    )
    ctx.emit(
        EventType.APPROVAL_RESULT_GRANTED if granted else EventType.APPROVAL_RESULT_DENIED,
        {
            "approver": ctx.command.actor,
            "review_digest": review,
            "reason": reason,
            "ownership_epoch": item["ownership_epoch"],
            "decided_at_ms": ctx.now_ms,
        },
        work_item_id=item["work_item_id"],
    )


@command(CommandType.APPROVAL_GRANT_RESULT)
def approval_grant_result(ctx: Ctx) -> None:
    """A MissionOwner approves a reviewed result: ``approval.result_granted``."""
    _result_decision(ctx, True)


@command(CommandType.APPROVAL_DENY_RESULT)
def approval_deny_result(ctx: Ctx) -> None:
    """A MissionOwner rejects a reviewed result: ``approval.result_denied``."""
    _result_decision(ctx, False)


def _needs_approval(ctx: Ctx, item: Row) -> None:
    """A contract with a ``human`` criterion is accepted only after a granted Approval of this
    submission (its ownership epoch)."""
    if not any(c.kind == "human" for c in contract_of(item).acceptance_criteria):
        return
    row = ctx.one(
        "result_approvals.decision",
        ctx.group_id,
        item["work_item_id"],
        item["ownership_epoch"],
    )
    if row is None or row["decision"] != "granted":
        raise Reject(
            RejectionCode.APPROVAL_REQUIRED,
            "a human acceptance criterion needs a MissionOwner's approval.grant_result",
            decision=row["decision"] if row else None,
        )


@command(CommandType.WORK_ACCEPT_RESULT)
def work_accept_result(ctx: Ctx) -> None:
    item = load_item(ctx)
    gate(ctx, item)
    _needs_approval(ctx, item)
    evidence = parse_evidence(ctx, required=False)
    refuse_other_missions(ctx, item["mission_id"], evidence_hashes(evidence))  # MW-13.3-d
    ctx.emit(
        EventType.WORK_RESULT_ACCEPTED,
        {
            "state": "verified",
            "owner": item["owner"],
            "ownership_epoch": item["ownership_epoch"],
            "capabilities": contract_of(item).required_capabilities,
            "evidence": [e.model_dump() for e in evidence],
        },
        work_item_id=item["work_item_id"],
    )


@command(CommandType.WORK_CANCEL)
def work_cancel(ctx: Ctx) -> None:
    item = load_item(ctx)
    gate(ctx, item)
    _terminate(ctx, item, "cancelled", str(ctx.body.get("reason", "cancelled")))


#: The Event of a WorkItem ended by a cancellation or a failure, by its new state.
_TERMINATED = {"cancelled": EventType.WORK_CANCELLED, "failed": EventType.WORK_FAILED}
#: A Mission's end as each WorkItem it ends gives it: its Event and that WorkItem's reason.
_MISSION_END = {
    "cancelled": (EventType.MISSION_CANCELLED, "mission_cancelled"),
    "failed": (EventType.MISSION_FAILED, "mission_failed"),
}


def _terminate(ctx: Ctx, item: Row, state: str, reason: str) -> None:
    end_leases(ctx, item, "revoked", reason)
    withdraw_offers(ctx, item, reason)
    ctx.emit(
        _TERMINATED[state], {"state": state, "reason": reason}, work_item_id=item["work_item_id"]
    )


def _mission_end(ctx: Ctx, state: str) -> None:
    mid = need(ctx.body, "mission_id")
    running_mission(ctx, mid)
    action = ctx.command.type
    for item in ctx.all(
        "work_items.rows_by_mission",
        ctx.group_id,
        mid,
    ):
        if WorkItemState(item["state"]) not in UNFINISHED_STATES:
            continue
        verdict = check_transition(WorkItemState(item["state"]), action, ctx.roles)
        if not isinstance(verdict, Transition):
            raise Reject(verdict.code, verdict.reason, **verdict.detail)
        _terminate(ctx, item, state, _MISSION_END[state][1])
    ctx.run("missions.set_state", state, ctx.group_id, mid)
    ctx.emit(_MISSION_END[state][0], {"mission_id": mid, "reason": str(ctx.body.get("reason", ""))})


@command(CommandType.MISSION_CANCEL)
def mission_cancel(ctx: Ctx) -> None:
    _mission_end(ctx, "cancelled")


@command(CommandType.MISSION_FAIL)
def mission_fail(ctx: Ctx) -> None:
    _mission_end(ctx, "failed")


@command(CommandType.MISSION_COMPLETE)
def mission_complete(ctx: Ctx) -> None:
    if "coordinator" not in ctx.roles:
        raise Reject(RejectionCode.ROLE_NOT_ALLOWED, "mission.complete needs the coordinator role")
    mid = need(ctx.body, "mission_id")
    running_mission(ctx, mid)
    open_items = ctx.all(
        "work_items.open_ids_by_mission",
        ctx.group_id,
        mid,
    )
    if open_items:
        raise Reject(
            RejectionCode.MISSION_UNFINISHED,
            "every WorkItem must be verified or cancelled",
            open=[r["work_item_id"] for r in open_items],
        )
    ctx.run("missions.complete", ctx.group_id, mid)
    ctx.emit(EventType.MISSION_COMPLETED, {"mission_id": mid})
