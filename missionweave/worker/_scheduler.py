"""The agent's scheduler: which queued WorkItems start in which free slots (spec 11.1,
docs/design.md §7).

Pure and synchronous: given the per-Group queues, the running slots and the time, :meth:`plan`
says what to start, what to ask to pause and which items missed their start deadline. It sees
scheduling metadata only (:class:`QueuedItem`, :class:`RunningItem`: ids, times, weights),
never Mission content (MW-13.3-e).

The algorithm is **start-time fair queuing** (SFQ; Goyal, Vin and Cheng, SIGCOMM 1996) with
slot-time as the service measured, at two levels:

1. *Groups, by weight* (MW-11.1-d): each Group's virtual time grows by the slot-milliseconds
   its WorkItems hold divided by its weight (the organization's priority class × the Group's
   weight, set by policy — the Group log's ``group.priority_set``, which the runtime passes
   to :meth:`Scheduler.set_weight` — never by a Coordinator's Command);
   the next slot goes to the backlogged Group with the least virtual time. A Group that was
   idle re-enters at the least virtual time of the active Groups: idleness banks no credit.
   Over a busy period each backlogged Group's share of slot-time tends to its weight's share.
2. *Missions within a Group, equally*: the same rule with weight 1 per Mission, so a
   Coordinator's tight deadline orders its own Mission's items only and cannot jump another
   Mission's (a Coordinator supplies urgency and deadlines but MUST NOT force its Mission
   ahead, spec 11.1). Within a Mission: earliest start deadline, then oldest.

Over both stands a **bound on waiting** (MW-11.1-c): an item that has waited
``max_wait_ms`` goes before every share, oldest first, inside its Group as across Groups; when
no slot frees up for a Group that waited that long with nothing running, the scheduler asks
the longest-running interruptible handler of the most-served Group to pause at its next safe
checkpoint (cooperative preemption, MW-11.3-g). Per-Group quotas cap the slots one Group holds.

Before its turn counts, an item must pass the gates of :mod:`._gates`: a risk class that needs
an approval waits for it, a Group's risk budget caps the risk its running items hold, and an
item starts only where its resource demands fit what is free. With several resources the
service charged is the item's **dominant share** (Dominant Resource Fairness, Ghodsi et al.,
NSDI 2011) relative to one slot — slot-time alone when an item demands nothing else.

A slot started in a plan is charged :data:`QUANTUM_MS` at once (so that one plan that fills
several slots spreads them by weight); the charge is then settled against the slot-time
actually held, measured at every plan (the dispatcher plans on every change and every second).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from ._gates import Demand, RiskGate, cost, fits, free_resources, risk_units

#: Slot-milliseconds charged in advance for each start, settled against what it really holds.
QUANTUM_MS = 1_000


@dataclass(frozen=True, slots=True)
class QueuedItem:
    """A queued WorkItem this agent owns: scheduling metadata only (MW-13.3-e).
    Implements MW-13.3-e.

    Attributes:
        group_id: its Group.
        work_item_id: its id.
        mission_id: its Mission.
        ownership_epoch: the ownership epoch to start it under.
        start_deadline_ms: when ownership lapses if not started, epoch ms (``None``: unknown).
        queued_at_ms: when it (re-)entered the queue, epoch ms (its age).
        lease_ms: its contract's lease length, milliseconds.
        risk_class: its contract's risk class (``low`` … ``critical``; the risk gate).
        approved: whether its execution is approved (an item the risk gate holds waits
            until it is).
        resources: its resource demand, ``((dimension, size), ...)`` (resource fit, DRF).
        estimate_ms: how long it is expected to hold its slot, milliseconds (schedule
            disclosure, MW-11.2-a).
    """

    group_id: str
    work_item_id: str
    mission_id: str
    ownership_epoch: int
    start_deadline_ms: int | None
    queued_at_ms: int
    lease_ms: int = 60_000
    risk_class: str = "low"
    approved: bool = False
    resources: Demand = ()
    estimate_ms: int = 60_000


#: Per Group, its eligible queued items (not running, not starting): what a plan starts from.
Queues: TypeAlias = Mapping[str, Sequence[QueuedItem]]


@dataclass(frozen=True, slots=True)
class RunningItem:
    """A WorkItem holding a slot.

    Attributes:
        group_id: its Group.
        work_item_id: its id.
        started_at_ms: when it started, epoch ms.
        interruptible: whether its contract allows a pause at a checkpoint.
        mission_id: its Mission (``""``: unknown; its slot-time is then the Group's only).
        risk_class: its risk class (it holds its risk units against the Group's budget).
        resources: its resource demand (held until it ends).
    """

    group_id: str
    work_item_id: str
    started_at_ms: int
    interruptible: bool = True
    mission_id: str = ""
    risk_class: str = "low"
    resources: Demand = ()


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


def _in_mission_order(item: QueuedItem) -> tuple[int, int, str]:
    deadline = item.start_deadline_ms if item.start_deadline_ms is not None else 2**62
    return (deadline, item.queued_at_ms, item.work_item_id)


class _Fair:
    """Virtual times of one level (Groups, or one Group's Missions): SFQ's bookkeeping.
    Implements MW-11.1-d."""

    def __init__(self) -> None:
        self.vt: dict[str, float] = {}

    def enter(self, active: set[str]) -> None:
        """Members active now; one that was idle starts at the least active virtual time."""
        floor = min((self.vt[k] for k in active if k in self.vt), default=0.0)
        for k in active:
            self.vt[k] = max(self.vt.get(k, floor), floor)

    def charge(self, key: str, ms: float, weight: float) -> None:
        self.vt[key] = self.vt.get(key, 0.0) + ms / weight

    def keep(self, keys: set[str]) -> None:
        """Forget the members not in ``keys`` (a Mission long gone; one that comes back
        re-enters at the floor, as an idle one does)."""
        self.vt = {k: v for k, v in self.vt.items() if k in keys}

    def least(self, candidates: Sequence[str]) -> str:
        return min(candidates, key=lambda k: (self.vt.get(k, 0.0), k))


class Scheduler:
    """Weighted fair scheduling of queued WorkItems into execution slots (see the module).
    Implements MW-11.3-g.

    Args:
        slots: the card's ``max_concurrency`` (MW-11.1-e).
        max_wait_ms: the bound on waiting: an item that waited this long goes first, and
            a Group that waited this long with no slot triggers a cooperative preemption
            (``None``: no bound, no preemption).
        start_margin_ms: do not start an item whose start deadline is closer than this (the
            ``work.start`` would arrive too late).
        weights: per Group, its weight (priority class × Group weight, from policy); a Group
            not named has ``default_weight``.
        quotas: per Group, the most slots it may hold at once.
        default_weight: the weight of a Group ``weights`` does not name.
        risk_gate: which risk classes wait for an approval, and each Group's risk budget
            (``None``: no risk gate).
        resources: the agent's capacity per resource dimension, e.g. ``{"gpu": 2}`` (resource
            fit and DRF cost; ``None``: slots only).

    Raises:
        ValueError: ``slots`` < 1, a weight not > 0, a quota < 1 or a capacity < 1.
    """

    def __init__(
        self,
        slots: int,
        *,
        max_wait_ms: int | None = None,
        start_margin_ms: int = 0,
        weights: Mapping[str, float] | None = None,
        quotas: Mapping[str, int] | None = None,
        default_weight: float = 1.0,
        risk_gate: RiskGate | None = None,
        resources: Mapping[str, int] | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.slots = slots
        self.max_wait_ms = max_wait_ms
        self.start_margin_ms = start_margin_ms
        self.default_weight = default_weight
        self._weights: dict[str, float] = {}
        self._quotas: dict[str, int] = {}
        for g, w in (weights or {}).items():
            self.set_weight(g, w)
        for g, q in (quotas or {}).items():
            if q < 1:
                raise ValueError(f"quota of {g} must be >= 1")
            self._quotas[g] = q
        if default_weight <= 0:
            raise ValueError("default_weight must be > 0")
        self.risk_gate = risk_gate or RiskGate()
        self.resources = dict(resources or {})
        if any(v < 1 for v in self.resources.values()):
            raise ValueError("every resource capacity must be >= 1")
        self._groups = _Fair()
        self._missions: dict[str, _Fair] = {}
        #: per running slot (group, item): (mission, settled until epoch ms, prepaid ms, cost)
        self._held: dict[tuple[str, str], tuple[str, int, float, float]] = {}

    def set_weight(self, group_id: str, weight: float) -> None:
        """Change a Group's weight (a policy or MissionOwner decision, MW-11.1-d); it counts
        from the next plan on: queued items are reordered at once, running ones are not.

        Raises:
            ValueError: ``weight`` not > 0.
        """
        if not weight > 0:
            raise ValueError(f"weight of {group_id} must be > 0")
        self._weights[group_id] = float(weight)

    def weight(self, group_id: str) -> float:
        """The Group's weight (``default_weight`` when none was set)."""
        return self._weights.get(group_id, self.default_weight)

    def virtual_times(self) -> dict[str, float]:
        """Each Group's virtual time: weighted slot-milliseconds served (for tests and
        figures)."""
        return dict(self._groups.vt)

    # ----------------------------------------------------------------------- accounting

    def _settle(self, running: Sequence[RunningItem], now_ms: int) -> None:
        """Charge every slot for the time it held since the last plan, less what was
        prepaid when it started; a slot gone since is charged up to now."""
        current = {(r.group_id, r.work_item_id): r for r in running}
        for key, (mission, since, prepaid, c) in list(self._held.items()):
            held = max(0, now_ms - since)
            due = max(0.0, held - prepaid)
            self._charge(key[0], mission, due * c)
            if key in current:  # a clock that went back charges nothing twice
                self._held[key] = (mission, max(since, now_ms), max(0.0, prepaid - held), c)
            else:
                del self._held[key]
        for key, r in current.items():
            if key not in self._held:  # started outside a plan of ours (a resumed item)
                c = cost(r.resources, self.resources, self.slots)
                self._charge(r.group_id, r.mission_id, max(0, now_ms - r.started_at_ms) * c)
                self._held[key] = (r.mission_id, now_ms, 0.0, c)

    def _charge(self, group: str, mission: str, ms: float) -> None:
        if ms <= 0:
            return
        self._groups.charge(group, ms, self.weight(group))
        self._missions.setdefault(group, _Fair()).charge(mission, ms, 1.0)

    # --------------------------------------------------------------------------- plan

    def plan(
        self,
        queues: Queues,
        running: Sequence[RunningItem],
        now_ms: int,
    ) -> SchedulePlan:
        """Decide what to start now.

        Args:
            queues: per Group, its eligible queued items (not running, not starting).
            running: the items holding a slot (including starts in flight).
            now_ms: the current time, epoch ms.

        Returns:
            The plan; ``len(plan.start) <= slots - len(running)`` always, and no Group
            beyond its quota.

        Implements MW-11.1-c (the Worker-owned scheduler has the final say on cross-Group
        order, with a bound on waiting), MW-11.1-d (weighted shares by policy),
        MW-11.1-e (slot limit) and MW-11.3-g (cooperative preemption).
        """
        plan = SchedulePlan()
        self._settle(running, now_ms)
        ready: dict[str, list[QueuedItem]] = {}
        seen: set[tuple[str, str]] = set()
        for g, items in queues.items():
            for it in items:
                if (it.group_id, it.work_item_id) in seen:
                    continue  # listed twice: started once
                seen.add((it.group_id, it.work_item_id))
                dl = it.start_deadline_ms
                if dl is not None and now_ms + self.start_margin_ms >= dl:
                    plan.missed.append(it)
                else:
                    ready.setdefault(g, []).append(it)
        held: dict[str, int] = {}
        risk: dict[str, int] = {}
        for r in running:
            held[r.group_id] = held.get(r.group_id, 0) + 1
            risk[r.group_id] = risk.get(r.group_id, 0) + risk_units(r.risk_class)
        free_res = free_resources(self.resources, (r.resources for r in running))
        gate = self.risk_gate
        for g in list(ready) if gate.approval_from is not None else ():
            # the approval gate: such an item is not ready at all
            ready[g] = [i for i in ready[g] if i.approved or not gate.needs_approval(i.risk_class)]
            if not ready[g]:
                del ready[g]
        self._groups.enter(set(ready) | set(held))
        held_missions: dict[str, set[str]] = {}
        for (g, _), (m, _, _, _) in self._held.items():
            held_missions.setdefault(g, set()).add(m)
        for g, fair in self._missions.items():  # bounded by what is queued or running now
            fair.keep({i.mission_id for i in ready.get(g, ())} | held_missions.get(g, set()))
        for g, items in ready.items():
            self._missions.setdefault(g, _Fair()).enter({i.mission_id for i in items})
        free = self.slots - len(running)
        while free > 0:
            pick = self._next(ready, held, risk, free_res, now_ms)
            if pick is None:
                break
            ready[pick.group_id].remove(pick)
            if not ready[pick.group_id]:
                del ready[pick.group_id]
            held[pick.group_id] = held.get(pick.group_id, 0) + 1
            risk[pick.group_id] = risk.get(pick.group_id, 0) + risk_units(pick.risk_class)
            free_res = free_resources(free_res, [pick.resources])
            c = cost(pick.resources, self.resources, self.slots)
            self._charge(pick.group_id, pick.mission_id, QUANTUM_MS * c)
            self._held[(pick.group_id, pick.work_item_id)] = (
                pick.mission_id,
                now_ms,
                QUANTUM_MS,
                c,
            )
            plan.start.append(pick)
            free -= 1
        if ready and self.max_wait_ms is not None:
            plan.preempt = self._preemptions(ready, running, now_ms)
        return plan

    def _next(
        self,
        ready: Mapping[str, list[QueuedItem]],
        held: Mapping[str, int],
        risk: Mapping[str, int],
        free_res: Mapping[str, int],
        now_ms: int,
    ) -> QueuedItem | None:
        """The item the next free slot goes to, or ``None`` (nothing ready within quota,
        risk budget and free resources). Implements MW-11.1-c."""
        gate = self.risk_gate
        gated = bool(self.resources) or bool(gate.budgets)
        startable = {
            g: [
                i
                for i in ready[g]
                if gate.within_budget(g, risk.get(g, 0), i.risk_class)
                and fits(i.resources, free_res)
            ]
            if gated
            else ready[g]
            for g in ready
            if held.get(g, 0) < self._quotas.get(g, self.slots)
        }
        open_groups = [g for g, items in startable.items() if items]
        if not open_groups:
            return None
        if self.max_wait_ms is not None:  # the bound first, oldest first
            bound = now_ms - self.max_wait_ms
            overdue = [i for g in ready for i in ready[g] if i.queued_at_ms <= bound]
            if overdue:
                first = min(overdue, key=lambda i: (i.queued_at_ms, i.group_id, i.work_item_id))
                if first in startable.get(first.group_id, ()):
                    return first
                # it waits for resources (or its Group's quota or risk budget): nothing that
                # would take what it needs goes before it — the resources it demands, its
                # Group's risk budget — a reservation, so that it cannot starve
                need = {k for k, _ in first.resources}
                for g in open_groups:
                    startable[g] = [
                        i
                        for i in startable[g]
                        if not need & {k for k, _ in i.resources}
                        and not (g == first.group_id and risk_units(i.risk_class) > 0)
                    ]
                open_groups = [g for g in open_groups if startable[g]]
                overdue = [i for g in open_groups for i in startable[g] if i.queued_at_ms <= bound]
                if overdue:
                    return min(overdue, key=lambda i: (i.queued_at_ms, i.group_id, i.work_item_id))
                if not open_groups:
                    return None
        g = self._groups.least(open_groups)
        missions = self._missions[g]
        m = missions.least(sorted({i.mission_id for i in startable[g]}))
        return min((i for i in startable[g] if i.mission_id == m), key=_in_mission_order)

    def _preemptions(
        self,
        waiting: Queues,
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


__all__ = ["QUANTUM_MS", "QueuedItem", "RunningItem", "SchedulePlan", "Scheduler"]
