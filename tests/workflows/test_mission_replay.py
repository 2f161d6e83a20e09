"""Replay stored ``Mission`` histories through the current workflow code: a change that alters
the workflow's commands for an existing history is caught here, without a server (docs/design.md §5:
such a change goes behind ``workflow.patched()``).

``tests/histories/mission_small.json`` is one WorkItem end to end on the real dev server: create
and authorize, rank and offer, the offer as ``execute_work_item`` on the agent's task queue
(inside it the agent accepts, starts and submits with the Authority), review,
``mission.complete``.
``tests/histories/mission_review.json`` is one WorkItem reviewed in all five steps (MW-13.2-b):
the review WorkItem ``a:review`` carried out by a reviewer agent, then the ``approve`` update.

When the workflow changes on purpose (and running Missions are safe), re-record it with::

    .venv/bin/python -m tests.record_histories

(see :mod:`tests.record_histories`) and commit the new file with the change.
"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from missionweave.protocol.temporal_contract import MISSION_WORKFLOW_TYPE
from missionweave.workflows import MissionWorkflow
from missionweave.workflows._steps import LOCAL_STEP_MAX_ITEMS
from tests.record_histories import (
    MISSION_REVIEW,
    MISSION_REVIEW_ID,
    MISSION_SMALL,
    MISSION_SMALL_ID,
    load_large,
)


def _stored() -> WorkflowHistory:
    return WorkflowHistory.from_json(MISSION_SMALL_ID, MISSION_SMALL.read_text())


def test_stored_history_is_a_whole_mission() -> None:
    history = _stored()
    first, last = history.events[0], history.events[-1]
    started = first.workflow_execution_started_event_attributes
    assert started.workflow_type.name == MISSION_WORKFLOW_TYPE
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    # no Update: the agent answered its offer (the activity) with the Authority itself
    assert _updates(history) == []
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    # the coordinator's steps are local activities (markers): the one regular activity is
    # the offer itself, the agent's execute_work_item (issue 26)
    assert activities == ["execute_work_item"]
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert len(markers) == 4  # create and authorize, rank and offer, review, complete


async def test_stored_mission_history_replays() -> None:
    replayer = Replayer(workflows=[MissionWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(_stored())  # raises on non-determinism
    assert result.replay_failure is None


def _updates(history: WorkflowHistory) -> list[str]:
    return [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]


async def test_stored_review_history_replays__MW_13_2_b() -> None:
    history = WorkflowHistory.from_json(MISSION_REVIEW_ID, MISSION_REVIEW.read_text())
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    # the subject and its review WorkItem each answered as an activity; the one Update is the
    # MissionOwner's Approval
    assert _updates(history) == ["approve"]
    replayer = Replayer(workflows=[MissionWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history)
    assert result.replay_failure is None


async def test_stored_large_history_with_updates_throughout_replays() -> None:
    """Issue 26: the coordinator's steps run as local activities while Updates arrive. Every
    run (continue-as-new included) of a Mission of more than 1,000 WorkItems, with
    ``authorize_work``, ``approve`` and ``cancel`` accepted between its steps, replays through
    the current code: the commands it issues do not depend on *when* a local activity's
    result or an Update arrived."""
    runs = load_large()
    items = {
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)[
            "work_item_id"
        ]
        for h in runs
        for e in h.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "execute_work_item"
    }
    assert len(items) >= 1000
    updates = [u for h in runs for u in _updates(h)]
    assert {"authorize_work", "approve", "cancel"} <= set(updates)
    assert len(runs) >= 2  # it continued as new on the way
    # the coordinator's steps are local, but for a batch of more than LOCAL_STEP_MAX_ITEMS
    # WorkItems: a regular activity, so that its workflow task's commands go out meanwhile
    for h in runs:
        for e in h.events:
            if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            a = e.activity_task_scheduled_event_attributes
            if a.activity_type.name != "execute_work_item":
                arg = json.loads(a.input.payloads[0].data)
                carried = sum(
                    len(arg.get(k, [])) for k in ("entries", "requests", "reviews", "then_offer")
                )
                assert carried > LOCAL_STEP_MAX_ITEMS, (a.activity_type.name, carried)
    replayer = Replayer(workflows=[MissionWorkflow], data_converter=pydantic_data_converter)
    for run in runs:
        result = await replayer.replay_workflow(run, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure
