"""Agents that die or freeze at the worst moments, on the real dev server: the Mission still
completes, every WorkItem is verified once, and the log says what happened (docs/design.md §4,
"One reducer": when an activity's result is lost, the workflow reads the Authority's log).

* An agent whose process dies right after its ``work.submit`` was accepted: the workflow never
  gets the activity's result, reads the WorkItem's Events from the Authority when the heartbeat
  times out, and reviews the submission the Authority holds — it is not offered again.
* An agent frozen (SIGSTOP, a separate ``missionweave worker`` process) past its lease: the
  WorkItem is reassigned with ownership epoch + 1, and when the frozen process resumes, its late
  result is recorded by the Authority (MW-11.5-a/b) although Temporal gave up on its activity.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from missionweave.authority import verify_log
from missionweave.authority.client import AuthorityClient
from missionweave.protocol import AgentCard, Event
from missionweave.protocol.temporal_contract import (
    EXECUTE_WORK_ITEM,
    REPORT_PROGRESS_SIGNAL,
    ExecuteWorkItemInput,
    ProgressSignal,
    WorkOutcome,
    agent_task_queue,
)
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.worker._admission import AdmissionControl
from missionweave.worker._dispatch import Dispatcher
from missionweave.worker._execute import WorkItemExecutor
from missionweave.worker._scheduler import Scheduler
from missionweave.worker._slots import SlotBoard
from missionweave.worker._state import LocalState
from missionweave.worker._take import OfferTaker
from tests.support.mission_harness import (
    SHORT_LEASE,
    MissionStack,
    contract,
    mission_stack,
    step_registry,
    stop_process,
    submission,
)
from tests.support.waits import WAIT_S, until

#: How long the frozen agent's handler works, seconds.
SLEEP_S = 3


def _events(ms: MissionStack, wid: str) -> list[Event]:
    return [e for e in ms.stack.authority.events(ms.group) if e.work_item_id == wid]


def _types(ms: MissionStack, wid: str) -> list[str]:
    return [e.type for e in _events(ms, wid)]


async def _signalled(
    env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any], phase: str
) -> bool:
    """Whether the Mission workflow got a ``report_progress`` signal of ``phase``. An agent
    signals a report only once the Authority has answered it, and in the background: by then
    its handler has gone on (``AgentRuntime._progress``)."""
    for e in (await handle.fetch_history()).events:
        if e.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            continue
        attrs = e.workflow_execution_signaled_event_attributes
        if attrs.signal_name == REPORT_PROGRESS_SIGNAL:
            (sig,) = await env.client.data_converter.decode(attrs.input.payloads, [ProgressSignal])
            if sig.report.phase == phase:
                return True
    return False


def _verified(ms: MissionStack, wid: str) -> list[Event]:
    """``wid``'s Events once the whole log verifies (call it when nothing appends any more)."""
    verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
    return _events(ms, wid)


async def test_agent_dead_after_its_accepted_submit_the_submission_is_reviewed__MW_11_5_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    c = contract(timeouts=SHORT_LEASE)
    async with mission_stack(dev_env, tmp_path) as ms:
        ada = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"], max_concurrency=2)
        card = AgentCard(
            agent_id="ada",
            public_key=ada.public_key,
            capabilities=["demo.step@1.0"],
            max_concurrency=2,
        )
        state = LocalState(tmp_path / "ada.db", "ada")
        for e in ms.stack.authority.events(ms.group):  # its membership, as its projection has it
            state.apply(e)
        registry = step_registry()
        board = SlotBoard(2)
        dispatcher = Dispatcher(ada, state, [ms.group], Scheduler(2), board)
        submitted = asyncio.Event()
        async with AuthorityClient(ms.stack.url, signing_key=ada.key) as client:
            taker = OfferTaker(
                ada, client, AdmissionControl(card, registry), state, board, dispatcher, [ms.group]
            )
            executor = WorkItemExecutor(ada, client, registry, board=board, taker=taker)

            # ada's real agent code accepts, starts, runs and submits to the Authority — and
            # then the process is gone: the activity never completes, never heartbeats again.
            @activity.defn(name=EXECUTE_WORK_ITEM)
            async def dies_after_submit(work: ExecuteWorkItemInput) -> WorkOutcome:
                await executor.execute_work_item(work)
                submitted.set()
                await asyncio.Event().wait()
                raise AssertionError("unreachable")

            loop = asyncio.create_task(dispatcher.run())
            spec = ms.spec("dead-after-submit", [{"work_item_id": "a", "contract": c.wire()}])
            try:
                async with Worker(
                    dev_env.client,
                    task_queue=agent_task_queue("ada", ms.group),
                    activities=[dies_after_submit],
                ):
                    handle = await ms.start(spec)
                    await asyncio.wait_for(submitted.wait(), WAIT_S)
                    result = await asyncio.wait_for(handle.result(), WAIT_S)
            finally:
                loop.cancel()
                await asyncio.gather(loop, return_exceptions=True)
                state.close()
        types = [e.type for e in _verified(ms, "a")]

    assert result.status == "completed"
    (a,) = result.items
    assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", "ada", 1)
    assert a.outputs == {"result": {"item": "a"}}  # what the Authority held was reviewed
    assert types.count("work.offered") == 1 and types.count("work.submitted") == 1
    assert types[-1] == "work.result_accepted"


