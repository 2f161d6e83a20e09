"""What a Mission run has under way for each WorkItem (:class:`InFlight`): not state, never
carried across continue-as-new — a new run has nothing under way. The parts mark it
(:class:`~._work.Offers`, :class:`~._review.Reviews`, :class:`~._children.Children`); the
planner reads it so that nothing is planned twice. Pure; no clocks, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InFlight:
    """One WorkItem's work under way in this run.

    Attributes:
        running: ``execute_work_item`` activities in flight (one per candidate of an offer,
            or the owner's resume).
        offer_pending: candidates are being ranked, a ``work.offer`` is in flight, or a child
            Mission is being created.
        syncing: its Events are being read from the Authority (an activity's result was lost).
        reviewing: its review's steps 1–2 or its decision are under way.
    """

    running: int = 0
    offer_pending: bool = False
    syncing: bool = False
    reviewing: bool = False


#: A WorkItem with nothing under way (read only: :meth:`Flights.of` gives one to mark).
IDLE = InFlight()


class Flights(dict[str, InFlight]):
    """:class:`InFlight` by WorkItem id; read with ``get(wid, IDLE)``, marked through
    :meth:`of`."""

    def of(self, work_item_id: str) -> InFlight:
        """The WorkItem's record, to mark (made on first use)."""
        got = self.get(work_item_id)
        if got is None:
            got = self[work_item_id] = InFlight()
        return got


__all__ = ["IDLE", "Flights", "InFlight"]
