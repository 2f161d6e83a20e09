"""Admission control: answer an offer with ``Accept`` or ``Decline(reason, detail)``.

Acceptance is a durable scheduling commitment, not immediate execution (MW-10.3-d), so before
accepting the runtime checks, in order: authorization (the ``worker`` role in the Group),
capability (a registered handler for every required capability), an unambiguous contract
(MW-10.1-b), queue capacity (per-Group queue depth), concurrency (can it start before the
start deadline?), the deadline, dependencies (a pluggable check) and budget. It declines with a
structured reason when it cannot make a credible commitment (MW-10.3-e).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol import AgentCard, DeclineReason, WorkContract
from ._handlers import HandlerRegistry

#: ``(group_id, contract) -> None`` when every input and dependency is readable, else a short
#: description of what is not (the decline's detail).
DependencyCheck = Callable[[str, WorkContract], str | None]

#: Decline token for a contract with open questions (MW-10.1-b); not one of the six standard
#: reasons, which the Authority accepts and flags ``standard_reason: false``.
AMBIGUOUS = "ambiguous_contract"


@dataclass(frozen=True, slots=True)
class Accept:
    """Admit the WorkItem: send ``work.accept_offer``.

    Attributes:
        expected_start_ms: the estimated wait before a slot is free, milliseconds, counting
            the work queued in *every* Group: it decides whether the start deadline can be
            met, and is never published as it is (it would tell a Group the length of the
            others' queues, MW-11.2-b); the Group is told its own estimate instead
            (``work.disclose_schedule``, :mod:`._disclosure`, MW-11.2-a).
    """

    expected_start_ms: int = 0


@dataclass(frozen=True, slots=True)
class Decline:
    """Refuse the offer with a structured reason (MW-10.3-e).

    Attributes:
        reason: one of :class:`DeclineReason`, or :data:`AMBIGUOUS`.
        detail: machine-readable facts (limits, missing capabilities, …).
    """

    reason: DeclineReason | str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    """The runtime's admission settings.

    Attributes:
        max_queue_depth: most WorkItems per Group accepted to wait for a slot (accepted, not
            yet started); an offer that can start at once is not held by it, so ``0`` means
            "take work only when it can start now".
        default_estimate_ms: expected duration of one execution when the handler declares
            none, milliseconds.
        dependency_check: decides whether the contract's inputs are readable (``None``: all
            are).
    """

    max_queue_depth: int = 16
    default_estimate_ms: int = 60_000
    dependency_check: DependencyCheck | None = None


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The facts about one offer that admission control weighs.

    Attributes:
        group_id: the Group.
        work_item_id: the WorkItem offered.
        contract: its contract (``None`` when the projection does not know it).
        roles: this agent's roles in the Group.
        queue_depth: this agent's queued WorkItems in the Group (accepted, not started).
        queued_total: queued WorkItems across all Groups.
        busy_slots: execution slots taken now.
        now_ms: the current time, epoch milliseconds.
    """

    group_id: str
    work_item_id: str
    contract: WorkContract | None
    roles: frozenset[str]
    queue_depth: int
    queued_total: int
    busy_slots: int
    now_ms: int


