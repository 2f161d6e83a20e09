"""A discrete-event simulation of an agent's slots on a fake clock, for the scheduler's fairness
tests and ``bench/scheduler_fairness.py`` (in the style of Kubernetes APF's queueset tests).

Every Group is kept backlogged: each holds ``backlog`` queued WorkItems, and a new one arrives
as soon as one starts (a closed loop). Each WorkItem holds its slot for its Group's duration.
The simulation measures what each Group really got — slot-milliseconds, from the simulated
starts and ends, not the scheduler's own books — and how long each WorkItem waited.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from missionweave.worker._gates import Demand
from missionweave.worker._scheduler import QueuedItem, Queues, RunningItem, SchedulePlan

T0 = 1_700_000_000_000


class Plans(Protocol):
    def plan(
        self,
        queues: Queues,
        running: Sequence[RunningItem],
        now_ms: int,
    ) -> SchedulePlan: ...


@dataclass
class Outcome:
    """What a simulated run gave each Group.

    Attributes:
        served_ms: slot-milliseconds each Group held within the horizon.
        waits_ms: each started WorkItem's wait, per Group, milliseconds.
        starts: the started WorkItems in order, ``(group, mission, item)``.
    """

    served_ms: dict[str, int] = field(default_factory=dict)
    waits_ms: dict[str, list[int]] = field(default_factory=dict)
    starts: list[tuple[str, str, str]] = field(default_factory=list)

    def shares(self) -> dict[str, float]:
        """Each Group's fraction of all slot-time served."""
        total = sum(self.served_ms.values()) or 1
        return {g: s / total for g, s in self.served_ms.items()}

    def max_wait_ms(self) -> int:
        return max((w for ws in self.waits_ms.values() for w in ws), default=0)

    def p99_wait_ms(self) -> int:
        waits = sorted(w for ws in self.waits_ms.values() for w in ws)
        return waits[min(len(waits) - 1, int(len(waits) * 0.99))] if waits else 0


def weighted_shares(weights: Mapping[str, float]) -> dict[str, float]:
    """Each Group's weighted share: its weight over the sum of weights."""
    total = sum(weights.values())
    return {g: w / total for g, w in weights.items()}


def simulate(
    scheduler: Plans,
    durations_ms: Mapping[str, int],
    *,
    slots: int,
    horizon_ms: int,
    backlog: int = 3,
    missions: Mapping[str, Sequence[str]] | None = None,
    deadline_ms: Mapping[str, int] | None = None,
    resources: Mapping[str, Demand] | None = None,
) -> Outcome:
    """Run ``scheduler`` over ``horizon_ms`` of fake time with every Group backlogged.

    Args:
        scheduler: anything with the ``plan`` method of
            :class:`~missionweave.worker._scheduler.Scheduler`.
        durations_ms: per Group, how long each of its WorkItems holds a slot.
        slots: the agent's slots.
        horizon_ms: simulated milliseconds.
        backlog: queued WorkItems each Group keeps.
        missions: per Group, the Missions its arrivals cycle through (default: one, ``m``).
        deadline_ms: per Group, a start deadline this far after each arrival (default none).
        resources: per Group, each of its WorkItems' resource demand (default none).

    Returns:
        The :class:`Outcome`.
    """
    now, end = T0, T0 + horizon_ms
    out = Outcome(served_ms=dict.fromkeys(durations_ms, 0), waits_ms={g: [] for g in durations_ms})
    queues: dict[str, list[QueuedItem]] = {g: [] for g in durations_ms}
    made = dict.fromkeys(durations_ms, 0)

    def arrive(g: str) -> None:
        n = made[g]
        made[g] += 1
        ms = (missions or {}).get(g) or ["m"]
        dl = (deadline_ms or {}).get(g)
        queues[g].append(
            QueuedItem(
                g,
                f"{g}-{n}",
                ms[n % len(ms)],
                1,
                None if dl is None else now + dl,
                now,
                resources=(resources or {}).get(g, ()),
            )
        )

    for g in durations_ms:
        for _ in range(backlog):
            arrive(g)
    running: dict[tuple[str, str], RunningItem] = {}
    ends: list[tuple[int, str, str]] = []
    while now < end:
        plan = scheduler.plan(queues, list(running.values()), now)
        for it in plan.start:
            queues[it.group_id].remove(it)
            running[(it.group_id, it.work_item_id)] = RunningItem(
                it.group_id,
                it.work_item_id,
                now,
                mission_id=it.mission_id,
                resources=it.resources,
            )
            heapq.heappush(ends, (now + durations_ms[it.group_id], it.group_id, it.work_item_id))
            out.waits_ms[it.group_id].append(now - it.queued_at_ms)
            out.starts.append((it.group_id, it.mission_id, it.work_item_id))
            arrive(it.group_id)
        for it in plan.missed:
            queues[it.group_id].remove(it)
            arrive(it.group_id)
        if not ends:
            break
        now = ends[0][0]
        while ends and ends[0][0] == now:
            _, g, wid = heapq.heappop(ends)
            r = running.pop((g, wid))
            out.served_ms[g] += min(now, end) - min(r.started_at_ms, end)
    for r in running.values():  # still running at the horizon
        out.served_ms[r.group_id] += max(0, end - r.started_at_ms)
    return out


@dataclass
class _Control(ABC):
    """A negative control: starts what :meth:`pick` chooses for the free slots; no
    preemption, no deadlines."""

    slots: int

    def plan(self, queues: Queues, running: Sequence[RunningItem], now_ms: int) -> SchedulePlan:
        return SchedulePlan(start=self.pick(queues, self.slots - len(running)))

    @abstractmethod
    def pick(self, queues: Queues, free: int) -> list[QueuedItem]:
        """At most ``free`` items to start, in order."""


@dataclass
class RoundRobin(_Control):
    """The scheduler this project had before (a negative control): Groups in turn, one start
    each, earliest deadline first inside a Group; no weights."""

    last: str = ""

    def pick(self, queues: Queues, free: int) -> list[QueuedItem]:
        start: list[QueuedItem] = []
        ready = {
            g: sorted(q, key=lambda i: (i.start_deadline_ms or 2**62, i.queued_at_ms))
            for g, q in queues.items()
            if q
        }
        while len(start) < free and ready:
            groups = sorted(ready)
            turn = [g for g in groups if g > self.last] + [g for g in groups if g <= self.last]
            g = self.last = turn[0]
            start.append(ready[g].pop(0))
            if not ready[g]:
                del ready[g]
        return start


@dataclass
class StrictPriority(_Control):
    """Highest weight first, always (a negative control: spec 11.1 says it is not conformant)."""

    weights: Mapping[str, float]

    def pick(self, queues: Queues, free: int) -> list[QueuedItem]:
        items = sorted(
            (i for q in queues.values() for i in q),
            key=lambda i: (-self.weights[i.group_id], i.queued_at_ms),
        )
        return items[: max(0, free)]
