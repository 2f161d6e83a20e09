"""Every activity the Mission workflow schedules on the coordinator carries a heartbeat timeout
(issue 13): a coordinator killed or frozen in the middle of one costs
:data:`~missionweave.activities.HEARTBEAT_TIMEOUT` before Temporal schedules it again, not the
activity's start-to-close timeout (five minutes for a review)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from missionweave.activities import HEARTBEAT_TIMEOUT
from tests.mission_harness import mission_stack, step_registry, work_items

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_coordinator_activities_carry_a_heartbeat_timeout(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", step_registry(), max_concurrency=1)
        spec = ms.spec("beats", work_items({"a": []}))
        handle = await ms.start(spec)
        result = await asyncio.wait_for(handle.result(), 60)
        history = await handle.fetch_history()
    assert result.status == "completed"
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    coordinator = {
        "submit_commands",
        "select_candidates",
        "work_item_events",
        "review_submissions",
    }  # CoordinatorActivities
    mine = [a for a in scheduled if a.activity_type.name in coordinator]
    kinds = {a.activity_type.name for a in mine}
    assert {"submit_commands", "select_candidates", "review_submissions"} <= kinds
    for a in mine:
        assert a.heartbeat_timeout.ToTimedelta() == HEARTBEAT_TIMEOUT, a.activity_type.name
