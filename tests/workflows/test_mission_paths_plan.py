"""Planning paths of the Mission workflow end to end, on the REAL Temporal dev server with real
agent runtimes and a real Authority: the evolving DAG (``authorize_work``), child Missions and
their failure policy, and a Mission started from the ``temporal`` CLI with plain JSON."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, ParentClosePolicy
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from missionweave.activities import CoordinatorActivities
from missionweave.dev import find_temporal_cli
from missionweave.outcome import mission_result
from missionweave.protocol.temporal_contract import (
    AuthorizeWorkInput,
    BatchEntry,
    CancelInput,
    CommandVerdict,
    CoordinatorIntent,
    MissionResult,
    SubmitCommandsInput,
    WorkItemSpec,
    mission_workflow_id,
)
from missionweave.worker import HandlerRegistry, PermanentFailure, Submission, WorkContext
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import contract, mission_stack, submission, work_items
from tests.support.mission_outcome import ending, item, result, states, types, wait_status
from tests.support.temporal_env import authority_stack
from tests.support.waits import WAIT_S


def _registry(gates: dict[str, asyncio.Event] | None = None) -> HandlerRegistry:
    """``demo.step``: waits for ``gates[work_item_id]`` when there is one, then submits;
    raises :class:`PermanentFailure` when the input says ``{"fail": true}``."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        if input.get("fail"):
            raise PermanentFailure("the input cannot be processed")
        gate = (gates or {}).get(ctx.work_item_id)
        if gate is not None:
            await gate.wait()  # the runtime keeps renewing the lease meanwhile
        await ctx.guard()
        return submission(ctx)

    return reg


# ------------------------------------------------------------------------ the evolving DAG


async def test_runtime_additions_cycles_rejected_valid_ones_run__MW_10_4_a__MW_10_4_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """While the Mission runs, ``authorize_work`` additions forming a cycle (through an
    existing item or among new ones), a self-loop, an unknown id or a duplicate are refused by
    the Update's validator and change nothing (MW-10.4-c); a valid addition is authorized and
    its items run in dependency order (the evolving DAG, MW-10.4-a)."""
    gate = asyncio.Event()
    c = contract().wire()

    def spec(wid: str, *deps: str) -> WorkItemSpec:
        return WorkItemSpec.model_validate(
            {"work_item_id": wid, "contract": c, "dependencies": list(deps)}
        )

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _registry({"a": gate}))
        handle = await ms.start(
            ms.spec(
                "plan1",
                [
                    {"work_item_id": "a", "contract": c},
                    {"work_item_id": "s", "contract": c, "dependencies": ["a"]},
                ],
            )
        )
        await ms.wait_state("a", "active")

        refused = [
            ("cycle", AuthorizeWorkInput(items=[spec("x", "a")], edges=[("x", "a")])),
            ("cycle", AuthorizeWorkInput(items=[spec("p", "q"), spec("q", "p")])),
            ("self_loop", AuthorizeWorkInput(items=[spec("z", "z")])),
            ("unknown_id", AuthorizeWorkInput(items=[spec("u", "nope")])),
            ("unknown_id", AuthorizeWorkInput(items=[spec("v")], edges=[("ghost", "v")])),
            ("duplicate_id", AuthorizeWorkInput(items=[spec("a")])),
            ("not_open", AuthorizeWorkInput(items=[spec("w")], edges=[("w", "a")])),  # a runs
        ]
        for code, bad in refused:
            with pytest.raises(WorkflowUpdateFailedError) as info:
                await handle.execute_update(MissionWorkflow.authorize_work, bad)
            cause = info.value.cause
            assert isinstance(cause, ApplicationError), cause
            assert (cause.type, cause.non_retryable) == (code, True), cause
        st = await handle.query(MissionWorkflow.status)
        assert [i.work_item_id for i in st.items] == ["a", "s"]
        assert {e.work_item_id for e in ms.events() if e.type == "work.authorized"} == {"a", "s"}

        # a valid addition: b after a, c after b, d after a by an extra edge, and the open
        # item s (authorized at the start) now also waits for c
        out = await handle.execute_update(
            MissionWorkflow.authorize_work,
            AuthorizeWorkInput(
                items=[spec("b", "a"), spec("c", "b"), spec("d")], edges=[("a", "d"), ("c", "s")]
            ),
        )
        assert [v.status for v in out.verdicts] == ["accepted"] * 5
        st = await handle.query(MissionWorkflow.status)
        assert {i.work_item_id: i.state.value for i in st.items if i.work_item_id != "a"} == {
            "s": "open",
            "b": "open",
            "c": "open",
            "d": "open",
        }
        assert item(st, "s").dependencies == ["a", "c"]  # what `mission graph` draws
        added = {
            e.work_item_id: e.body["dependencies"]
            for e in ms.events()
            if e.type == "work.dependencies_added"
        }
        assert added == {"d": ["a"], "s": ["a", "c"]}  # recorded by the Authority
        gate.set()

        res = await result(handle)
        assert res.status == "completed"
        assert states(res.items) == dict.fromkeys("asbcd", "verified")
        log = ms.events()
        first: dict[str, int] = {}
        for e in log:
            if e.type in ("work.started", "work.result_accepted") and e.work_item_id:
                first.setdefault(f"{e.type} {e.work_item_id}", e.seq)
        verified, started = "work.result_accepted", "work.started"
        assert first[f"{verified} a"] < first[f"{started} b"]
        assert first[f"{verified} b"] < first[f"{started} c"]
        assert first[f"{verified} a"] < first[f"{started} d"]
        assert first[f"{verified} c"] < first[f"{started} s"]


