"""A Mission never holds more than Temporal can carry (issue 24, finding 4).

On ``dev_env_small_history`` (continue-as-new suggested after a few history events): ten
WorkItems of 1.5 MiB input each, added by a handler's ``ctx.authorize_work``, travel by
reference (the artifact store holds the content, the workflow its hash) through several
continue-as-new and complete, each handler receiving its whole input; an input the Mission
could not carry inline is refused at the ``authorize_work`` Update (and at the start) with a
structured error, and the Mission goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from missionweave.protocol import (
    INPUT_ARTIFACT_KEY,
    MAX_CARRIED_INPUT_BYTES,
    MAX_INLINE_INPUT_BYTES,
)
from missionweave.protocol.temporal_contract import AuthorizeWorkInput, WorkItemSpec
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import contract, mission_stack, submission
from tests.support.waits import WAIT_S

BIG = 1536 * 1024  # 1.5 MiB of input per WorkItem
N_BIG = 10


def _blob(i: int) -> str:
    return (f"{i:02d}" * (BIG // 2))[:BIG]


def _registry(received: dict[str, str], refs: list[str]) -> HandlerRegistry:
    """``plan`` adds ten 1.5 MiB WorkItems, one ``authorize_work`` each, each depending on the
    one before; every other WorkItem records the digest of the input it was handed."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        if ctx.work_item_id == "plan":
            wire = contract().wire()
            for i in range(N_BIG):
                deps = [f"big-{i - 1}"] if i else []
                spec = WorkItemSpec.model_validate(
                    {
                        "work_item_id": f"big-{i}",
                        "contract": wire,
                        "dependencies": deps,
                        "input": {"n": i, "blob": _blob(i)},
                    }
                )
                await ctx.authorize_work([spec])
        else:
            blob = str(input.get("blob", ""))
            received[ctx.work_item_id] = hashlib.sha256(blob.encode()).hexdigest()
        return submission(ctx, method="demo")

    return reg


def _refusal(info: pytest.ExceptionInfo[WorkflowUpdateFailedError]) -> ApplicationError:
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.non_retryable, cause
    return cause


async def test_large_inputs_travel_by_reference_through_continue_as_new(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path
) -> None:
    env = dev_env_small_history
    received: dict[str, str] = {}
    async with mission_stack(env, tmp_path) as ms:
        await ms.agent("ada", _registry(received, []), max_concurrency=2)
        spec = ms.spec(
            "big-inputs",
            [{"work_item_id": "plan", "contract": contract().wire()}],
            offer_policy={"offer_ttl_ms": 60_000, "reoffer_backoff_ms": 300},
        )
        handle = await ms.start(spec)
        # an inline input the Mission could not carry is refused at the Update, nothing added
        inline = AuthorizeWorkInput.model_validate(
            {
                "items": [
                    {
                        "work_item_id": "inline",
                        "contract": contract().wire(),
                        "input": {"b": "x" * BIG},
                    }
                ]
            }
        )
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.execute_update(MissionWorkflow.authorize_work, inline)
        cause = _refusal(info)
        assert cause.type == "input_too_large"
        detail = cause.details[0]
        assert detail["work_item_id"] == "inline" and detail["max_bytes"] == MAX_INLINE_INPUT_BYTES
        assert detail["bytes"] > BIG
        # small inline inputs that together pass the carried bound: refused as a whole
        each = MAX_INLINE_INPUT_BYTES - 100
        many = AuthorizeWorkInput.model_validate(
            {
                "items": [
                    {
                        "work_item_id": f"m{i}",
                        "contract": contract().wire(),
                        "input": {"b": "y" * each},
                    }
                    for i in range(MAX_CARRIED_INPUT_BYTES // each + 1)
                ]
            }
        )
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.execute_update(MissionWorkflow.authorize_work, many)
        cause = _refusal(info)
        assert cause.type == "mission_inputs_too_large"
        assert cause.details[0]["max_bytes"] == MAX_CARRIED_INPUT_BYTES

        first_run = handle.first_execution_run_id or handle.result_run_id
        result = await asyncio.wait_for(handle.result(), WAIT_S * 3)
        status = await handle.query(MissionWorkflow.status)
        events = ms.stack.authority.events(ms.group)
        # every run of the chain: how many, and whether any workflow task failed
        runs, failed_tasks = 0, 0
        run_id: str | None = first_run
        while run_id:
            history = await env.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
            runs += 1
            failed_tasks += sum(
                e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events
            )
            last = history.events[-1]
            run_id = None
            if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                run_id = (
                    last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                )

    assert result.status == "completed", result
    assert failed_tasks == 0
    assert runs >= 3, runs  # the inputs crossed continue-as-new
    assert {
        i.work_item_id: i.state.value for i in result.items if i.work_item_id.startswith("big")
    } == {f"big-{i}": "verified" for i in range(N_BIG)}
    # each handler got its whole input back from the reference
    assert received == {
        f"big-{i}": hashlib.sha256(_blob(i).encode()).hexdigest() for i in range(N_BIG)
    }
    # nothing refused was added
    assert not {"inline", "m0"} & {it.work_item_id for it in status.items}
    assert not [e for e in events if e.work_item_id in ("inline", "m0")]
    # the plan's submission names no input Artifact: they are not its deliverables
    (submitted,) = [e for e in events if e.type == "work.submitted" and e.work_item_id == "plan"]
    published = [e for e in events if e.type == "artifact.published" and e.work_item_id == "plan"]
    assert len(published) == N_BIG
    assert not {p.body["manifest"]["manifest"]["content_hash"] for p in published} & set(
        submitted.body.get("artifacts", [])
    )


async def test_a_spec_whose_inputs_cannot_be_carried_is_refused_at_start(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        spec = ms.spec(
            "big-start",
            [{"work_item_id": "a", "contract": contract().wire(), "input": {"b": "z" * 100_000}}],
        )
        handle = await ms.start(spec)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), WAIT_S)
        cause = info.value.cause
        assert isinstance(cause, ApplicationError) and cause.non_retryable
        assert cause.type == "InvalidMission"
        assert cause.message.startswith("input_too_large: the input of WorkItem a is")
        assert INPUT_ARTIFACT_KEY in cause.message
        # the Authority never heard of it
        assert not [e for e in ms.stack.authority.events(ms.group) if e.type == "mission.created"]
