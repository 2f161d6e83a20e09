"""When things go wrong (issue 11): what a user sees, and nothing stuck. On the REAL Temporal dev
server with real agent runtimes and a real Authority: a failed Mission fails its execution and
says why (status, search attributes, the handler's error in the result, the query, the CLI and
the worker's log); a failure its agent reports as not retryable is not retried; invalid input
fails the workflow at once; duplicate ids are refused and a repeated edge is harmless; an update
sent with the start waits for the Mission; the id of a finished Mission cannot start again."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from missionweave.outcome import result_of
from missionweave.protocol import WorkItemFacts, WorkItemState
from missionweave.protocol.temporal_contract import (
    AuthorizeWorkInput,
    MissionSpec,
    WorkItemSpec,
    mission_workflow_id,
)
from missionweave.worker import HandlerRegistry, PermanentFailure, Submission, WorkContext
from missionweave.workflows import ItemState, MissionState, MissionWorkflow
from missionweave.workflows._plan import plan
from tests.support.mission_harness import (
    contract,
    mission_cli,
    mission_stack,
    submission,
    work_items,
)
from tests.support.mission_outcome import ending, item, result, states
from tests.support.waits import WAIT_S, until


async def _failure(handle: Any) -> ApplicationError:
    """The non-retryable ``ApplicationError`` the Mission's execution failed with."""
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), WAIT_S)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.non_retryable, cause
    return cause


# ------------------------------------------------------------------ a failed Mission (1, 2)


