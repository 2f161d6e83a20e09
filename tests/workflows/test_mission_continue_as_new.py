"""The Mission workflow continues as new when Temporal suggests it, carrying its whole state,
and only when the run is really quiet: no offer or execution (``execute_work_item``) in
flight, so none is orphaned. An acceptance wins one ownership epoch, once (MW-10.3-c).

Runs on ``dev_env_small_history``: the dev server suggests continue-as-new after 20 history
events, so a few sequential WorkItems are enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.protocol import Event
from missionweave.protocol.temporal_contract import (
    AuthorizeWorkInput,
    ChildOutcome,
    mission_workflow_id,
)
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import MissionStack, contract, mission_stack, work_items
from tests.support.mission_outcome import states
from tests.support.temporal_env import SMALL_HISTORY_EVENTS
from tests.support.waits import WAIT_S, until


def _events(ms: MissionStack, type: str, work_item_id: str | None = None) -> list[Event]:
    return [
        e
        for e in ms.stack.authority.events(ms.group)
        if e.type == type and (work_item_id is None or e.work_item_id == work_item_id)
    ]


async def _runs(
    env: WorkflowEnvironment, workflow_id: str, first_run_id: str
) -> list[WorkflowHistory]:
    """Every run's history, first to latest, following the continued-as-new chain."""
    out = []
    run_id: str | None = first_run_id
    while run_id:
        history = await env.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        out.append(history)
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return out


def _mentions(history: WorkflowHistory, text: str, types: Collection[int]) -> bool:
    """Whether an event of one of ``types`` carries ``text`` (payloads are JSON bytes)."""
    needle = text.encode()
    for e in history.events:
        if e.event_type in types and needle in e.SerializeToString():
            return True
    return False


def _step_registry(
    hold: asyncio.Event | None = None, on_hold: asyncio.Event | None = None
) -> HandlerRegistry:
    """``demo.step@1.0``; item ``d`` waits for ``hold`` (after setting ``on_hold``)."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, object]) -> Submission:
        await ctx.guard()
        if ctx.work_item_id == "d" and hold is not None:
            if on_hold is not None:
                on_hold.set()
            await hold.wait()
        return Submission(
            outputs={"result": {"item": ctx.work_item_id}},
            evidence=[ctx.evidence("done", method="demo")],
        )

    return reg


#: Events by which a run calls the Authority (activities; markers if local activities return).
_AUTHORITY_CALLS = {
    EventType.EVENT_TYPE_MARKER_RECORDED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
}


def _unfinished_executions(history: WorkflowHistory) -> int:
    """``execute_work_item`` activities of a run scheduled and not closed when it ended."""
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "execute_work_item"
    }
    for e in history.events:
        for attrs in (
            "activity_task_completed_event_attributes",
            "activity_task_failed_event_attributes",
            "activity_task_timed_out_event_attributes",
            "activity_task_canceled_event_attributes",
        ):
            if e.WhichOneof("attributes") == attrs:
                scheduled.discard(getattr(e, attrs).scheduled_event_id)
    return len(scheduled)


async def test_continue_as_new_never_leaves_an_offer_or_execution_behind__MW_10_3_c(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A chain of WorkItems on a server that suggests continue-as-new every 20 events: the
    Mission continues as new many times, only when no offer (``execute_work_item``) is in
    flight, carries its whole state, and every WorkItem is accepted, started and verified
    exactly once (one ownership epoch each)."""
    env = dev_env_small_history
    async with mission_stack(env, tmp_path) as ms:
        await ms.agent("ada", _step_registry(), max_concurrency=2)
        c = contract().wire()
        # a hop costs about 8 events (issue 26): 8 hops pass the 20-event suggestion 3 times
        ids = ["a", "b", "c", "d", "e", "f", "g", "h"]
        spec = ms.spec(
            "can-1",
            [
                {"work_item_id": w, "contract": c, "dependencies": [ids[i - 1]] if i else []}
                for i, w in enumerate(ids)
            ],
            offer_policy={"offer_ttl_ms": 60_000, "reoffer_backoff_ms": 300},
        )
        handle = await ms.start(spec)
        first_run = handle.first_execution_run_id or handle.result_run_id
        assert first_run is not None
        result = await asyncio.wait_for(handle.result(), WAIT_S)
        events = ms.stack.authority.events(ms.group)
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
        runs = await _runs(env, mission_workflow_id(spec.mission_id), first_run)

    assert result.status == "completed"
    assert [i.state.value for i in result.items] == ["verified"] * len(ids)
    assert len(runs) >= 3, len(runs)  # it did continue as new, several times
    assert [_unfinished_executions(h) for h in runs] == [0] * len(runs)
    for w in ids:
        accepted = [e for e in events if e.type == "work.offer_accepted" and e.work_item_id == w]
        started = [e for e in events if e.type == "work.started" and e.work_item_id == w]
        assert [e.body["ownership_epoch"] for e in accepted] == [1], w
        assert len(started) == 1, w


