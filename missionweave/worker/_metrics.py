"""What an agent records (docs/metrics.md): its slots, queue and offline buffer (sampled at
each scrape), admission declines, handler durations, budget burned and reconciliations.

No label names a Group, Mission, agent or WorkItem: the queue is exported as a total and as
its deepest Group's depth.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..metrics import add, observe, start_counters, unwatch, watch
from ..metrics import series as s
from ..protocol import DeclineReason, ResourceUsage
from ._admission import AMBIGUOUS

if TYPE_CHECKING:
    from ._runtime import AgentRuntime

#: The decline reasons exported as they are (MW-10.3-e's and an ambiguous contract).
DECLINE_REASONS = frozenset({*(r.value for r in DeclineReason), AMBIGUOUS})


def _depths(rt: AgentRuntime) -> dict[str, int]:
    return rt.dispatcher.depths() if rt.dispatcher is not None else {}


def watch_runtime(rt: AgentRuntime) -> None:
    """Report ``rt``'s slots, queue and offline buffer in the agent gauges while it lives."""
    start_counters(s.AGENT)
    watch(s.AGENT_SLOTS, rt, lambda r: r.board.capacity)
    watch(s.AGENT_SLOTS_BUSY, rt, lambda r: r.board.taken())
    watch(s.AGENT_QUEUE_DEPTH, rt, lambda r: sum(_depths(r).values()))
    watch(s.AGENT_QUEUE_DEPTH_MAX, rt, lambda r: max(_depths(r).values(), default=0))
    watch(s.AGENT_OFFLINE_BUFFER, rt, lambda r: len(r.offline_buffer))


def unwatch_runtime(rt: AgentRuntime) -> None:
    """Stop reporting ``rt`` (it stopped)."""
    for series in s.AGENT:
        if series.kind == "gauge":  # the ones watch_runtime watches
            unwatch(series, rt)


def record_decline(reason: str) -> None:
    """Count an offer declined by admission control."""
    add(s.AGENT_DECLINES, reason=reason if reason in DECLINE_REASONS else "other")


def record_handler(outcome: str, seconds: float) -> None:
    """Record one handler run: its outcome kind and duration."""
    observe(s.AGENT_HANDLER_DURATION, seconds, outcome=outcome)


def record_burn(delta: ResourceUsage) -> None:
    """Count a usage delta the Authority accepted, per dimension (zeros are skipped)."""
    for dimension, amount in delta.model_dump().items():
        if amount:
            add(s.AGENT_BUDGET_BURNED, amount, dimension=dimension)


def record_reconciliation(result: str) -> None:
    """Count one buffered Command answered on reconnection: ``applied``, ``already_applied``
    (an idempotency conflict: the original had arrived) or ``refused``."""
    add(s.AGENT_RECONCILIATIONS, result=result)


__all__ = [
    "DECLINE_REASONS",
    "record_burn",
    "record_decline",
    "record_handler",
    "record_reconciliation",
    "unwatch_runtime",
    "watch_runtime",
]
