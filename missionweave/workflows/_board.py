"""What every part of the Mission workflow reads and marks: the state, the graph, what the next
plan looks at, and the flag that wakes the main loop. One object, handed to each part
(:class:`~._commands.Commands`, :class:`~._work.Offers`, :class:`~._review.Reviews`,
:class:`~._children.Children`) by :class:`~._mission.MissionWorkflow`, so that a part reads its
inputs from a name, never from the workflow's ``self``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..protocol import WorkGraph
    from ..protocol.temporal_contract import EventSummary
    from ._run import ItemRun, Runs
    from ._state import MissionState, apply_events


class Board:
    """The Mission's shared facts.

    Attributes:
        state: the one state object (carried across continue-as-new).
        graph: the WorkItem DAG (rebuilt from the state in each run).
        attention: WorkItems the next plan looks at: all at first; then those an Event changed,
            their dependents and new ones (a settled one waits for that,
            :attr:`~._plan.Plan.settled`), so a Mission of 10,000 WorkItems does not re-plan
            all of them in every workflow task. A set read for membership only (plans go in
            authorization order): deterministic.
        changes: changes applied so far (the status is counted again only on change).
        wake: something happened that the main loop must look at.
        ending: the Mission's end being sent (status, reason), ``None`` while it runs on.
        runs: each WorkItem's execution (:class:`~._run.ItemRun`): the one record the parts
            change it through (:meth:`run`); what is under way in it is never carried across
            continue-as-new.
        tasks: the coroutines of the parts that are under way, by what they do (a typed
            key: an execution, a review round, a child's start …), in the order they began:
            a continue-as-new waits until none is left, and the Mission's end cancels them
            in that order. Handles only: what an execution has under way is its record's.
    """

    def __init__(self, state: MissionState, graph: WorkGraph) -> None:
        self.state = state
        self.graph = graph
        self.attention: set[str] = set(state.items)
        self.changes = 0
        self.wake = False
        self.ending: tuple[str, str] | None = None
        self.runs = Runs(state)
        self.tasks: dict[Hashable, asyncio.Task[None]] = {}

    def spawn(self, key: Hashable, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work()`` as a task listed under ``key`` in :attr:`tasks` until it is over
        (then woken or not as ``work`` says). A later task under the same key takes its place;
        the earlier one, still running, is then no longer listed. ``work`` is called in the
        task: a task cancelled before it ran leaves no coroutine never awaited."""

        async def tracked() -> None:
            # asked now, not in ``finally``: a workflow evicted from the Worker's cache has its
            # coroutines closed after its loop is gone, where current_task() raises
            me = asyncio.current_task()
            try:
                await work()
            finally:
                if self.tasks.get(key) is me:
                    del self.tasks[key]

        self.tasks[key] = asyncio.create_task(tracked())

    def run(self, work_item_id: str) -> ItemRun:
        """The WorkItem's execution record, to read or change (:class:`~._run.ItemRun`)."""
        return self.runs.of(work_item_id)

    def now(self) -> int:
        """The workflow's clock, epoch milliseconds (deterministic on replay)."""
        return int(workflow.now().timestamp() * 1000)

    def apply(self, events: list[EventSummary]) -> None:
        """Fold the Authority's Events into the state; what they changed, and what depends on
        it, is looked at by the next plan."""
        for wid in apply_events(self.state, events):
            self.attention.add(wid)
            self.attention.update(self.graph.dependents(wid))
            self.changes += 1

    def draining(self) -> bool:
        """Temporal suggests continuing as new, or the Mission is ending: nothing more is
        started."""
        return workflow.info().is_continue_as_new_suggested() or self.ending is not None


__all__ = ["Board"]
