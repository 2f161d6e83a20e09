"""Two ``authorize_work`` updates admitted before either handler ran (both wait until the
Mission is created): each is checked again when it runs, so the second of two that add the same
WorkItem id, or bind one contract name to two contracts, is refused with a structured error —
never a workflow task that fails for good, never an item run under another contract."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, UpdateWorkflowExecutionLifecycleStage
from temporalio.api.update.v1 import UpdateRef, WaitPolicy
from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
from temporalio.client import WorkflowHandle, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from missionweave.coordinator import coordinator_worker
from missionweave.protocol.temporal_contract import AuthorizeWorkInput, mission_workflow_id
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import contract, mission_stack
from tests.support.temporal_env import new_task_queue
from tests.support.waits import WAIT_S, until

NONE = ("demo.none@1.0",)  # no agent: nothing runs, the Mission just waits
ADMITTED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED


async def _admitted(env: WorkflowEnvironment, handle: WorkflowHandle, update_id: str) -> bool:
    """Whether the server has admitted update ``update_id`` of ``handle``'s workflow (it waits
    there for a workflow task; the SDK's ``start_update`` cannot wait for this stage, so ask
    the service: ``NOT_FOUND`` until the request has arrived)."""
    ref = UpdateRef(
        workflow_execution=WorkflowExecution(workflow_id=handle.id), update_id=update_id
    )
    req = PollWorkflowExecutionUpdateRequest(
        namespace=env.client.namespace,
        update_ref=ref,
        identity="test",
        wait_policy=WaitPolicy(lifecycle_stage=ADMITTED),
    )
    try:
        poll = env.client.workflow_service.poll_workflow_execution_update
        answer = await poll(req, timeout=timedelta(seconds=5))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return int(answer.stage) >= ADMITTED


async def _two_updates_in_first_task(env, ms, mid, u1, u2):
    tq = new_task_queue()
    spec = ms.spec(mid, [{"work_item_id": f"{mid}-a", "contract": contract(NONE).wire()}])
    handle = await env.client.start_workflow(
        MissionWorkflow.run, args=[spec, None], id=mission_workflow_id(mid), task_queue=tq
    )
    ups = [
        asyncio.create_task(
            handle.start_update(
                MissionWorkflow.authorize_work,
                u,
                id=f"u{n}",
                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            )
        )
        for n, u in enumerate((u1, u2))
    ]
    # both admitted before any worker polls: the first workflow task carries both
    for uid in ("u0", "u1"):
        await until(f"update {uid} admitted", lambda uid=uid: _admitted(env, handle, uid))
    async with coordinator_worker(
        env.client,
        ms.stack.client,
        ms.stack.coordinator,
        task_queue=tq,
        artifact_store=ms.artifacts,
    ):
        outs = []
        for t in ups:
            try:
                h = await asyncio.wait_for(t, WAIT_S)
                outs.append(await asyncio.wait_for(h.result(), WAIT_S))
            except Exception as exc:
                outs.append(exc)
        # the assertion is that nothing happens within: a workflow task failing on the second
        # update would be retried and recorded meanwhile (there is no event to wait for)
        await asyncio.sleep(2)
        hist = await handle.fetch_history()
        failed = [
            e.workflow_task_failed_event_attributes.failure.message
            for e in hist.events
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        ]
        await handle.terminate("attack test done")
    return outs, failed


async def test_the_same_new_id_in_two_updates_is_refused_once__MW_10_4_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        mk = lambda: AuthorizeWorkInput.model_validate(  # noqa: E731
            {"items": [{"work_item_id": "dup-n1", "contract": contract(NONE).wire()}]}
        )
        outs, failed = await _two_updates_in_first_task(dev_env, ms, "dupmission", mk(), mk())
    assert not failed, f"workflow task failures: {failed[:1]}"
    refused = [o for o in outs if isinstance(o, Exception)]
    assert len(refused) == 1 and "duplicate" in str(refused[0].__cause__ or refused[0]), outs


async def test_one_contract_name_for_two_contracts_is_refused_once(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        u1 = AuthorizeWorkInput.model_validate(
            {
                "contracts": {"k": contract(NONE, objective="one").wire()},
                "items": [{"work_item_id": "cn-n1", "contract_ref": "k"}],
            }
        )
        u2 = AuthorizeWorkInput.model_validate(
            {
                "contracts": {"k": contract(NONE, objective="two").wire()},
                "items": [{"work_item_id": "cn-n2", "contract_ref": "k"}],
            }
        )
        outs, failed = await _two_updates_in_first_task(dev_env, ms, "cnmission", u1, u2)
    assert not failed, f"workflow task failures: {failed[:1]}"
    refused = [o for o in outs if isinstance(o, Exception)]
    assert len(refused) == 1, outs  # the other's item would run under the first's contract
    assert "another contract" in str(refused[0].__cause__ or refused[0]), refused
