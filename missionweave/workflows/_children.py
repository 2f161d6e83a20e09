"""Child Missions of the Mission workflow, as a mixin: ``mission.create_child`` starts a child
``Mission`` workflow (``ParentClosePolicy.ABANDON``: any other policy kills the child when the
parent continues as new), which reports back with the ``child_finished`` signal; the parent
item follows the child's outcome and the Mission's child-failure policy (spec 10.2). A child in
another Group first has its usage charged to the parent in the parent's Group
(``charge_parent_usage``, MW-11.5-i, MW-10.4-d).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..protocol import CommandType, WorkItemState
    from ..protocol.temporal_contract import (
        MISSION_WORKFLOW_TYPE,
        ChargeParentUsageInput,
        ChildOutcome,
        MissionResult,
        ParentLink,
        mission_workflow_id,
    )
    from ._state import ItemState

#: ``workflow.patched`` id of the parent's charge before a child reports (older histories of
#: a child in another Group signalled at once).
CHARGE_PARENT_PATCH = "child-usage-charged-to-parent"
#: Retries of ``charge_parent_usage``: bounded, so that an Authority down for long delays the
#: child's report by minutes, never for good (its forwarded Events stay in its Group's log).
CHARGE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
)  # fmt: skip

if TYPE_CHECKING:
    from ._state import MissionState


class ChildMissionsMixin:
    """The child-Mission part of :class:`~missionweave.workflows.MissionWorkflow`."""

    if TYPE_CHECKING:
        state: MissionState
        tasks: dict[str, asyncio.Task[None]]

        def _intent(self, type: str, body: dict[str, Any], purpose: tuple[str, str]) -> str: ...

    @workflow.signal
    def child_finished(self, out: ChildOutcome) -> None:
        """A child Mission reports its outcome; the parent item follows (spec 10.2)."""
        item = self.state.items.get(out.work_item_id)
        if item is None or item.state is not WorkItemState.BLOCKED:
            return
        if out.approved:
            self._intent(
                CommandType.MISSION_CHILD_APPROVED,
                {
                    "work_item_id": out.work_item_id,
                    "child_mission_id": out.child_mission_id,
                    "evidence": [e.model_dump(mode="json") for e in out.evidence],
                },
                ("child_result", out.work_item_id),
            )
        else:
            self._intent(
                CommandType.MISSION_CHILD_FAILED,
                {
                    "work_item_id": out.work_item_id,
                    "child_mission_id": out.child_mission_id,
                    "policy": self.state.spec.child_failure_policy.value,
                },
                ("child_result", out.work_item_id),
            )
        item.detail = f"child Mission {out.child_mission_id}: {out.summary}"

    def _create_child(self, item: ItemState) -> None:
        assert item.spec.child_mission is not None
        item.offer_pending = True  # nothing else may be planned for it meanwhile
        self._intent(
            CommandType.MISSION_CREATE_CHILD,
            {
                "work_item_id": item.work_item_id,
                "child_mission_id": item.spec.child_mission.mission_id,
                "child_group_id": item.spec.child_mission.group_id,
            },
            ("child", item.work_item_id),
        )

    def _start_child(self, item: ItemState) -> None:
        child = item.spec.child_mission
        assert child is not None
        spec = child.model_copy(
            update={
                "parent": ParentLink(
                    workflow_id=workflow.info().workflow_id,
                    group_id=self.state.spec.group_id,
                    mission_id=self.state.spec.mission_id,
                    work_item_id=item.work_item_id,
                )
            }
        )
        item.child_workflow_id = mission_workflow_id(child.mission_id)
        item.offer_pending = False

        key = f"child:{item.work_item_id}"

        async def start() -> None:
            me = asyncio.current_task()  # not in ``finally``: see WorkMixin._execution
            try:
                await started()
            finally:  # started: nothing of it is in flight (a continue-as-new may come)
                if self.tasks.get(key) is me:
                    del self.tasks[key]

        async def started() -> None:
            # ABANDON: any other policy kills the child when this run continues-as-new
            child_run = await workflow.start_child_workflow(
                MISSION_WORKFLOW_TYPE,
                args=[spec, None],
                id=mission_workflow_id(child.mission_id),
                task_queue=workflow.info().task_queue,  # the coordinator's, whatever its name
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"child of {self.state.spec.mission_id}: {child.title}",
            )
            # The child reports by signal (``child_finished``), before it fails its execution
            # if it did not complete: its result is not awaited, and its failure is no error.
            child_run.add_done_callback(_retrieved)

        self.tasks[key] = asyncio.create_task(start())

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

    async def _report_to_parent(self, parent: ParentLink, result: MissionResult) -> None:
        if parent.group_id != result.group_id and workflow.patched(CHARGE_PARENT_PATCH):
            await self._charge_parent(parent, result)
        evidence = [e for it in result.items for e in it.evidence]
        why = result.reason or f"{len(result.items)} WorkItem(s)"
        handle = workflow.get_external_workflow_handle(parent.workflow_id)
        await handle.signal(
            ChildMissionsMixin.child_finished,
            ChildOutcome(
                work_item_id=parent.work_item_id,
                child_mission_id=self.state.spec.mission_id,
                approved=result.status == "completed",
                evidence=evidence[:50],
                summary=f"{result.status}: {why}",
            ),
        )


def _retrieved(run: asyncio.Future[Any]) -> None:
    """Mark a child's outcome as read (asyncio logs a failure nobody read)."""
    if not run.cancelled():
        run.exception()


__all__ = ["ChildMissionsMixin"]
