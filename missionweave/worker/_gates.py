"""What may start besides its turn: risk gates and resource fit (spec 11.1, MW-11.1-d).

Pure functions over scheduling metadata only (MW-13.3-e): a WorkItem's risk class and the
sizes of its resource demands, never its content.

* **Risk gate.** An item whose risk class is at or above the gate's ``approval_from`` waits
  until its execution is approved; an item whose :data:`RISK_UNITS` would take its Group's
  running risk over that Group's risk budget waits until running items of the Group end.
* **Resource fit.** The agent declares capacities per named dimension (``{"gpu": 2,
  "memory_mb": 16384}``); an item demands sizes in some of them (its contract's
  ``resource_constraints``). It starts only where every demand fits what is free; a dimension
  the agent does not declare is not limited here (admission control is where it is refused).
* **Cost.** Several resources are shared by **Dominant Resource Fairness** (DRF; Ghodsi et
  al., NSDI 2011): an item is charged its *dominant share* — the largest fraction of any one
  capacity it holds, slots included — so a Group of GPU-heavy items spends its share faster
  than one of light items. :func:`cost` is that share relative to one slot: ``1.0`` for an
  item that needs a slot and nothing more, so slot-time fairness is the special case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: A resource demand: ``((dimension, size), ...)``, sizes >= 0 (hashable, for frozen items).
Demand = tuple[tuple[str, int], ...]

#: Risk classes in increasing order (:class:`~missionweave.protocol.RiskClass` values).
RISK_ORDER = ("low", "medium", "high", "critical")
#: Risk units an item of each class holds against its Group's risk budget while it runs.
RISK_UNITS = {"low": 0, "medium": 1, "high": 2, "critical": 4}


def demand(resources: Mapping[str, int]) -> Demand:
    """A contract's ``resource_constraints`` as a :data:`Demand` (sorted, positive sizes)."""
    return tuple(sorted((k, int(v)) for k, v in resources.items() if int(v) > 0))


def risk_rank(risk_class: str) -> int:
    """The position of ``risk_class`` in :data:`RISK_ORDER` (an unknown class ranks highest:
    it is gated like ``critical``)."""
    return RISK_ORDER.index(risk_class) if risk_class in RISK_ORDER else len(RISK_ORDER) - 1


def risk_units(risk_class: str) -> int:
    """Risk units of ``risk_class`` (:data:`RISK_UNITS`; unknown: as ``critical``)."""
    return RISK_UNITS.get(risk_class, RISK_UNITS["critical"])


@dataclass(frozen=True, slots=True)
class RiskGate:
    """When risky items wait.

    Attributes:
        approval_from: the lowest risk class that needs an execution approval before it
            starts (``None``: none is gated by class; a contract's ``approval_required``
            still is, by the dispatcher).
        budgets: per Group, the most :data:`RISK_UNITS` its running items may hold at once.
            A Group not named has no risk budget.
    """

    approval_from: str | None = None
    budgets: Mapping[str, int] = field(default_factory=dict)

    def needs_approval(self, risk_class: str) -> bool:
        """Whether an item of ``risk_class`` waits for an approval."""
        return self.approval_from is not None and risk_rank(risk_class) >= risk_rank(
            self.approval_from
        )

    def within_budget(self, group_id: str, held_units: int, risk_class: str) -> bool:
        """Whether an item of ``risk_class`` may start in ``group_id`` whose running items
        hold ``held_units``."""
        budget = self.budgets.get(group_id)
        return budget is None or held_units + risk_units(risk_class) <= budget


def free_resources(capacity: Mapping[str, int], held: Iterable[Demand]) -> dict[str, int]:
    """What is free of each declared dimension once ``held`` demands are taken."""
    free = dict(capacity)
    for d in held:
        for k, v in d:
            if k in free:
                free[k] -= v
    return free


def fits(d: Demand, free: Mapping[str, int]) -> bool:
    """Whether demand ``d`` fits ``free`` (undeclared dimensions are not limited)."""
    return all(v <= free[k] for k, v in d if k in free)


def cost(d: Demand, capacity: Mapping[str, int], slots: int) -> float:
    """DRF cost of one item relative to one slot: ``max(1, slots × max_r d_r / capacity_r)``."""
    share = max((v / capacity[k] for k, v in d if capacity.get(k)), default=0.0)
    return max(1.0, slots * share)


__all__ = [
    "RISK_ORDER",
    "RISK_UNITS",
    "Demand",
    "RiskGate",
    "cost",
    "demand",
    "fits",
    "free_resources",
    "risk_rank",
    "risk_units",
]