# ------------------------------------------------------------------------- child Missions


async def child_result(env: WorkflowEnvironment, mission_id: str) -> MissionResult:
    """The result of child Mission ``mission_id``, waiting for its parent to start it."""
    handle = env.client.get_workflow_handle(
        mission_workflow_id(mission_id), result_type=MissionResult
    )
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT_S
    while True:
        try:
            return await asyncio.wait_for(mission_result(handle), max(0.1, end - loop.time()))
        except RPCError as exc:
            if exc.status is not RPCStatusCode.NOT_FOUND or loop.time() > end:
                raise
            await asyncio.sleep(0.1)


def _child(ms_group: str, mission_id: str, wid: str, **input: Any) -> dict[str, Any]:
    return {
        "group_id": ms_group,
        "mission_id": mission_id,
        "title": f"child {mission_id}",
        "items": [
            {
                "work_item_id": wid,
                "input": input,
                "contract": contract(retry={"max_attempts": 1}).wire(),
            }
        ],
        "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
    }


async def test_child_mission_approved_verifies_parent_item__spec_10_2_child_rows(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """An item with ``child_mission`` runs a child ``Mission`` workflow (ParentClosePolicy
    ABANDON) and is blocked meanwhile (``mission.create_child``); when the child completes, the
    parent item is verified with the child's Evidence (spec 10.2 child rows) and its dependents
    run."""
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _registry())
        c = contract().wire()
        spec = ms.spec(
            "parent1",
            [
                {
                    "work_item_id": "p",
                    "contract": c,
                    "child_mission": _child(ms.group, "child1", "c1"),
                },
                {"work_item_id": "after", "contract": c, "dependencies": ["p"]},
            ],
        )
        handle = await ms.start(spec)
        res = await result(handle)
        assert res.status == "completed"
        assert states(res.items) == {
            "p": "verified",
            "after": "verified",
        }

        child_res = await child_result(dev_env, "child1")
        assert child_res.status == "completed"
        assert [(i.work_item_id, i.state.value) for i in child_res.items] == [("c1", "verified")]

        started = [
            e.start_child_workflow_execution_initiated_event_attributes
            for e in (await handle.fetch_history()).events
            if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        ]
        assert [(a.workflow_id, a.parent_close_policy) for a in started] == [
            ("mission-child1", ParentClosePolicy.PARENT_CLOSE_POLICY_ABANDON)
        ]

        log = ms.events()
        created = [e for e in log if e.type == "mission.created"]
        assert [
            (e.body["mission_id"], e.body.get("parent", {}).get("work_item_id")) for e in created
        ] == [("parent1", None), ("child1", "p")]
        p_log = [e for e in log if e.work_item_id == "p"]
        assert types(p_log)[-2:] == ["mission.child_created", "mission.child_approved"]
        approved = p_log[-1].body
        assert approved["child_mission_id"] == "child1"
        child_evidence = [e.model_dump(mode="json") for e in child_res.items[0].evidence]
        assert child_evidence
        assert approved["evidence"] == child_evidence
        assert [e.work_item_id for e in log if e.type == "work.started"] == ["c1", "after"]


