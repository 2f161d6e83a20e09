"""What a Mission shows outside its workflow while it runs: its search attributes
(``MissionId``, ``GroupId``, ``MissionStatus``, ``OpenWorkItems``) and the current details the
Temporal UI shows (:class:`Publisher`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..outcome import GROUP_ID, MISSION_ID, MISSION_STATUS, OPEN_WORK_ITEMS
    from ._board import Board
    from ._plan import counts, open_count
    from ._state import MissionState
    from ._status import search_attributes_due, waiting_lines


class Publisher:
    """Publishes a Mission's status, only when it changed."""

    def __init__(self) -> None:
        #: What the status was counted at last: changes, status, WorkItems.
        self._counted: tuple[int, str, int] | None = None
        self._published: tuple[str, int] | None = None  # MissionStatus, OpenWorkItems
        self._published_at = 0  # when (epoch ms, workflow time)

    def publish(self, state: MissionState, board: Board) -> None:
        """Upsert the search attributes when they changed, and set the current details."""
        key = (board.changes, state.status, len(state.items) + len(state.archived))
        if self._counted == key:
            return  # nothing changed: counting 10,000 WorkItems in every task is not free
        self._counted = key
        # a Mission that ended has nothing open: its failed items are failed for good
        n = open_count(state) if state.status == "running" else 0
        now = board.now()
        if search_attributes_due(self._published, self._published_at, state.status, n, now):
            self._published, self._published_at = (state.status, n), now
            workflow.upsert_search_attributes(
                [
                    MISSION_ID.value_set(state.spec.mission_id),
                    GROUP_ID.value_set(state.spec.group_id),
                    MISSION_STATUS.value_set(state.status),
                    OPEN_WORK_ITEMS.value_set(n),
                ]
            )
        c = counts(state)
        workflow.set_current_details(
            f"**{state.status}** — "
            + ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))
            + waiting_lines(state, now)
        )

    @staticmethod
    def withdraw() -> None:
        """Unset the search attributes: this run is not the Mission (``MissionExists``), whose
        own run keeps its status in the list (``MissionStatus="failed"`` must not find a
        completed Mission) and in the CLI."""
        workflow.upsert_search_attributes(
            [
                MISSION_ID.value_unset(),
                GROUP_ID.value_unset(),
                MISSION_STATUS.value_unset(),
                OPEN_WORK_ITEMS.value_unset(),
            ]
        )


__all__ = ["Publisher"]
