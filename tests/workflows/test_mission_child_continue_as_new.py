"""A parent Mission whose child Mission runs still continues as new when Temporal suggests it:
the child's start leaves the workflow's in-flight tasks once it is started (it once stayed there
for good, and the parent's history grew until Temporal's limit ended it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from missionweave.protocol.temporal_contract import ChildOutcome, mission_workflow_id
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import contract, mission_stack, step_registry
from tests.support.temporal_env import SMALL_HISTORY_EVENTS
from tests.support.waits import until


@pytest.mark.parametrize("with_child", [False, True])
async def test_a_parent_continues_as_new_while_its_child_runs__spec_10_2(
    dev_env_small_history: WorkflowEnvironment, tmp_path: Path, with_child: bool
) -> None:
    env = dev_env_small_history
    mid = f"cp-{int(with_child)}"
    async with mission_stack(env, tmp_path) as ms:
        await ms.agent("ada", step_registry())
        items = [{"work_item_id": f"{mid}-s", "contract": contract().wire()}]
        if with_child:
            items.append(
                {
                    "work_item_id": f"{mid}-p",
                    "contract": contract().wire(),
                    "child_mission": {
                        "group_id": ms.group,
                        "mission_id": f"{mid}-child",
                        "items": [
                            {
                                "work_item_id": f"{mid}-c1",
                                "contract": contract(("demo.none@1.0",)).wire(),
                            }
                        ],
                    },
                }
            )
        else:  # control: an item nobody can take keeps the Mission open
            items.append(
                {"work_item_id": f"{mid}-p", "contract": contract(("demo.none@1.0",)).wire()}
            )
        handle = await ms.start(ms.spec(mid, items))
        await until(
            "s verified",
            lambda: any(
                e.type == "work.result_accepted" and e.work_item_id == f"{mid}-s"
                for e in ms.stack.authority.events(ms.group)
            ),
            30,
        )
        latest = env.client.get_workflow_handle(handle.id)
        continued = False
        for _ in range(60):
            h = await latest.fetch_history()
            if h.events[0].workflow_execution_started_event_attributes.continued_execution_run_id:
                continued = True
                break
            await handle.signal(
                MissionWorkflow.child_finished,
                ChildOutcome(work_item_id="none", child_mission_id="none", approved=False),
            )
            await asyncio.sleep(0.1)
        n = len((await latest.fetch_history()).events)
        await latest.terminate("test done")
        if with_child:
            await env.client.get_workflow_handle(mission_workflow_id(f"{mid}-child")).terminate(
                "done"
            )
    assert continued, (
        f"never continued as new; current run has {n} events (suggested at {SMALL_HISTORY_EVENTS})"
    )