@pytest.mark.parametrize("policy", ["fail", "stay_blocked"])
async def test_child_mission_failure_follows_policy__spec_10_2_child_failed(
    dev_env: WorkflowEnvironment, tmp_path: Path, policy: str
) -> None:
    """A child Mission whose only item fails permanently fails; the parent item follows the
    declared ``child_failure_policy`` (spec 10.2): ``fail`` → the item fails and the parent
    Mission fails; ``stay_blocked`` → the item stays blocked and the parent keeps running until
    it is cancelled."""
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _registry())
        spec = ms.spec(
            f"parent-{policy}",
            [
                {
                    "work_item_id": "p",
                    "contract": contract().wire(),
                    "child_mission": _child(ms.group, f"child-{policy}", "c1", fail=True),
                },
            ],
            child_failure_policy=policy,
        )
        handle = await ms.start(spec)

        child_res = await child_result(dev_env, f"child-{policy}")
        assert child_res.status == "failed"
        assert [(i.work_item_id, i.state.value, i.attempts) for i in child_res.items] == [
            ("c1", "failed", 1)
        ]

        child = dev_env.client.get_workflow_handle(mission_workflow_id(f"child-{policy}"))
        assert (await ending(child)).failure == "MissionFailed"  # reported to the parent still
        if policy == "fail":
            res = await result(handle)
            assert res.status == "failed"
            assert [(i.work_item_id, i.state.value) for i in res.items] == [("p", "failed")]
            assert res.items[0].detail == (
                "child Mission child-fail: failed: c1 failed for good: "
                "PermanentFailure: the input cannot be processed"
            )
            assert (await ending(handle)).failure == "MissionFailed"
        else:
            st = await wait_status(handle, lambda s: "failed" in item(s, "p").detail)
            assert (st.status, item(st, "p").state.value) == ("running", "blocked")
            assert (
                await handle.execute_update(
                    MissionWorkflow.cancel, CancelInput(reason="child failed")
                )
                == "cancelled"
            )
            res = await result(handle)
            assert res.status == "cancelled"
            assert [(i.work_item_id, i.state.value) for i in res.items] == [("p", "cancelled")]

        log = ms.events()
        (failed,) = [e.body for e in log if e.type == "mission.child_failed"]
        assert failed == {
            "child_mission_id": f"child-{policy}",
            "policy": policy,
            "state": "failed" if policy == "fail" else "blocked",
        }
        ends = [
            (e.type, e.body["mission_id"])
            for e in log
            if e.type in ("mission.failed", "mission.cancelled", "mission.completed")
        ]
        parent_end = "mission.failed" if policy == "fail" else "mission.cancelled"
        assert ends == [("mission.failed", f"child-{policy}"), (parent_end, f"parent-{policy}")]
        row = ms.stack.authority.work_item(ms.group, "p")
        assert row is not None
        assert row["state"] == ("failed" if policy == "fail" else "cancelled")


# ------------------------------------------------------------- ids unique within the Group


