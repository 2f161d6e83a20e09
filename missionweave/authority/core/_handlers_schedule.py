"""Handlers of the scheduling Commands (spec 11.1-11.3): a Group's priority, and an agent's
schedule disclosure.

``group.set_priority`` — the Group's priority class and weight, which every agent working in
the Group uses as that Group's weight in its weighted-fair scheduler (MW-11.1-c/d). It is a
policy decision: only the Group's ``owner`` (its administrator, where policy is set) or a
``mission_owner`` may issue it, never a Coordinator alone (a Coordinator supplies urgency and
deadlines but MUST NOT force its Mission ahead). The Event in the Group log is the record.

``work.disclose_schedule`` — the owner of a queued or running WorkItem publishes to the
WorkItem's Group its estimated start window, completion estimate, confidence, capacity state
and compute time (MW-11.2-a). The body's shape is closed — exactly the fields below, numbers
and enumerated words — so nothing else, and nothing of another Group (names, content,
assignments, queue positions), can travel in it (MW-11.2-b).
"""

from __future__ import annotations

from typing import Any

from ...protocol import CommandType, EventType, RejectionCode, WorkItemState
from ._command_scope import Ctx, Reject, need, need_id
from ._registry import command

#: Priority classes and the factor each multiplies the Group's weight by.
PRIORITY_CLASSES = {"low": 0.5, "normal": 1.0, "high": 2.0, "critical": 4.0}
#: The largest Group weight ``group.set_priority`` accepts.
MAX_WEIGHT = 1_000
#: The words a disclosure's ``confidence`` and ``capacity.state`` may take.
CONFIDENCE = ("high", "medium", "low")
CAPACITY_STATES = ("available", "busy", "draining")
#: The states in which an owner discloses a WorkItem's schedule (MW-11.2-a): waiting for a
#: slot, and started (a start, or an estimate revised while it runs, is a material change).
DISCLOSABLE = frozenset({WorkItemState.QUEUED, WorkItemState.ACTIVE})
_DISCLOSURE = {"work_item_id", "ownership_epoch", "start_window", "completion_estimate_ms",
               "confidence", "capacity", "compute_ms"}  # fmt: skip
_LIMIT = 2**53


def _int(value: Any, field: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < _LIMIT:
        raise Reject(
            RejectionCode.INVALID_BODY, f"{field} must be an integer >= {low}", field=field
        )
    return value


def _exact(value: Any, keys: set[str], field: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != keys:
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"{field} has exactly {', '.join(sorted(keys))}",
            field=field,
            fields=sorted(keys),
        )
    return value


@command(CommandType.GROUP_SET_PRIORITY)
def group_set_priority(ctx: Ctx) -> None:
    """Body: ``{"priority_class": "low"|"normal"|"high"|"critical", "weight": 1..1000}``.
    Emits ``group.priority_set`` with both, the effective weight (class factor × weight) and
    who set it. Implements MW-11.1-c/d (priority through policy or the MissionOwner)."""
    if not {"owner", "mission_owner"} & set(ctx.roles):
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED,
            "group.set_priority needs the owner or mission_owner "
            "role (a Coordinator cannot raise its Group's priority)",
        )
    body = _exact(ctx.body, {"priority_class", "weight"}, "body")
    cls = need(body, "priority_class")
    if cls not in PRIORITY_CLASSES:
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"priority_class is one of {', '.join(PRIORITY_CLASSES)}",
            field="priority_class",
        )
    weight = _int(body["weight"], "weight", 1)
    if weight > MAX_WEIGHT:
        raise Reject(RejectionCode.INVALID_BODY, f"weight is at most {MAX_WEIGHT}", field="weight")
    ctx.emit(
        EventType.GROUP_PRIORITY_SET,
        {
            "priority_class": cls,
            "weight": weight,
            "effective_weight_milli": int(PRIORITY_CLASSES[cls] * weight * 1000),
            "set_by": ctx.command.actor,
        },
    )


def _owned(ctx: Ctx, work_item_id: str) -> tuple[str | None, int, str]:
    """The WorkItem's owner, ownership epoch and state."""
    row = ctx.one("work_items.row", ctx.group_id, work_item_id)
    if row is None:
        raise Reject(
            RejectionCode.UNKNOWN_WORK_ITEM,
            f"no WorkItem {work_item_id!r}",
            work_item_id=work_item_id,
        )
    return row["owner"], int(row["ownership_epoch"]), str(row["state"])


@command(CommandType.WORK_DISCLOSE_SCHEDULE, needs_session=True)
def work_disclose_schedule(ctx: Ctx) -> None:
    """Body: ``{work_item_id, ownership_epoch, start_window: {earliest_ms, latest_ms},
    completion_estimate_ms, confidence: high|medium|low, capacity: {state:
    available|busy|draining, free_slots, queue_depth}, compute_ms}`` — exactly these; times in
    epoch ms, ``earliest_ms <= latest_ms <= completion_estimate_ms``. Only the WorkItem's owner
    under its current ownership epoch, while it is ``queued`` or ``active`` (:data:`DISCLOSABLE`:
    disclosed on acceptance, on start and on every material change). Emits
    ``work.schedule_disclosed`` with the body. Implements MW-11.2-a/b."""
    body = _exact(ctx.body, _DISCLOSURE, "body")
    wid = need_id(body, "work_item_id")
    epoch = _int(body["ownership_epoch"], "ownership_epoch", 1)
    window = _exact(body["start_window"], {"earliest_ms", "latest_ms"}, "start_window")
    earliest = _int(window["earliest_ms"], "start_window.earliest_ms")
    latest = _int(window["latest_ms"], "start_window.latest_ms")
    done = _int(body["completion_estimate_ms"], "completion_estimate_ms")
    if not earliest <= latest <= done:
        raise Reject(
            RejectionCode.INVALID_BODY,
            "earliest_ms <= latest_ms <= completion_estimate_ms",
            field="start_window",
        )
    if body["confidence"] not in CONFIDENCE:
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"confidence is one of {', '.join(CONFIDENCE)}",
            field="confidence",
        )
    cap = _exact(body["capacity"], {"state", "free_slots", "queue_depth"}, "capacity")
    if cap["state"] not in CAPACITY_STATES:
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"capacity.state is one of {', '.join(CAPACITY_STATES)}",
            field="capacity.state",
        )
    _int(cap["free_slots"], "capacity.free_slots")
    _int(cap["queue_depth"], "capacity.queue_depth")
    _int(body["compute_ms"], "compute_ms")
    owner, current, state = _owned(ctx, wid)
    if owner != ctx.command.actor or epoch != current:
        raise Reject(
            RejectionCode.NOT_OWNER,
            "only the WorkItem's owner under its current ownership epoch discloses its schedule",
            work_item_id=wid,
            ownership_epoch=current,
        )
    if WorkItemState(state) not in DISCLOSABLE:
        raise Reject.wrong_state(
            RejectionCode.INVALID_STATE, f"WorkItem {wid!r}", state, work_item_id=wid
        )
    ctx.emit(
        EventType.WORK_SCHEDULE_DISCLOSED,
        {k: v for k, v in body.items() if k != "work_item_id"},
        work_item_id=wid,
    )


__all__ = ["CAPACITY_STATES", "CONFIDENCE", "DISCLOSABLE", "MAX_WEIGHT", "PRIORITY_CLASSES"]