class AdmissionControl:
    """Decide offers for one agent.

    Args:
        card: the agent's card (``max_concurrency``, cost).
        registry: its handlers.
        policy: the settings.
    """

    def __init__(
        self, card: AgentCard, registry: HandlerRegistry, policy: AdmissionPolicy | None = None
    ) -> None:
        self.card = card
        self.registry = registry
        self.policy = policy or AdmissionPolicy()

    def estimate_ms(self, contract: WorkContract) -> int:
        """Expected duration of one execution of ``contract``, milliseconds."""
        return self.estimate(contract)[0]

    def estimate(self, contract: WorkContract) -> tuple[int, bool]:
        """Expected duration of one execution of ``contract``, milliseconds, and whether its
        handler declares it (else it is the policy's ``default_estimate_ms``)."""
        spec, _ = self.registry.for_capabilities(contract.required_capabilities)
        if spec is not None and spec.estimate_ms is not None:
            return spec.estimate_ms, True
        return self.policy.default_estimate_ms, False

    def expected_wait_ms(self, req: AdmissionRequest, estimate_ms: int) -> int:
        """Estimated wait before this WorkItem gets a slot: the work ahead of it spread over
        the slots, in rounds of ``estimate_ms``."""
        slots = self.card.max_concurrency
        ahead = req.queued_total + req.busy_slots - slots + 1
        return 0 if ahead <= 0 else math.ceil(ahead / slots) * estimate_ms

    def decide(self, req: AdmissionRequest) -> Accept | Decline:
        """Accept or decline one offer (MW-10.3-d, MW-10.3-e).
        Implements MW-10.1-b, MW-10.3-d and MW-10.3-e."""
        if "worker" not in req.roles:
            return Decline(
                DeclineReason.AUTHORIZATION, {"role": "worker", "roles": sorted(req.roles)}
            )
        c = req.contract
        if c is None:
            return Decline(DeclineReason.DEPENDENCY, {"missing": "contract"})
        _, missing = self.registry.for_capabilities(c.required_capabilities)
        if missing:
            return Decline(
                DeclineReason.CAPABILITY,
                {"missing": missing, "available": self.registry.capabilities},
            )
        if c.open_questions:
            return Decline(AMBIGUOUS, {"open_questions": list(c.open_questions)})
        # the queue bound holds work that would wait: an offer that can start at once (a free
        # slot and nothing queued ahead of it) never sits in the queue
        waits = req.queued_total + req.busy_slots >= self.card.max_concurrency
        if waits and req.queue_depth >= self.policy.max_queue_depth:
            return Decline(
                DeclineReason.CAPACITY,
                {
                    "limit": "queue_depth",
                    "queue_depth": req.queue_depth,
                    "max_queue_depth": self.policy.max_queue_depth,
                },
            )
        estimate = self.estimate_ms(c)
        wait = self.expected_wait_ms(req, estimate)
        # The wait is computed over every Group's queue (the decision is this agent's own), but
        # the decline's detail goes into the offering Group's log: it names no figure derived
        # from other Groups' work (MW-11.2-b), only this Group's contract and the agent's card.
        if wait >= c.timeouts.start_deadline_ms:
            return Decline(
                DeclineReason.CAPACITY,
                {
                    "limit": "concurrency",
                    "max_concurrency": self.card.max_concurrency,
                    "start_deadline_ms": c.timeouts.start_deadline_ms,
                },
            )
        if c.deadline_ms is not None and req.now_ms + wait + estimate > c.deadline_ms:
            return Decline(DeclineReason.DEADLINE, {"deadline_ms": c.deadline_ms})
        check = self.policy.dependency_check
        if check is not None:
            problem = check(req.group_id, c)
            if problem is not None:
                return Decline(DeclineReason.DEPENDENCY, {"unreadable": problem})
        budget = c.budget
        if budget.money is not None:
            if budget.money.currency != self.card.currency:
                return Decline(
                    DeclineReason.BUDGET,
                    {"currency": budget.money.currency, "card_currency": self.card.currency},
                )
            if self.card.cost_per_item_minor_units > budget.money.amount_minor_units:
                return Decline(
                    DeclineReason.BUDGET,
                    {
                        "cost_minor_units": self.card.cost_per_item_minor_units,
                        "budget_minor_units": budget.money.amount_minor_units,
                    },
                )
        if budget.wall_clock_ms is not None and estimate > budget.wall_clock_ms:
            return Decline(
                DeclineReason.BUDGET,
                {"estimate_ms": estimate, "wall_clock_budget_ms": budget.wall_clock_ms},
            )
        return Accept(expected_start_ms=wait)


__all__ = [
    "AMBIGUOUS",
    "Accept",
    "AdmissionControl",
    "AdmissionPolicy",
    "AdmissionRequest",
    "Decline",
    "DependencyCheck",
]
