"""One WorkItem's execution in a Mission run (:class:`ItemRun`): the one home of what the
workflow knows of it and does to it, on the :class:`~._board.Board` (``board.run(wid)``).

An execution's state has two halves, and both are read and written here:

- what crosses continue-as-new: the WorkItem's :class:`~._state.ItemState` bookkeeping
  (agents tried, retry time, rankings that found nobody, the detail shown, the last progress,
  the child Mission) — kept in the state, the one object continue-as-new hands over;
- what is under way in this run (:class:`UnderWay`: ``execute_work_item`` activities, an offer,
  a read of the Authority's log, a review) — never carried: a new run has nothing under way.

The parts (:class:`~._work.Offers`, :class:`~._review.Reviews`, :class:`~._children.Children`,
:class:`~._authorize.Authorizations`, the main loop) change an execution only through the
methods of its :class:`ItemRun`; the planner (:mod:`._plan`) only reads. The Authority's facts
(``ItemState.w``) are not here: only :func:`~._state.apply_events` folds them, with the one
reducer. Pure; no clocks (times are passed in, epoch ms), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import ProgressReport
from ..protocol.temporal_contract import OutcomeKind
from ._state import ItemState, MissionState

#: The longest wait between two rankings of a WorkItem nobody could take, milliseconds.
MAX_IDLE_BACKOFF_MS = 30_000


@dataclass
class UnderWay:
    """What one WorkItem has under way in this run (never carried across continue-as-new).

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


#: A WorkItem with nothing under way (read only: :meth:`Runs.of` gives a record to change).
IDLE = UnderWay()


class ItemRun(UnderWay):
    """One WorkItem's execution: what is under way (:class:`UnderWay`) and, through
    :attr:`item`, the bookkeeping that crosses continue-as-new. Every change the workflow
    makes to an execution is one of the methods below."""

    def __init__(self, state: MissionState, work_item_id: str) -> None:
        super().__init__()
        self._state = state
        self.work_item_id = work_item_id

    @property
    def item(self) -> ItemState:
        """The WorkItem's state (read from the Mission's state each time: the one copy)."""
        return self._state.items[self.work_item_id]

    # ----------------------------------------------------------------------- offers

    def ranked_nobody(
        self, now_ms: int, reoffer_backoff_ms: int, nearest_miss: str | None, saturated: bool
    ) -> None:
        """A ranking found nobody to offer it to: rank again after a wait that doubles with
        each such ranking in a row (at least 1 s, at most :data:`MAX_IDLE_BACKOFF_MS`), so an
        unattended Mission's history grows by a few events per try, not by thousands an hour;
        ``saturated``: every capable agent is busy (``nearest_miss``: why the closest agent
        did not fit)."""
        it = self.item
        wait = max(1000, reoffer_backoff_ms) << min(it.empty_rankings, 5)
        it.empty_rankings += 1
        if it.no_agent_since_ms is None:
            it.no_agent_since_ms = now_ms
        it.retry_at_ms = now_ms + min(wait, MAX_IDLE_BACKOFF_MS)
        it.detail = "no eligible agent" + (f" ({nearest_miss})" if nearest_miss else "")
        if saturated:
            it.detail = "every capable agent is busy"

    def tried_everyone(self) -> None:
        """Every agent was offered it this attempt: start the list over."""
        self.item.tried = []

    def offer_made(self, candidates: list[str], keep: int) -> None:
        """The Authority recorded an offer to ``candidates``: the waiting is over; they join
        the agents tried (the newest ``keep``)."""
        it = self.item
        it.retry_at_ms = None
        it.empty_rankings = 0
        it.no_agent_since_ms = None
        it.tried = [*it.tried, *candidates][-keep:]
        it.detail = "offered to " + ", ".join(candidates)

    def offer_refused(self, retry_at_ms: int, code: str) -> None:
        """The Authority refused its ``work.offer`` (``code``): offered again at
        ``retry_at_ms``."""
        self.offer_pending = False
        self.item.retry_at_ms = retry_at_ms
        self.item.detail = f"offer refused: {code}"

    def retry_at(self, at_ms: int | None) -> None:
        """Offer it again not before ``at_ms`` (``None``: as soon as planned)."""
        self.item.retry_at_ms = at_ms

    # ------------------------------------------------------------------- executions

    def resumed(self) -> None:
        """Handed back to its owner (queued again after a checkpoint, an unblock …)."""
        self.item.detail = f"queued at {self.item.owner}"

    def ended(self, kind: OutcomeKind, why: str) -> None:
        """An ``execute_work_item`` ended with ``kind`` (``why``: its error's first line). An
        offer nobody took leaves ``offered to …`` as it was."""
        it = self.item
        if kind is not OutcomeKind.NOT_TAKEN or not it.detail.startswith("offered"):
            it.detail = f"{kind.value}" + (f": {why}" if why else "")

    def progress(self, report: ProgressReport) -> None:
        """Its owner's last structured progress (MW-11.4-a)."""
        self.item.last_progress = report

    def note(self, detail: str) -> None:
        """What the workflow says of it now (shown by the ``status`` query)."""
        self.item.detail = detail

    # ----------------------------------------------------------- authorized, children

    def authorized_before(self) -> None:
        """An earlier run of this Mission authorized it (``duplicate_id`` of this Mission)."""
        self.item.authorized = True

    def child_started(self, child_workflow_id: str) -> None:
        """Its child Mission is recorded and being started: nothing else is planned for it."""
        self.item.child_workflow_id = child_workflow_id
        self.offer_pending = False


class Runs(dict[str, ItemRun]):
    """:class:`ItemRun` by WorkItem id; read with ``get(wid, IDLE)``, changed through
    :meth:`of`."""

    def __init__(self, state: MissionState) -> None:
        super().__init__()
        self._state = state

    def of(self, work_item_id: str) -> ItemRun:
        """The WorkItem's execution record (made on first use)."""
        got = self.get(work_item_id)
        if got is None:
            got = self[work_item_id] = ItemRun(self._state, work_item_id)
        return got


__all__ = ["IDLE", "MAX_IDLE_BACKOFF_MS", "ItemRun", "Runs", "UnderWay"]
