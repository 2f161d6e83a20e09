"""Waiting on a Mission and reading how it went, for the Mission tests.

:func:`wait_status` polls a Mission's ``status`` query; :func:`result` is its result (also of
one that failed or was cancelled), :func:`ending` how its execution closed as Temporal shows it;
:func:`states`, :func:`item` and :func:`types` read a result, a status and a list of Events.
Every wait is bounded by :data:`tests.support.waits.WAIT_S` and fails with an ``AssertionError``
that says what it waited for.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowHistory
from temporalio.exceptions import ApplicationError

from missionweave.outcome import MISSION_STATUS, OPEN_WORK_ITEMS, mission_result
from missionweave.protocol import Event
from missionweave.protocol.temporal_contract import MissionResult, MissionStatus, WorkItemStatus
from missionweave.workflows import MissionWorkflow

from .waits import WAIT_S, until


async def result(handle: WorkflowHandle[Any, MissionResult]) -> MissionResult:
    """The Mission's result, also of one that failed or was cancelled (in its failure)."""
    return await asyncio.wait_for(mission_result(handle), WAIT_S)


def states(items: Sequence[Any]) -> dict[str, str]:
    """``{work_item_id: state}`` of a result's or a status's ``items``."""
    return {i.work_item_id: i.state.value for i in items}


def item(st: MissionStatus, wid: str) -> WorkItemStatus:
    """``wid``'s entry in a ``status`` answer."""
    return next(i for i in st.items if i.work_item_id == wid)


def types(evs: Sequence[Event]) -> list[str]:
    return [e.type for e in evs]


async def wait_status(
    handle: WorkflowHandle[Any, MissionResult], ok: Callable[[MissionStatus], bool]
) -> MissionStatus:
    """Poll the ``status`` query until ``ok`` holds (fails after :data:`WAIT_S`)."""

    async def matched() -> MissionStatus | None:
        st: MissionStatus = await handle.query(MissionWorkflow.status)
        return st if ok(st) else None

    got: MissionStatus = await until("the status to match", matched, WAIT_S)
    return got


@dataclass(frozen=True)
class Ending:
    """How a Mission's execution ended, as Temporal shows it.

    Attributes:
        status: the execution's status (``COMPLETED``, ``FAILED`` …).
        failure: the type of the ``ApplicationError`` it failed with (``None``: none).
        non_retryable: that error's flag.
        mission_status / open_items: the ``MissionStatus`` and ``OpenWorkItems`` search
            attributes.
    """

    status: str
    failure: str | None
    non_retryable: bool
    mission_status: str | None
    open_items: int | None


async def ending(handle: WorkflowHandle[Any, Any], timeout_s: float = WAIT_S) -> Ending:
    """Wait for the Mission's execution to close; how it ended (:class:`Ending`)."""
    failure, non_retryable = None, False
    try:
        await asyncio.wait_for(handle.result(), timeout_s)
    except WorkflowFailureError as exc:
        if isinstance(exc.cause, ApplicationError):
            failure, non_retryable = exc.cause.type, exc.cause.non_retryable
    desc = await handle.describe()
    attrs = desc.typed_search_attributes
    return Ending(
        status=desc.status.name if desc.status else "?",
        failure=failure,
        non_retryable=non_retryable,
        mission_status=attrs.get(MISSION_STATUS),
        open_items=attrs.get(OPEN_WORK_ITEMS),
    )


#: The marker of a local activity's result in a workflow's history (the SDK core's name).
LOCAL_ACTIVITY_MARKER = "core_local_activity"


def coordinator_steps(history: WorkflowHistory, activity_type: str) -> list[bytes]:
    """The JSON results of the coordinator's ``activity_type`` steps in ``history``, in order:
    each a local activity (issue 26), its result recorded in a marker."""
    out = []
    for e in history.events:
        if e.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        m = e.marker_recorded_event_attributes
        if m.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in m.details:
            continue
        if json.loads(m.details["data"].payloads[0].data)["activity_type"] == activity_type:
            out.append(m.details["result"].payloads[0].data)
    return out