async def test_contracts_by_name_travel_once_through_continue_as_new__MW_10_4_a(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path
) -> None:
    """WorkItems that name a shared contract (``contract_ref``), and one added while the
    Mission runs with a contract of its own name (``authorize_work`` with ``contracts``): the
    Mission continues as new several times and completes, every run's input carries each
    contract once, and each WorkItem was authorized with its named contract."""
    env = dev_env_small_history
    async with mission_stack(env, tmp_path) as ms:
        await ms.agent("ada", _step_registry(), max_concurrency=2)
        ids = ["a", "b", "c", "d", "e", "f", "g"]
        spec = ms.spec(
            "can-ref",
            [
                {
                    "work_item_id": w,
                    "contract_ref": "step",
                    "dependencies": [ids[i - 1]] if i else [],
                }
                for i, w in enumerate(ids)
            ],
            contracts={"step": contract(objective="shared step").wire()},
            offer_policy={"offer_ttl_ms": 60_000, "reoffer_backoff_ms": 300},
        )
        handle = await ms.start(spec)
        first_run = handle.first_execution_run_id or handle.result_run_id
        assert first_run is not None
        added = await handle.execute_update(
            MissionWorkflow.authorize_work,
            AuthorizeWorkInput.model_validate(
                {
                    "contracts": {"late": contract(objective="late step").wire()},
                    "items": [{"work_item_id": "z", "contract_ref": "late", "dependencies": ["d"]}],
                }
            ),
        )
        assert [v.status for v in added.verdicts] == ["accepted"]
        result = await asyncio.wait_for(handle.result(), 90)
        authorized = {
            e.work_item_id: e.body["contract"]["objective"] for e in _events(ms, "work.authorized")
        }
        runs = await _runs(env, mission_workflow_id(spec.mission_id), first_run)

    assert result.status == "completed"
    assert states(result.items) == dict.fromkeys([*ids, "z"], "verified")
    assert authorized == {**dict.fromkeys(ids, "shared step"), "z": "late step"}
    assert len(runs) >= 3, len(runs)
    for h in runs[2:]:  # continued as new after z was added: both contracts, once each
        started = h.events[0].SerializeToString()
        assert started.count(b"shared step") == 1 and started.count(b"late step") == 1


async def test_work_accepted_just_before_continue_as_new_still_runs__MW_11_3_b(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path
) -> None:
    """An acceptance the workflow has not seen (sent to the Authority while the agent's runtime
    was down) when continue-as-new is already suggested: the offer's activity finds it taken,
    the workflow reads the Authority's log, and the owner's runtime is handed the WorkItem —
    the Mission finishes under that one ownership epoch."""
    env = dev_env_small_history
    async with mission_stack(env, tmp_path) as ms:
        ada = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"], max_concurrency=2)
        spec = ms.spec("can-start", work_items({"a": []}))
        handle = await ms.start(spec)
        (offer,) = await until("a's offer", lambda: _events(ms, "work.offered", "a"))
        verdict = await ms.accept_offer(ada, offer)
        assert verdict.accepted, verdict.rejection

        # Grow the history past the suggestion (signals the Mission ignores), so that the
        # run continues as new as soon as nothing is in flight.
        latest = env.client.get_workflow_handle(handle.id)  # follows continue-as-new

        async def suggested() -> bool:
            # A quiet run continues as new as soon as it is suggested, so grow the *current*
            # run's history just past the suggestion and start at once: the runtime's answer
            # then races the continue-as-new; in either order the Mission must finish.
            h = await latest.fetch_history()
            first = h.events[0].workflow_execution_started_event_attributes
            if len(h.events) > SMALL_HISTORY_EVENTS or first.continued_execution_run_id:
                return True  # past the suggestion, or it already continued as new on it
            await handle.signal(
                MissionWorkflow.child_finished,
                ChildOutcome(work_item_id="none", child_mission_id="none", approved=False),
            )
            return False

        await until("a long history", suggested)
        await ms.agent("ada", _step_registry(), actor=ada)  # starts a at once
        result = await asyncio.wait_for(handle.result(), WAIT_S)
        started = _events(ms, "work.started", "a")

    assert result.status == "completed"
    (res,) = result.items
    assert (res.state.value, res.owner, res.ownership_epoch) == ("verified", "ada", 1)
    assert len(started) == 1