def _bob_registry() -> HandlerRegistry:
    reg = HandlerRegistry()

    @reg.handler("fault.sleep", version="1.0", estimate_ms=1_000)
    async def quick(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        return submission(ctx, method="fault-test", by=ctx.agent_id)

    return reg


async def test_agent_frozen_past_its_lease_late_result_recorded_on_resume__MW_11_5_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    c = contract(["fault.sleep@1.0"], timeouts=SHORT_LEASE)
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.process_member("ada", ["fault.sleep@1.0"])
        proc = await ms.agent_process("ada", "tests.support.fault_handlers")
        item = {"work_item_id": "a", "contract": c.wire(), "input": {"sleep_ms": SLEEP_S * 1000}}
        try:
            presence = ms.stack.client.presence
            present = await until("ada's Presence", lambda: presence(ms.group))
            assert "ada" in present
            handle = await ms.start(ms.spec("frozen", [item]))
            # its "sleeping" report answered and signalled: the handler is in its sleep
            # (tests/support/fault_handlers.py), with nothing left to send before it submits
            await until("ada at work", lambda: _signalled(dev_env, handle, "sleeping"))
            os.kill(proc.pid, signal.SIGSTOP)  # frozen mid-work, past its 2 s lease
            frozen_at = asyncio.get_running_loop().time()
            await ms.agent("bob", _bob_registry(), capabilities=["fault.sleep@1.0"])
            result = await asyncio.wait_for(handle.result(), WAIT_S)
            # frozen longer than its handler works: when it resumes, the work is done
            await asyncio.sleep(
                max(0.0, frozen_at + SLEEP_S + 1 - asyncio.get_running_loop().time())
            )
            os.kill(proc.pid, signal.SIGCONT)
            late = "work.late_result_recorded"
            try:
                await until("ada's late result", lambda: late in _types(ms, "a"))
            except AssertionError as exc:
                log_tail = (tmp_path / "ada.log").read_text(errors="replace")[-4000:]
                why = f"no late result; {_types(ms, 'a')}; ada's log:\n{log_tail}"
                raise AssertionError(why) from exc
        finally:
            await stop_process(proc)
        log = _verified(ms, "a")

    assert result.status == "completed"
    (a,) = result.items
    assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", "bob", 2)
    starts = [e.body["lease"] for e in log if e.type == "work.started"]
    assert [(s["agent_id"], s["ownership_epoch"]) for s in starts] == [("ada", 1), ("bob", 2)]
    (late,) = [e for e in log if e.type == "work.late_result_recorded"]
    assert (late.actor, late.body["ownership_epoch"]) == ("ada", 1)
    # ada's result completed nothing
    assert [e.actor for e in log if e.type == "work.submitted"] == ["bob"]


async def test_an_owner_cut_off_from_temporal_but_not_the_authority_is_reviewed__MW_11_5_a(
    dev_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ada's heartbeats to Temporal are lost (a partition) while the Authority stays reachable:
    Temporal times her activity out, but she keeps renewing her lease and submits. The offer
    the workflow then makes is refused (``owner_active``); it reads the log instead of
    retrying blindly, and reviews her submission."""
    from missionweave.worker import _execute

    monkeypatch.setattr(_execute, "heartbeat", lambda details: None)  # lost on the way
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        await asyncio.sleep(6)  # three leases long, renewed with the Authority all along
        return submission(ctx, method="fault-test")

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg, max_concurrency=1)
        spec = ms.spec(
            "partition", [{"work_item_id": "a", "contract": contract(timeouts=SHORT_LEASE).wire()}]
        )
        handle = await ms.start(spec)
        result = await asyncio.wait_for(handle.result(), WAIT_S)
        types = [e.type for e in _verified(ms, "a")]
    assert result.status == "completed"
    (a,) = result.items
    assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", "ada", 1)
    assert types.count("work.submitted") == 1 and types[-1] == "work.result_accepted"
