"""Ranking agents for an offer (MW-10.3-b/f), as the ``select_candidates`` activity does it.

Eligible: holds every required role, has a published card and an open session, matches every
required capability (``missionweave.protocol.satisfies``: same name, same major version,
at least the required version), is not excluded. Ranked: available
first (free slots per Presence), then per-capability reliability (Laplace-smoothed success rate
from past outcomes), then expected cost, then id. The structured selection basis is what the
offer records, every fact of MW-10.3-f computed — eligibility as checked, an availability
estimate for a busy agent too (:func:`availability_ms`) — and no prose.

**Room.** An agent with no free slot still takes offers into its queue, up to as many waiting
WorkItems as it has slots; past that it would only decline them (``capacity``), and every
decline is an Update the Mission workflow must take (at most 10 in flight). So an agent whose
Presence shows no room is not offered the work: the request comes back ``saturated`` and the
workflow offers again when a slot frees up. Within one batch each offer takes a free slot, or a
place in the queue, from what Presence reported. An agent without a Presence report is
assumed to have room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..protocol import SelectionBasis, best_match, capability_matches
from ..protocol.temporal_contract import Candidate, SelectCandidatesInput, SelectCandidatesResult


@dataclass(slots=True)
class Capacity:
    """One agent's capacity in one Group during one batch, from its Presence report.

    Attributes:
        free: execution slots free.
        queued: WorkItems waiting in its queue for this Group.
        slots: its card's ``max_concurrency`` (also the queue allowance).
    """

    free: int
    queued: int
    slots: int

    @property
    def room(self) -> int:
        """Offers it can still take: free slots, plus queue places up to ``slots`` waiting."""
        return self.free + max(0, self.slots - self.queued)

    def take(self) -> None:
        """One more offer made to it: a free slot if any, else a queue place."""
        if self.free > 0:
            self.free -= 1
        else:
            self.queued += 1


#: How long each WorkItem ahead of it is assumed to hold a slot, for the availability
#: estimate of a busy agent, milliseconds (the agent's own default estimate of a WorkItem).
ASSUMED_ITEM_MS = 60_000


def availability_ms(cap: Capacity | None) -> int:
    """When the agent could start one more WorkItem, milliseconds from now: 0 with a free slot
    (or no Presence report: assumed free); else one :data:`ASSUMED_ITEM_MS` per round of its
    slots that the WorkItems queued before it take."""
    if cap is None or cap.free > 0:
        return 0
    return (cap.queued // max(1, cap.slots) + 1) * ASSUMED_ITEM_MS


def capacities(agents: Iterable[Any], presence: Mapping[str, Any]) -> dict[str, Capacity]:
    """The :class:`Capacity` of every agent with a card and a Presence report."""
    return {
        a.agent_id: Capacity(p.free_slots, p.queue_depth, a.card.max_concurrency)
        for a in agents
        if a.card is not None and (p := presence.get(a.agent_id)) is not None
    }


def rank(
    req: SelectCandidatesInput, agents: Iterable[Any], capacity: Mapping[str, Capacity]
) -> SelectCandidatesResult:
    """The best ``req.limit`` eligible agents with room, best first; ``saturated`` when some
    were eligible but none had room (see the module)."""
    agents = list(agents)
    scored = []
    full = False
    for a in agents:
        if not set(req.roles) <= set(a.roles) or a.agent_id in req.exclude or a.card is None:
            continue
        if a.session_epoch == 0:
            continue  # never started a runtime: it could not start the work
        caps = capability_matches(list(a.card.capabilities), req.required_capabilities)
        if caps is None:
            continue
        cap = capacity.get(a.agent_id)
        if cap is not None and cap.room <= 0:
            full = True
            continue
        # what was checked above, recorded rather than assumed (MW-10.3-f)
        eligible = set(req.roles) <= set(a.roles) and a.agent_id not in req.exclude
        rel = {c: a.reliability.get(c) for c in req.required_capabilities}
        ok = sum(r.ok for r in rel.values() if r is not None)
        fail = sum(r.fail for r in rel.values() if r is not None)
        free = cap is None or cap.free > 0
        score = (
            0 if free else 1,  # a free slot first
            -((ok + 1) * 1000 // (ok + fail + 2)),  # then reliability (smoothed)
            a.card.cost_per_item_minor_units,  # then cheaper
            a.agent_id,  # deterministic tie-break
        )
        basis = SelectionBasis(
            capability_matches=caps,
            authorization_eligible=eligible,
            availability_estimate_ms=availability_ms(cap),
            expected_cost_minor_units=a.card.cost_per_item_minor_units,
            reliability={f"{c}:ok": r.ok if r else 0 for c, r in rel.items()}
            | {f"{c}:fail": r.fail if r else 0 for c, r in rel.items()},
            policy_rules=[
                "capability-major-version-match",
                "worker-role"
                if req.roles == ["worker"]
                else "roles:" + "+".join(sorted(req.roles)),
                "has-session",
                "room-per-presence" if cap is not None else "no-presence-assumed-free",
                f"availability:queue-position-x-{ASSUMED_ITEM_MS}ms",
                "presence-first",
                "reliability-smoothed",
                "cost-ascending",
            ],
        )
        scored.append((score, a.agent_id, basis))
    scored.sort(key=lambda x: x[0])
    chosen = scored[: req.limit]
    return SelectCandidatesResult(
        candidates=[
            Candidate(agent_id=aid, basis=b.model_copy(update={"rank": i + 1}))
            for i, (_, aid, b) in enumerate(chosen)
        ],
        saturated=full and not chosen,
        nearest_miss="" if chosen or full else nearest_miss(req, agents),
    )


def nearest_miss(req: SelectCandidatesInput, agents: Iterable[Any]) -> str:
    """Why the agent closest to taking ``req`` cannot: among the members with its roles (not
    excluded), the one lacking the fewest required capabilities (then by id) — ``agent ada
    lacks capability x@2.0; its card is version 1`` — or, when one has them all, that it never
    opened a session (``agent ada has every capability but no running worker``); empty when no
    member has the roles (issue 29 item 2)."""
    best: tuple[int, str, str] | None = None
    for a in agents:
        if not set(req.roles) <= set(a.roles) or a.agent_id in req.exclude:
            continue
        if a.card is None:
            why, lacking = (
                f"agent {a.agent_id} has published no card",
                len(req.required_capabilities) + 1,
            )
        else:
            offered = list(a.card.capabilities)
            missing = [c for c in req.required_capabilities if best_match(offered, c) is None]
            lacking = len(missing)
            if missing:
                word = "capability" if len(missing) == 1 else "capabilities"
                why = (
                    f"agent {a.agent_id} lacks {word} {', '.join(missing)}; "
                    f"its card is version {a.card.version}"
                )
            elif a.session_epoch == 0:
                why = f"agent {a.agent_id} has every capability but no running worker"
            else:
                continue
        if best is None or (lacking, a.agent_id) < best[:2]:
            best = (lacking, a.agent_id, why)
    return best[2] if best is not None else ""


__all__ = [
    "ASSUMED_ITEM_MS",
    "Capacity",
    "availability_ms",
    "capability_matches",
    "capacities",
    "nearest_miss",
    "rank",
]