async def test_a_failed_mission_fails_its_execution_and_says_why__issue11_1__issue11_2(
    dev_env: WorkflowEnvironment, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler raises ``RuntimeError("kaboom")`` on every attempt (MW-11.4-d: 2 attempts):
    the execution ends *Failed* with a non-retryable ``MissionFailed`` whose details carry the
    ``MissionResult``; the search attributes say ``failed`` with nothing open, and the list
    query ``MissionStatus="failed"`` finds it. The handler's exception type, message and a
    trimmed traceback are in the result (per item), the status query, ``mission status``
    (table and ``--json``), the Temporal failure and the worker's log (MW-11.4-f)."""
    caplog.set_level(logging.WARNING, logger="missionweave.worker._execute")
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        raise RuntimeError("kaboom")

    c = contract(retry={"max_attempts": 2, "initial_backoff_ms": 100})
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("fail1", [{"work_item_id": "a", "contract": c.wire()}]))

        cause = await _failure(handle)
        assert cause.type == "MissionFailed"
        assert cause.message == "mission fail1 failed: a failed for good: RuntimeError: kaboom"
        res = result_of(cause)
        assert res is not None and res.status == "failed"
        (a,) = res.items
        assert (a.state.value, a.attempts) == ("failed", 2)
        assert a.detail == "failed after 2 attempt(s) at ada: RuntimeError: kaboom"
        assert a.error == "RuntimeError: kaboom"  # the traceback stays in the agent's log

        end = await ending(handle)
        assert (end.status, end.mission_status, end.open_items) == ("FAILED", "failed", 0)
        listed = await until(
            "the list query to find it",
            lambda: _ids(dev_env, 'MissionStatus="failed" AND MissionId="fail1"'),
        )
        assert listed == [handle.id]
        st = await handle.query(MissionWorkflow.status)
        assert st.status == "failed" and item(st, "a").error == a.error

        out = await mission_cli(dev_env, "mission", "status", "fail1", "--json")
        assert out.exit_code == 0, out.output
        shown = json.loads(out.output)
        assert shown["status"] == "failed" and shown["items"][0]["error"] == a.error
        assert shown["reason"] == "a failed for good: RuntimeError: kaboom"
        out = await mission_cli(dev_env, "mission", "status", "fail1")
        assert out.exit_code == 0 and "RuntimeError: kaboom" in out.output, out.output
        out = await mission_cli(dev_env, "mission", "watch", "fail1")
        assert out.exit_code == 1 and out.output.strip().endswith("mission fail1 failed")

        work_failed = [e.body for e in ms.events("a") if e.type == "work.failed"]
        # the second failure exhausts max_attempts: the Authority records it (MW-11.4-d)
        assert [(b["attempts"], b["retryable"]) for b in work_failed] == [(1, True), (2, False)]
        assert work_failed[1]["retry_exhausted"] == {
            "bound": "max_attempts",
            "limit": 2,
            "value": 2,
        }
    logged = [r for r in caplog.records if r.getMessage().startswith("handler of a raised")]
    assert len(logged) == 2 and all(
        r.exc_info is not None and str(r.exc_info[1]) == "kaboom" for r in logged
    )
    # no coordinator answers the query any more: the status is read from the failure's details
    out = await mission_cli(dev_env, "mission", "status", "fail1", "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert (shown["status"], shown["items"][0]["error"]) == ("failed", a.error)


async def test_temporal_cancel_request_cancels_the_mission_and_ends_canceled__issue11_1(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Temporal's own cancel request (``temporal workflow cancel``, ``handle.cancel``) with a
    reason: the Authority cancels every unfinished WorkItem (``mission.cancel`` with that
    reason), the running handler is stopped, and the execution ends *Canceled* with the search
    attributes saying ``cancelled``; ``mission watch`` ends ``cancelled``, exit 1. (It used to
    end Canceled at once and leave the Mission running at the Authority.)"""
    stopped = asyncio.Event()
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            stopped.set()
            raise
        raise AssertionError("unreachable")

    c = contract().wire()
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        items = [
            {"work_item_id": "a", "contract": c},
            {"work_item_id": "b", "contract": c, "dependencies": ["a"]},
        ]
        handle = await ms.start(ms.spec("tcancel1", items))
        await ms.wait_state("a", "active")
        await handle.cancel(reason="operator stop")

        end = await ending(handle)
        assert (end.status, end.failure) == ("CANCELED", None)
        assert (end.mission_status, end.open_items) == ("cancelled", 0)
        log = ms.events()
        assert {e.work_item_id for e in log if e.type == "work.cancelled"} == {"a", "b"}
        assert [e.body["reason"] for e in log if e.type == "mission.cancelled"] == ["operator stop"]
        st = await handle.query(MissionWorkflow.status)
        assert (st.status, {i.state.value for i in st.items}) == ("cancelled", {"cancelled"})
        await asyncio.wait_for(stopped.wait(), WAIT_S)
        out = await mission_cli(dev_env, "mission", "watch", "tcancel1")
        assert out.exit_code == 1 and out.output.strip().endswith("mission tcancel1 cancelled")


async def _ids(env: WorkflowEnvironment, query: str) -> list[str]:
    return [w.id async for w in env.client.list_workflows(query)]


async def test_an_invalid_graph_fails_at_once_and_says_failed__issue11_1(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A Mission whose WorkItems form a cycle fails its execution at once (``InvalidMission``,
    the cycle named, the result in the details); its status query and search attributes say
    ``failed``, not ``running``, and the Authority never heard of it."""
    c = contract().wire()
    async with mission_stack(dev_env, tmp_path) as ms:
        cycle = [
            {"work_item_id": "a", "contract": c, "dependencies": ["b"]},
            {"work_item_id": "b", "contract": c, "dependencies": ["a"]},
        ]
        handle = await ms.start(ms.spec("cyc1", cycle))
        cause = await _failure(handle)
        assert cause.type == "InvalidMission"
        assert "dependency cycle" in cause.message, cause.message
        res = result_of(cause)
        assert res is not None and res.status == "failed" and res.reason == cause.message
        end = await ending(handle)
        assert (end.status, end.mission_status, end.open_items) == ("FAILED", "failed", 0)
        st = await handle.query(MissionWorkflow.status)
        assert st.status == "failed"
        assert all(i.detail.startswith("not authorized: invalid Mission") for i in st.items)
        assert not [e for e in ms.events() if e.body.get("mission_id") == "cyc1"]


# ------------------------------------------------------------------------- not retried (3)


async def test_a_permanent_failure_is_not_retried__issue11_3__MW_11_4_d(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``PermanentFailure`` is reported ``retryable: false``: the WorkItem is not offered
    again although its contract allows 3 attempts, and the Mission fails after one."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        raise PermanentFailure("the input cannot be processed")

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("perm1", work_items({"p": []})))
        res = await result(handle)
        (p,) = res.items
        assert (res.status, p.state.value, p.attempts) == ("failed", "failed", 1)
        assert p.detail == (
            "failed after 1 attempt(s) (not retryable) at ada: "
            "PermanentFailure: the input cannot be processed"
        )
        log = ms.events("p")
        assert [e.body["retryable"] for e in log if e.type == "work.failed"] == [False]
        assert [e.type for e in log].count("work.offered") == 1


def test_a_failure_reported_not_retryable_is_final__issue11_3__MW_11_4_d() -> None:
    """The plan treats a failure its agent reported as not retryable — ``PermanentFailure``,
    a budget overrun (``budget exceeded``, ``retryable: false``) — as final, with attempts
    left; a retryable one after the same attempt is offered again."""
    from missionweave.protocol import WorkGraph

    spec = WorkItemSpec.model_validate({"work_item_id": "b", "contract": contract().wire()})
    for retryable, exhausted in ((False, ["b"]), (True, [])):
        facts = WorkItemFacts(state=WorkItemState.FAILED, attempts=1, retryable=retryable)
        state = MissionState(
            spec=MissionSpec(group_id="g", mission_id="m", items=[spec]),
            items={"b": ItemState(spec=spec, w=facts, authorized=True)},
        )
        graph = WorkGraph()
        graph.add({"b": []})
        p = plan(state, graph, now_ms=10**13)
        assert p.exhausted == exhausted
        # a retryable failure waits for its backoff, then is offered again
        assert (p.next_deadline_ms is None) == bool(exhausted)


# ------------------------------------------------------------------------ invalid input (4, 5)


_BAD = {
    "misspelled": (
        {"dependancies": []},
        "invalid MissionSpec: items.0.dependancies: Extra inputs are not permitted"
        " (did you mean 'dependencies'?)",
    ),
    "duplicate": ({}, "invalid MissionSpec: items: duplicate work_item_id 'a'"),
}


@pytest.mark.parametrize(
    ("case", "arity"), [("misspelled", 1), ("misspelled", 2), ("duplicate", 1)]
)
async def test_invalid_input_fails_the_workflow_at_once__issue11_4__issue11_5(
    dev_env: WorkflowEnvironment, tmp_path: Path, case: str, arity: int
) -> None:
    """A MissionSpec as plain JSON with a misspelled field, or the same WorkItem id twice,
    started as ``temporal workflow start --input-file`` does (one argument) or with both
    arguments: the workflow fails at once — no failing workflow task retried for ever — with
    one non-retryable ``InvalidMission`` naming the field; ``status`` says ``failed``."""
    extra, message = _BAD[case]
    mid = f"bad-{case}-{arity}"
    item = {"work_item_id": "a", "contract": contract().wire(), **extra}
    raw = {"group_id": "demo", "mission_id": mid, "items": [item]}
    if case == "duplicate":
        raw["items"] = [item, dict(item)]
    async with mission_stack(dev_env, tmp_path) as ms:
        handle = await dev_env.client.start_workflow(
            "Mission",
            args=[raw] if arity == 1 else [raw, None],
            id=mission_workflow_id(mid),
            task_queue=ms.task_queue,
        )
        cause = await _failure(handle)
        assert (cause.type, cause.message) == ("InvalidMission", message)
        end = await ending(handle)
        assert (end.status, end.mission_status) == ("FAILED", "failed")
        st = await handle.query(MissionWorkflow.status)
        assert (st.status, st.reason) == ("failed", message)  # `mission status` says why
        kinds = [e.event_type for e in (await handle.fetch_history()).events]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds


def test_a_mission_spec_refuses_a_work_item_id_twice__issue11_5() -> None:
    """The client's MissionSpec refuses the same WorkItem id twice (it used to keep the last
    copy silently)."""
    a = {"work_item_id": "a", "contract": contract().wire()}
    with pytest.raises(ValueError, match="duplicate work_item_id 'a'"):
        MissionSpec.model_validate({"group_id": "g", "mission_id": "m", "items": [a, dict(a)]})


async def test_authorize_work_refuses_an_id_twice_and_a_repeated_edge_is_harmless__issue11_5(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``authorize_work`` with the same new id twice is refused by the validator
    (``duplicate_id``) and the Mission runs on; edges the WorkItems have already — also one
    into a WorkItem that is running — are accepted and send no Command (nothing new to
    record)."""
    gate = asyncio.Event()
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        if ctx.work_item_id == "u":
            await gate.wait()
        await ctx.guard()
        return submission(ctx)

    c = contract().wire()
    x = WorkItemSpec.model_validate({"work_item_id": "x", "contract": c})
    items = work_items({"t": [], "u": ["t"], "s": ["u"]})
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("edges1", items))
        await ms.wait_state("u", "active")
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.execute_update(
                MissionWorkflow.authorize_work, AuthorizeWorkInput(items=[x, x])
            )
        cause = info.value.cause
        assert isinstance(cause, ApplicationError)
        assert (cause.type, cause.non_retryable) == ("duplicate_id", True)
        assert "x is given twice" in cause.message

        again = await handle.execute_update(
            MissionWorkflow.authorize_work, AuthorizeWorkInput(edges=[("t", "u"), ("u", "s")])
        )
        assert again.verdicts == []
        gate.set()
        res = await result(handle)
        assert res.status == "completed"
        assert [i.work_item_id for i in res.items] == ["t", "u", "s"]
        assert [i.dependencies for i in res.items] == [[], ["t"], ["u"]]
        assert not [e for e in ms.events() if e.type == "work.dependencies_added"]


# ---------------------------------------------------------------- start and the Authority (6, 7)


async def test_authorize_work_sent_with_the_start_waits_for_the_mission__issue11_6(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``authorize_work`` sent as update-with-start runs before ``run`` has created the
    Mission: it waits until the Authority holds the Mission, then authorizes its WorkItem
    (it used to reach the Authority first, be refused ``unknown_mission`` and cancel the
    Mission); both WorkItems run."""
    c = contract().wire()
    b = WorkItemSpec.model_validate({"work_item_id": "b", "contract": c, "dependencies": ["a"]})
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _steps())
        spec = ms.spec("uws1", [{"work_item_id": "a", "contract": c}])
        start = WithStartWorkflowOperation(
            MissionWorkflow.run,
            args=[spec, None],
            id=mission_workflow_id("uws1"),
            task_queue=ms.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        out = await dev_env.client.execute_update_with_start_workflow(
            MissionWorkflow.authorize_work,
            AuthorizeWorkInput(items=[b]),
            start_workflow_operation=start,
        )
        assert [v.status for v in out.verdicts] == ["accepted"], out
        res = await result(await start.workflow_handle())
        assert res.status == "completed"
        assert states(res.items) == {
            "a": "verified",
            "b": "verified",
        }
        log = [e.type for e in ms.events() if e.type in ("mission.created", "work.authorized")]
        assert log == ["mission.created", "work.authorized", "work.authorized"]


async def test_the_id_of_a_finished_mission_cannot_start_again__issue11_7(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``temporal workflow start`` with the workflow id of a finished Mission (Temporal allows
    a closed id to run again) starts a run that fails at once — ``MissionExists``,
    non-retryable, a few history events — instead of running for ever; the Authority's log
    gains nothing."""
    c = contract().wire()
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _steps())
        spec = ms.spec("again1", [{"work_item_id": "a", "contract": c}])
        assert (await result(await ms.start(spec))).status == "completed"
        before = [e.seq for e in ms.events()]

        handle = await ms.start(spec)  # a second run under the same workflow id
        cause = await _failure(handle)
        assert cause.type == "MissionExists"
        assert "mission again1 exists already at the Authority" in cause.message, cause.message
        assert result_of(cause) is None
        end = await ending(handle)
        # the refused run is not the Mission: it leaves the Mission's search attributes, so
        # neither the failed-Missions list nor the CLI takes it for the completed Mission
        assert (end.status, end.mission_status) == ("FAILED", None)
        history = (await handle.fetch_history()).events
        assert len(history) < 30, len(history)
        assert [e.seq for e in ms.events()] == before
        failed = [
            w.run_id
            async for w in dev_env.client.list_workflows(
                'MissionStatus = "failed" AND WorkflowId = "mission-again1"'
            )
        ]
        assert failed == []
        out = await mission_cli(dev_env, "mission", "status", "again1", "--json")
        assert out.exit_code == 0, out.output
        assert json.loads(out.output)["status"] == "completed"


def _steps() -> HandlerRegistry:
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        await ctx.guard()
        return submission(ctx)

    return reg
