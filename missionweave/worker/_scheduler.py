"""The agent's scheduler: which queued WorkItems start in which free slots (spec 11.1,
docs/design.md §7).

Pure and synchronous: given the per-Group queues, the running slots and the time, :meth:`plan`
says what to start, what to ask to pause and which items missed their start deadline. It sees
scheduling metadata only, never Mission content (MW-13.3-e).

This version is round-robin across Groups with earliest-start-deadline order inside a Group:
no Group can starve another, however long its queue (MW-11.1-c). A Group whose oldest item has
waited longer than ``max_wait_ms`` while every slot is taken by other Groups gets a slot by
cooperative preemption (MW-11.3-g): the scheduler asks the longest-running interruptible
handler of the most-served Group to pause. The weighted-fair version (priority classes, Group
weights, quotas, risk gates; MW-11.1-d) replaces :meth:`Scheduler.plan` later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class QueuedItem:
    """A queued WorkItem this agent owns.

    Attributes:
        group_id: its Group.
        work_item_id: its id.
        mission_id: its Mission.
        ownership_epoch: the ownership epoch to start it under.
        start_deadline_ms: when ownership lapses if not started, epoch ms (``None``: unknown).
        queued_at_ms: when it (re-)entered the queue, epoch ms (its age).
        lease_ms: its contract's lease length, milliseconds.
    """

    group_id: str
    work_item_id: str
    mission_id: str
    ownership_epoch: int
    start_deadline_ms: int | None
    queued_at_ms: int
    lease_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class RunningItem:
    """A WorkItem holding a slot.

    Attributes:
        group_id: its Group.
        work_item_id: its id.
        started_at_ms: when it started, epoch ms.
        interruptible: whether its contract allows a pause at a checkpoint.
    """

    group_id: str
    work_item_id: str
    started_at_ms: int
    interruptible: bool = True


@dataclass(slots=True)
class SchedulePlan:
    """What to do now.

    Attributes:
        start: items to start, in order (at most the free slots).
        preempt: running items to ask to pause.
        missed: items whose start deadline has passed (not started; the Coordinator
            reassigns them, MW-11.5-a).
    """

    start: list[QueuedItem] = field(default_factory=list)
    preempt: list[RunningItem] = field(default_factory=list)
    missed: list[QueuedItem] = field(default_factory=list)


def _order(item: QueuedItem) -> tuple[int, int, str]:
    deadline = item.start_deadline_ms if item.start_deadline_ms is not None else 2**62
    return (deadline, item.queued_at_ms, item.work_item_id)


class Scheduler:
    """Round-robin scheduling of queued WorkItems into execution slots.

    Args:
        slots: the card's ``max_concurrency`` (MW-11.1-e).
        max_wait_ms: the anti-starvation bound: a Group waiting longer than this with no slot
            triggers a cooperative preemption (``None``: never preempt).
        start_margin_ms: do not start an item whose start deadline is closer than this (the
            ``work.start`` would arrive too late).

    Raises:
        ValueError: ``slots`` < 1.
    """

    def __init__(
        self, slots: int, *, max_wait_ms: int | None = None, start_margin_ms: int = 0
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.slots = slots
        self.max_wait_ms = max_wait_ms
        self.start_margin_ms = start_margin_ms
        self._last_group: str | None = None

    def _rotation(self, groups: Sequence[str]) -> list[str]:
        """Groups in round-robin order, starting after the last one served."""
        ordered = sorted(groups)
        if self._last_group is None:
            return ordered
        after = [g for g in ordered if g > self._last_group]
        return after + [g for g in ordered if g <= self._last_group]

    def plan(
        self,
        queues: Mapping[str, Sequence[QueuedItem]],
        running: Sequence[RunningItem],
        now_ms: int,
    ) -> SchedulePlan:
        """Decide what to start now.

        Args:
            queues: per Group, its eligible queued items (not running, not starting).
            running: the items holding a slot (including starts in flight).
            now_ms: the current time, epoch ms.

        Returns:
            The plan; ``len(plan.start) <= slots - len(running)`` always.

        Implements MW-11.1-c (the Worker-owned scheduler has the final say on cross-Group
        order; round-robin so that no Group starves another) and MW-11.1-e (slot limit).
        """
        plan = SchedulePlan()
        ready: dict[str, list[QueuedItem]] = {}
        for g, items in queues.items():
            keep = []
            for it in sorted(items, key=_order):
                dl = it.start_deadline_ms
                if dl is not None and now_ms + self.start_margin_ms >= dl:
                    plan.missed.append(it)
                else:
                    keep.append(it)
            if keep:
                ready[g] = keep
        free = self.slots - len(running)
        while free > 0 and ready:
            for g in self._rotation(list(ready)):
                if free == 0:
                    break
                plan.start.append(ready[g].pop(0))
                self._last_group = g
                free -= 1
                if not ready[g]:
                    del ready[g]
        if ready and self.max_wait_ms is not None:
            plan.preempt = self._preemptions(ready, running, now_ms)
        return plan

    def _preemptions(
        self,
        waiting: Mapping[str, Sequence[QueuedItem]],
        running: Sequence[RunningItem],
        now_ms: int,
    ) -> list[RunningItem]:
        assert self.max_wait_ms is not None
        served: dict[str, list[RunningItem]] = {}
        for r in running:
            served.setdefault(r.group_id, []).append(r)
        out: list[RunningItem] = []
        for g in sorted(waiting):
            oldest = min(it.queued_at_ms for it in waiting[g])
            if g in served or now_ms - oldest < self.max_wait_ms:
                continue
            victims = [r for r in running if r.interruptible and r not in out]
            if not victims:
                continue
            most = max(len(served[v.group_id]) for v in victims)
            pick = min(
                (v for v in victims if len(served[v.group_id]) == most),
                key=lambda v: (v.started_at_ms, v.work_item_id),
            )
            out.append(pick)
        return out


__all__ = ["QueuedItem", "RunningItem", "SchedulePlan", "Scheduler"]
