"""The start of an execution as the Mission learns it while the handler runs (issue 29 item 1).

Acceptance and ``work.start`` happen inside the ``execute_work_item`` activity, whose result
arrives only when the handler ends; until then the workflow would show the WorkItem as offered.
The agent's ``report_progress`` signal says when it started, but a signal is only a claim: it
never sets the owner. A claim from an agent the workflow does not yet know as the owner makes
the workflow read the WorkItem's Events from the Authority (the signed log, through the
coordinator's ``work_item_events`` activity) and fold them with the one reducer; the owner,
ownership epoch and lease are then the Authority's, and the claim's phase is shown only if the
Authority names that agent as the active owner. Pure helpers; no clocks, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import WorkItemState
from ..protocol.temporal_contract import ProgressSignal
from ._run import UnderWay
from ._state import ItemState


@dataclass(frozen=True)
class StartCheck:
    """In flight: the read of a WorkItem's Events after an agent said it started."""

    work_item_id: str


def needs_confirmation(item: ItemState, flight: UnderWay, sig: ProgressSignal) -> bool:
    """Whether ``sig`` claims a start the workflow has not seen: its agent is not the owner,
    an ``execute_work_item`` on it is in flight (the workflow offered or resumed the item there)
    and no read of the Authority's log for the item is under way."""
    return (
        item.owner != sig.agent_id
        and flight.running > 0
        and not flight.syncing
        and item.state in (WorkItemState.OPEN, WorkItemState.OFFERED, WorkItemState.QUEUED)
    )


def confirmed(item: ItemState, sig: ProgressSignal) -> bool:
    """Whether the Authority's Events (already folded into ``item``) name ``sig``'s agent as
    the owner of the running WorkItem: only then is the claimed progress shown."""
    return item.owner == sig.agent_id and item.state is WorkItemState.ACTIVE


def started_at_ms(item: ItemState) -> int | None:
    """When the current lease was granted (epoch ms, ``work.started``'s lease), if any."""
    lease = item.w.lease or {}
    at = lease.get("started_at_ms")
    return int(at) if isinstance(at, int) else None


__all__ = ["StartCheck", "confirmed", "needs_confirmation", "started_at_ms"]
