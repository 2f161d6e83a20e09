"""The Mission workflow continues as new when Temporal suggests it, carrying its whole state —
including the verdicts of applied agent Commands, so that an update retried after
continue-as-new is answered from them and not applied twice (docs/design.md §5: Temporal
deduplicates update ids within one run only). An acceptance wins one ownership epoch, once
(MW-10.3-c): a retried ``accept_offer`` must neither reach the Authority again nor re-apply its
old Events.

It also continues as new only when the run is really quiet: never between granting a lease
and scheduling the execution that uses it.

Runs on ``dev_env_small_history``: the dev server suggests continue-as-new after 20 history
events, so a few sequential WorkItems are enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.protocol import Event
from missionweave.protocol.mission import (
    AgentCommandInput,
    ChildOutcome,
    CommandVerdict,
    mission_workflow_id,
)
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.workflows import MissionWorkflow

from . import temporal_env
from .mission_harness import MissionStack, contract, mission_stack, until
from .temporal_env import SMALL_HISTORY_EVENTS

pytestmark = pytest.mark.asyncio(loop_scope="session")
dev_env_small_history = temporal_env.dev_env_small_history


def _events(ms: MissionStack, type: str, work_item_id: str | None = None) -> list[Event]:
    return [
        e
        for e in ms.stack.authority.events(ms.group)
        if e.type == type and (work_item_id is None or e.work_item_id == work_item_id)
    ]


async def _runs(env: WorkflowEnvironment, workflow_id: str, first_run_id: str
                ) -> list[WorkflowHistory]:  # fmt: skip
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


def _step_registry(hold: asyncio.Event | None = None, on_hold: asyncio.Event | None = None
                   ) -> HandlerRegistry:  # fmt: skip
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


async def test_continue_as_new_carries_verdicts_so_a_retried_update_is_not_reapplied__MW_10_3_c(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = dev_env_small_history
    last_running = asyncio.Event()
    release = asyncio.Event()  # item d holds the Mission open while the update is retried
    reg = _step_registry(release, last_running)

    async with mission_stack(env, tmp_path) as ms:
        # ada's first acceptance is driven by hand (a raw, signed update); her runtime then
        # starts that item and takes the rest.
        ada = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"], max_concurrency=2)
        c = contract().wire()
        spec = ms.spec("can-1", [
            {"work_item_id": "a", "contract": c},
            {"work_item_id": "b", "contract": c, "dependencies": ["a"]},
            {"work_item_id": "c", "contract": c, "dependencies": ["b"]},
            {"work_item_id": "d", "contract": c, "dependencies": ["c"]},
        ], offer_policy={"offer_ttl_ms": 60_000, "reoffer_backoff_ms": 300})  # fmt: skip
        handle = await ms.start(spec)
        first_run = handle.first_execution_run_id or handle.result_run_id
        assert first_run is not None
        (offer,) = await until("a's offer", lambda: _events(ms, "work.offered", "a"))
        cmd = ada.command("work.accept_offer", ms.group, {
            "work_item_id": "a", "offer_id": offer.body["offer_id"],
            "revision": offer.body["revision"]})  # fmt: skip
        update = AgentCommandInput(command=cmd)
        original: CommandVerdict = await handle.execute_update(
            MissionWorkflow.accept_offer, update, id=cmd.command_id
        )
        assert original.accepted, original.rejection

        await ms.agent("ada", reg, actor=ada)
        wid = mission_workflow_id(spec.mission_id)
        try:
            await until("d to run", last_running.is_set, timeout_s=60)
            runs = await _runs(env, wid, first_run)
            applied_in = [
                i for i, h in enumerate(runs)
                if _mentions(h, cmd.command_id, {EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED})
            ]  # fmt: skip
            assert len(applied_in) == 1, applied_in
            assert applied_in[0] < len(runs) - 1, "no continue-as-new since the acceptance"

            # The agent retries: the same signed Command under the same update id, now answered
            # by a later run than the one that applied it.
            again = await env.client.get_workflow_handle(wid).execute_update(
                MissionWorkflow.accept_offer, update, id=cmd.command_id
            )
            assert again == original
        finally:
            release.set()
        result = await handle.result()
        offers_accepted = _events(ms, "work.offer_accepted", "a")
        verify_log(ms.stack.authority.conn, ms.group, ms.stack.authority.public_key)

    assert result.status == "completed"
    assert [i.state.value for i in result.items] == ["verified"] * 4
    # The Authority saw the acceptance once; the retry was answered from the carried verdicts.
    assert [(e.command_id, e.body["ownership_epoch"]) for e in offers_accepted] == [
        (cmd.command_id, 1)
    ]
    runs = await _runs(env, wid, first_run)
    answered_in = [
        i for i, h in enumerate(runs)
        if _mentions(h, cmd.command_id, {EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED})
    ]  # fmt: skip
    assert len(answered_in) == 2 and answered_in[0] == applied_in[0], answered_in
    retry_run = runs[answered_in[1]]
    # The run that answered the retry received the verdict in its continue-as-new input …
    assert cmd.command_id.encode() in retry_run.events[0].SerializeToString()
    # … and never sent the Command to the Authority again.
    assert not _mentions(retry_run, cmd.command_id, _AUTHORITY_CALLS)


async def test_work_started_just_before_continue_as_new_still_runs__MW_11_3_b(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``start_work`` arrives when continue-as-new is already suggested: the run must not
    continue as new between the lease grant and scheduling ``execute_work_item`` (the new run
    would hold an ACTIVE item that nothing executes, and the Mission would never finish)."""
    env = dev_env_small_history
    async with mission_stack(env, tmp_path) as ms:
        ada = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"], max_concurrency=2)
        spec = ms.spec("can-start", [{"work_item_id": "a", "contract": contract().wire()}])
        handle = await ms.start(spec)
        (offer,) = await until("a's offer", lambda: _events(ms, "work.offered", "a"))
        cmd = ada.command("work.accept_offer", ms.group, {
            "work_item_id": "a", "offer_id": offer.body["offer_id"],
            "revision": offer.body["revision"]})  # fmt: skip
        verdict = await handle.execute_update(
            MissionWorkflow.accept_offer, AgentCommandInput(command=cmd), id=cmd.command_id
        )
        assert verdict.accepted, verdict.rejection

        # Grow the history past the suggestion (signals the Mission ignores), so the next
        # workflow task — the one carrying ada's start_work — says "continue as new".
        latest = env.client.get_workflow_handle(handle.id)  # follows continue-as-new

        async def suggested() -> bool:
            # A quiet run continues as new as soon as it is suggested, so grow the *current*
            # run's history just past the suggestion and start at once: the start_work then
            # races the continue-as-new, in either order the Mission must finish.
            h = await latest.fetch_history()
            first = h.events[0].workflow_execution_started_event_attributes
            if len(h.events) > SMALL_HISTORY_EVENTS or first.continued_execution_run_id:
                return True  # past the suggestion, or it already continued as new on it
            await handle.signal(MissionWorkflow.child_finished, ChildOutcome(
                work_item_id="none", child_mission_id="none", approved=False))  # fmt: skip
            return False

        await until("a long history", suggested)
        await ms.agent("ada", _step_registry(), actor=ada)  # starts a at once
        result = await asyncio.wait_for(handle.result(), 30)
        started = _events(ms, "work.started", "a")

    assert result.status == "completed"
    (res,) = result.items
    assert (res.state.value, res.owner, res.ownership_epoch) == ("verified", "ada", 1)
    assert len(started) == 1
