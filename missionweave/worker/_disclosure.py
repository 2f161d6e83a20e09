"""Schedule disclosure: what an agent tells a WorkItem's Group about when it will run
(spec 11.2, MW-11.2-a/b).

On acceptance (when the WorkItem enters the agent's start queue, and again when it re-enters
after a pause) and on every material change, the agent sends ``work.disclose_schedule`` to the
WorkItem's Group with an estimated start window, a completion estimate, a confidence, its
capacity state and the compute time. :func:`estimate` computes them **from that Group's data
only** — the item, the items of the same Group waiting in this agent's queue, and the agent's
own public facts (its slots, free slots, bound on waiting) — so nothing of another Group (names,
content, assignments, queue positions, queue lengths) can leak into it (MW-11.2-b); the
Authority also refuses any field beyond the closed shape.

The estimate, in milliseconds, with ``ahead`` the Group's items queued before this one (older)
and ``est`` the item's expected duration:

* earliest start: ``now + (ahead // slots) × est`` — the Group had every slot;
* latest start: ``now + (ahead + 1) × est`` — one slot serves the Group — and, with a bound on
  waiting ``max_wait``, at most ``queued_at + max_wait + est`` (the bound gives the item the next
  slot that frees or is freed by cooperative preemption; the scheduler guarantees it);
* completion: the latest start plus ``est``; compute time: ``est``;
* confidence: ``low`` while it waits for an execution approval; else ``high`` when a slot is
  free and nothing of the Group is ahead, ``medium`` when the latest start comes from the bound
  or the handler declares its duration, else ``low``;
* capacity state: ``available`` (a slot free), ``busy``, or ``draining`` (shutting down).

A change is **material** (:func:`material`) when the confidence or capacity state changes, the
latest start moves by more than :data:`MATERIAL_SHIFT_MS` or a quarter of the remaining wait
(whichever is more), or the earliest start comes that much sooner; the window narrowing as
time passes is not. One item's disclosures are at least :data:`MIN_INTERVAL_MS` apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._scheduler import QueuedItem

#: A window end moving by less than this is not a material change, milliseconds.
MATERIAL_SHIFT_MS = 30_000
#: The least time between two disclosures of one WorkItem, milliseconds.
MIN_INTERVAL_MS = 5_000


@dataclass(frozen=True, slots=True)
class Disclosure:
    """One WorkItem's schedule as published (the ``work.disclose_schedule`` body).

    Attributes:
        work_item_id: the WorkItem (of the Group it is sent to).
        ownership_epoch: its ownership epoch.
        earliest_ms: earliest estimated start, epoch ms.
        latest_ms: latest estimated start, epoch ms.
        completion_ms: completion estimate, epoch ms.
        confidence: ``high``, ``medium`` or ``low``.
        capacity: ``available``, ``busy`` or ``draining``.
        free_slots: the agent's free slots now.
        queue_depth: this Group's WorkItems waiting in the agent's queue.
        compute_ms: the expected compute time, milliseconds.
    """

    work_item_id: str
    ownership_epoch: int
    earliest_ms: int
    latest_ms: int
    completion_ms: int
    confidence: str
    capacity: str
    free_slots: int
    queue_depth: int
    compute_ms: int

    def body(self) -> dict[str, Any]:
        """The Command body (exactly the fields the Authority accepts)."""
        return {
            "work_item_id": self.work_item_id,
            "ownership_epoch": self.ownership_epoch,
            "start_window": {"earliest_ms": self.earliest_ms, "latest_ms": self.latest_ms},
            "completion_estimate_ms": self.completion_ms,
            "confidence": self.confidence,
            "capacity": {
                "state": self.capacity,
                "free_slots": self.free_slots,
                "queue_depth": self.queue_depth,
            },
            "compute_ms": self.compute_ms,
        }


def estimate(
    item: QueuedItem,
    group_queue: Sequence[QueuedItem],
    *,
    slots: int,
    free_slots: int,
    max_wait_ms: int | None,
    now_ms: int,
    declared: bool = False,
    draining: bool = False,
    held: bool = False,
) -> Disclosure:
    """The disclosure of ``item`` (see the module for the rules).

    Args:
        item: the queued WorkItem.
        group_queue: the WorkItems of ``item``'s Group waiting in this agent's queue (it may
            include ``item``); items of other Groups are refused.
        slots: the agent's slots (its card's ``max_concurrency``).
        free_slots: its free slots now.
        max_wait_ms: the scheduler's bound on waiting (``None``: none).
        now_ms: now, epoch ms.
        declared: whether the handler declares its duration (``item.estimate_ms``).
        draining: the agent is shutting down.
        held: it waits for an execution approval (its start depends on it: ``low``).

    Raises:
        ValueError: ``group_queue`` holds an item of another Group.
    """
    if any(q.group_id != item.group_id for q in group_queue):
        raise ValueError("a disclosure is computed from its own Group's queue only")
    est = max(0, item.estimate_ms)
    mine = (item.queued_at_ms, item.work_item_id)
    ahead = sum(1 for q in group_queue if (q.queued_at_ms, q.work_item_id) < mine)
    earliest = now_ms + (ahead // max(1, slots)) * est
    latest = now_ms + (ahead + 1) * est
    bounded = False
    if max_wait_ms is not None:
        bound = max(now_ms, item.queued_at_ms + max_wait_ms) + est
        if bound < latest:
            latest, bounded = bound, True
    if held:
        confidence = "low"
    elif free_slots > 0 and ahead == 0:
        earliest = latest = now_ms
        confidence = "high"
    else:
        confidence = "medium" if bounded or declared else "low"
    earliest = min(earliest, latest)
    capacity = "draining" if draining else ("available" if free_slots > 0 else "busy")
    depth = len({q.work_item_id for q in group_queue} | {item.work_item_id})
    return Disclosure(
        item.work_item_id,
        item.ownership_epoch,
        earliest,
        latest,
        latest + est,
        confidence,
        capacity,
        free_slots,
        depth,
        est,
    )


def material(old: Disclosure | None, new: Disclosure, now_ms: int) -> bool:
    """Whether ``new`` differs materially from the last disclosure ``old`` (``None``: never
    disclosed, so it is material)."""
    if old is None:
        return True
    if (old.confidence, old.capacity) != (new.confidence, new.capacity):
        return True
    slack = max(MATERIAL_SHIFT_MS, (old.latest_ms - now_ms) // 4)
    return abs(new.latest_ms - old.latest_ms) > slack or new.earliest_ms < old.earliest_ms - slack


__all__ = ["MATERIAL_SHIFT_MS", "MIN_INTERVAL_MS", "Disclosure", "estimate", "material"]
