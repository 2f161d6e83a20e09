"""Child Missions of the Mission workflow (:class:`Children`): ``mission.create_child`` starts a
child ``Mission`` workflow (``ParentClosePolicy.ABANDON``: any other policy kills the child when the
parent continues as new), which reports back with the ``child_finished`` signal; the parent
item follows the child's outcome and the Mission's child-failure policy (spec 10.2). A child in
another Group first has its usage charged to the parent in the parent's Group
(``charge_parent_usage``, MW-11.5-i, MW-10.4-d), drawn from the allowance (the child's own
budget) reserved for it at ``mission.create_child`` (MW-11.5-j).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..protocol import CommandType, WorkItemState
    from ..protocol.temporal_contract import (
        ChargeParentUsageInput,
        ChildOutcome,
        CommandVerdict,
        MissionResult,
        MissionSpec,
        ParentLink,
        mission_workflow_id,
    )
    from ._board import Board
    from ._commands import Commands
    from ._state import ItemState

#: The signal a child Mission reports its outcome with (``MissionWorkflow.child_finished``).
CHILD_FINISHED_SIGNAL = "child_finished"
#: ``workflow.patched`` id of the parent's charge before a child reports (older histories of
#: a child in another Group signalled at once).
CHARGE_PARENT_PATCH = "child-usage-charged-to-parent"
#: ``workflow.patched`` id of the child's ``allowance`` in ``mission.create_child`` (older
#: histories created a child in another Group without one).
CHILD_ALLOWANCE_PATCH = "child-allowance-reserved"
#: Retries of ``charge_parent_usage``: bounded, so that an Authority down for long delays the
#: child's report by minutes, never for good (its forwarded Events stay in its Group's log).
CHARGE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
)  # fmt: skip


@dataclass(frozen=True)
class ChildStart:
    """In flight: the start of the child Mission carrying out a WorkItem."""

    work_item_id: str


class Children:
    """The child Missions of one Mission: created with the Authority, started, followed."""

    def __init__(
        self,
        board: Board,
        commands: Commands,
        mission: Callable[[Any, MissionSpec, None], Awaitable[MissionResult]],
    ) -> None:
        """``mission`` is the ``Mission`` workflow's run method (``MissionWorkflow.run``): the
        typed reference a child is started by."""
        self._board = board
        self._commands = commands
        self._mission = mission

    def finished(self, out: ChildOutcome) -> None:
        """A child Mission reports its outcome; the parent item follows (spec 10.2)."""
        item = self._board.state.items.get(out.work_item_id)
        if item is None or item.state is not WorkItemState.BLOCKED:
            return
        if out.approved:
            self._commands.intent(
                CommandType.MISSION_CHILD_APPROVED,
                {
                    "work_item_id": out.work_item_id,
                    "child_mission_id": out.child_mission_id,
                    "evidence": [e.model_dump(mode="json") for e in out.evidence],
                },
            )
        else:
            self._commands.intent(
                CommandType.MISSION_CHILD_FAILED,
                {
                    "work_item_id": out.work_item_id,
                    "child_mission_id": out.child_mission_id,
                    "policy": self._board.state.spec.child_failure_policy.value,
                },
            )
        summary = f"child Mission {out.child_mission_id}: {out.summary}"
        self._board.run(out.work_item_id).note(summary)

    def create(self, item: ItemState) -> None:
        """Ask the Authority for ``item``'s child Mission; started once it is recorded."""
        assert item.spec.child_mission is not None
        self._board.run(item.work_item_id).offer_pending = True  # nothing else planned
        wid = item.work_item_id

        def created(v: CommandVerdict) -> None:
            it = self._board.state.items.get(wid)
            if it is not None and v.accepted:
                self._start(it)

        child = item.spec.child_mission
        body: dict[str, Any] = {
            "work_item_id": item.work_item_id,
            "child_mission_id": child.mission_id,
            "child_group_id": child.group_id,
        }
        # a child in another Group is held to an allowance reserved from this Mission's
        # budget: its own budget (MW-11.5-j); older histories sent none
        if (
            child.group_id != self._board.state.spec.group_id
            and child.budget is not None
            and workflow.patched(CHILD_ALLOWANCE_PATCH)
        ):
            body["allowance"] = child.budget.model_dump(mode="json")
        self._commands.intent(CommandType.MISSION_CREATE_CHILD, body, created)

    def _start(self, item: ItemState) -> None:
        child = item.spec.child_mission
        assert child is not None
        spec = child.model_copy(
            update={
                "parent": ParentLink(
                    workflow_id=workflow.info().workflow_id,
                    group_id=self._board.state.spec.group_id,
                    mission_id=self._board.state.spec.mission_id,
                    work_item_id=item.work_item_id,
                )
            }
        )
        self._board.run(item.work_item_id).child_started(mission_workflow_id(child.mission_id))

        async def start() -> None:
            # ABANDON: any other policy kills the child when this run continues-as-new
            child_run = await workflow.start_child_workflow(
                self._mission,
                args=[spec, None],
                id=mission_workflow_id(child.mission_id),
                task_queue=workflow.info().task_queue,  # the coordinator's, whatever its name
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"child of {self._board.state.spec.mission_id}: {child.title}",
            )
            # The child reports by signal (``child_finished``), before it fails its execution
            # if it did not complete: its result is not awaited, and its failure is no error.
            child_run.add_done_callback(_retrieved)

        # started: nothing of it is in flight (a continue-as-new may come)
        self._board.spawn(ChildStart(item.work_item_id), start)

    async def _charge_parent(self, parent: ParentLink, result: MissionResult) -> None:
        """A child in another Group: its usage forwarded out of its Group is charged to the
        parent Mission in the parent's Group (``charge_parent_usage``; MW-11.5-i, MW-10.4-d)
        before the parent hears of the outcome. A charge that cannot be made is logged."""
        first = result.event_range[0] if result.event_range else 1
        try:
            await workflow.execute_local_activity_method(  # a coordinator step (issue 26)
                CoordinatorActivities.charge_parent_usage,
                ChargeParentUsageInput(
                    group_id=result.group_id,
                    mission_id=result.mission_id,
                    parent=parent,
                    after_sequence=max(0, first - 1),
                ),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=CHARGE_RETRY,
                summary=f"charge {result.mission_id}'s usage to {parent.mission_id}",
            )
        except FailureError as exc:  # a local activity's failure comes unwrapped
            cause = exc.cause if isinstance(exc, ActivityError) else exc
            workflow.logger.warning("usage of %s not charged to its parent: %s",
                                    result.mission_id, cause)  # fmt: skip

    async def report_to_parent(self, parent: ParentLink, result: MissionResult) -> None:
        """Signal this Mission's outcome to the parent Mission's item (after charging a
        parent in another Group, :meth:`_charge_parent`)."""
        if parent.group_id != result.group_id and workflow.patched(CHARGE_PARENT_PATCH):
            await self._charge_parent(parent, result)
        evidence = [e for it in result.items for e in it.evidence]
        why = result.reason or f"{len(result.items)} WorkItem(s)"
        handle = workflow.get_external_workflow_handle(parent.workflow_id)
        await handle.signal(
            CHILD_FINISHED_SIGNAL,
            ChildOutcome(
                work_item_id=parent.work_item_id,
                child_mission_id=self._board.state.spec.mission_id,
                approved=result.status == "completed",
                evidence=evidence[:50],
                summary=f"{result.status}: {why}",
            ),
        )


def _retrieved(run: asyncio.Future[Any]) -> None:
    """Mark a child's outcome as read (asyncio logs a failure nobody read)."""
    if not run.cancelled():
        run.exception()


__all__ = [
    "CHARGE_PARENT_PATCH",
    "CHILD_ALLOWANCE_PATCH",
    "CHILD_FINISHED_SIGNAL",
    "ChildStart",
    "Children",
]
