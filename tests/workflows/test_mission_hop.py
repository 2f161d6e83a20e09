"""One dependency hop costs the agent's ``execute_work_item`` and one coordinator step that is a
local activity (issue 26): the coordinator's ranking, review and Commands never wait in a
Temporal task queue, and the review that accepts a result offers the dependents it makes
eligible in the same step."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from missionweave.protocol.temporal_contract import ReviewBatchResult
from tests.support.mission_harness import mission_stack, step_registry, work_items
from tests.support.mission_outcome import coordinator_steps
from tests.support.waits import WAIT_S


async def test_a_hop_schedules_no_regular_coordinator_activity(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    chain = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", step_registry(), max_concurrency=1)
        handle = await ms.start(ms.spec("hop", work_items(chain)))
        result = await asyncio.wait_for(handle.result(), WAIT_S)
        history = await handle.fetch_history()
    assert result.status == "completed"
    regular = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert regular == ["execute_work_item"] * len(chain)
    # b, c and d were each offered by the review step that accepted their dependency
    reviews = [
        ReviewBatchResult.model_validate_json(r)
        for r in coordinator_steps(history, "review_submissions")
    ]
    offered = [
        o.verdict.events[0].work_item_id
        for r in reviews
        for o in r.offers
        if o is not None and o.verdict is not None and o.verdict.accepted
    ]
    assert offered == ["b", "c", "d"]
    assert coordinator_steps(history, "select_candidates")  # a's offer: the first ranking
    assert len(coordinator_steps(history, "select_candidates")) == 1