async def test_a_work_item_id_of_another_mission_cancels_the_mission__MW_10_4_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """WorkItem ids are unique within the Group: a Mission naming another Mission's WorkItem
    is not authorized it — it ends ``cancelled`` saying whose id it is, and nothing of the
    other Mission is offered or touched on its behalf."""
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _registry())
        c = contract().wire()
        first = await result(
            await ms.start(ms.spec("m-first", [{"work_item_id": "x", "contract": c}]))
        )
        assert first.status == "completed"
        before = [e.seq for e in ms.events("x")]
        handle = await ms.start(
            ms.spec(
                "m-second",
                [{"work_item_id": "y", "contract": c}, {"work_item_id": "x", "contract": c}],
            )
        )
        second = await result(handle)
        assert second.status == "cancelled"
        end = await ending(handle)  # issue 11.1: the execution says so, and nothing is open
        assert (end.status, end.failure, end.mission_status, end.open_items) == (
            "FAILED",
            "MissionCancelled",
            "cancelled",
            0,
        )
        assert second.reason == (
            "x not authorized: WorkItem 'x' already exists in Mission 'm-first'"
        ), second.reason
        x = next(i for i in second.items if i.work_item_id == "x")
        assert "already exists in Mission 'm-first'" in x.detail, x.detail
        assert [e.seq for e in ms.events("x")] == before  # the other Mission's item: untouched
        cancelled = [e for e in ms.events() if e.type == "mission.cancelled"]
        assert "x not authorized" in cancelled[-1].body["reason"]


# --------------------------------------------------------------------- the temporal CLI


async def test_mission_started_with_temporal_cli_and_plain_json_completes__MW_10_4_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``temporal workflow start --type Mission --input-file mission.json`` with a MissionSpec
    written as plain JSON starts a real Mission, which completes (docs/design.md §1, §4.1)."""
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _registry())
        spec = ms.spec("cli1", work_items({"a": [], "b": ["a"]}))
        mission_json = tmp_path / "mission.json"
        mission_json.write_text(spec.model_dump_json(exclude_defaults=True))

        proc = await asyncio.create_subprocess_exec(
            str(find_temporal_cli()),
            "workflow",
            "start",
            "--type",
            "Mission",
            "--task-queue",
            ms.task_queue,
            "--workflow-id",
            mission_workflow_id("cli1"),
            "--input-file",
            str(mission_json),
            "--address",
            dev_env.client.service_client.config.target_host,
            "--namespace",
            dev_env.client.namespace,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
        assert proc.returncode == 0, (out.decode(), err.decode())

        handle = dev_env.client.get_workflow_handle(
            mission_workflow_id("cli1"), result_type=MissionResult
        )
        res = await result(handle)
        assert res.status == "completed"
        assert states(res.items) == {
            "a": "verified",
            "b": "verified",
        }
        assert res.event_range is not None
        assert "mission.completed" in types(ms.events())


# ---------------------------------------------------- a local activity run twice (WFT retry)


async def test_intent_resigned_in_retried_workflow_task_gets_original_verdict(
    tmp_path: Path,
) -> None:
    """``submit_commands`` is a local activity: when its workflow task fails after it ran (an
    ``UnhandledCommand`` race — the child-failure test above hits it), the retried task signs
    the same command ids with a later ``workflow.now()``. The Authority's idempotency check
    then sees a different signature; the activity sends the original Command from the log
    instead, so the workflow gets the verdict the Authority actually gave — and a different
    decision under a reused id stays refused."""
    async with authority_stack(tmp_path) as stack:
        acts = CoordinatorActivities(stack.client, stack.coordinator)

        async def submit(type: str, issued_at_ms: int, **body: Any) -> CommandVerdict:
            intent = CoordinatorIntent(
                command_id="mission-m/c1", type=type, body=body, issued_at_ms=issued_at_ms
            )
            out = await acts.submit_commands(
                SubmitCommandsInput(group_id=stack.group, entries=[BatchEntry(intent=intent)])
            )
            (verdict,) = out.verdicts
            return verdict

        t = stack.clock()
        first = await submit("mission.create", t, mission_id="m", title="m")
        assert first.accepted
        again = await submit("mission.create", t + 1234, mission_id="m", title="m")
        assert again.accepted, again.rejection
        assert [e.seq for e in again.events] == [e.seq for e in first.events]
        other = await submit("mission.cancel", t + 99, mission_id="m")
        assert other.rejection is not None
        assert other.rejection.code == "idempotency_conflict"
        assert [e.type for e in stack.authority.all_events(stack.group)][-1] == "mission.created"
