"""What the Authority's core records (docs/metrics.md): each write transaction's Commands,
Events, size and time, and the live leases a scrape reads.

Label values are bounded: a Command type the Authority does not know is ``unknown``, a lease's
reason outside :data:`LEASE_REASONS` (a canceller's free text) is ``other``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...metrics import add, observe
from ...metrics import series as s
from ...protocol import Command, EventType
from ..wire import SubmitResult
from ._items import LeaseKind
from ._registry import HANDLERS

if TYPE_CHECKING:
    from ._engine import Authority

#: The reasons a lease's end names that are exported as they are.
LEASE_REASONS = frozenset(
    {
        *s.EXPIRY_REASONS, "session_replaced", "failed", "child_mission", "cancelled",
        "mission_cancelled", "mission_failed",
    }
)  # fmt: skip


#: The kinds of lease, each reported (0 when none is live).
LEASE_KINDS = tuple(LeaseKind)


def _reason(body: dict[str, Any]) -> str:
    reason = body.get("reason")
    return reason if isinstance(reason, str) and reason in LEASE_REASONS else "other"


def record_transaction(
    commands: Sequence[Command], results: Sequence[SubmitResult], seconds: float
) -> None:
    """Count one committed transaction: its size and time, each Command's verdict, each
    Event appended (a repeated Command's original Events are not counted again), and the
    leases it ended as expired or revoked."""
    observe(s.AUTHORITY_BATCH_SIZE, len(commands))
    observe(s.AUTHORITY_COMMIT, seconds)
    # counted per label set, then added once each: a batch is mostly Commands of a few kinds
    verdicts: Counter[tuple[str, str, str]] = Counter()
    appends: Counter[str] = Counter()
    for cmd, r in zip(commands, results, strict=True):
        code = r.rejection.code if r.rejection is not None else "none"
        verdicts[cmd.type if cmd.type in HANDLERS else "unknown", r.status, code] += 1
        if r.duplicate:
            continue
        for e in r.events:
            appends[e.type] += 1
            if e.type == EventType.LEASE_EXPIRED:
                add(s.AUTHORITY_LEASE_EXPIRIES, reason=_reason(e.body))
            elif e.type == EventType.LEASE_REVOKED:
                add(s.AUTHORITY_LEASE_REVOCATIONS, reason=_reason(e.body))
    for (kind, status, code), n in verdicts.items():
        add(s.AUTHORITY_COMMANDS, n, type=kind, status=status, code=code)
    for kind, n in appends.items():
        add(s.AUTHORITY_APPENDS, n, type=kind)


def record_credit(cause: str, leases: int, credited_ms: int) -> None:
    """Count ``leases`` extended by ``credited_ms`` for an outage of the Authority (a cause of
    :data:`~missionweave.metrics.series.CREDIT_CAUSES`), MW-11.5-c."""
    if leases:
        add(s.AUTHORITY_DOWNTIME_CREDITS, leases, cause=cause)
        add(s.AUTHORITY_CREDITED, credited_ms / 1000, cause=cause)


def live_leases(authority: Authority) -> dict[tuple[str, ...], float]:
    """Active, unexpired leases by kind, read under the Authority's lock (for a scrape)."""
    with authority._lock:
        rows = authority.store.all("leases.live_by_kind", authority.clock())
    counts: dict[tuple[str, ...], float] = {(k,): 0.0 for k in LEASE_KINDS}
    counts.update({(str(r[0]),): float(r[1]) for r in rows})
    return counts


__all__ = ["LEASE_KINDS", "LEASE_REASONS", "live_leases", "record_credit", "record_transaction"]
