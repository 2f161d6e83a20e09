"""The Mission workflow end to end on the real Temporal dev server, with real agent runtimes and
a real Authority."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.worker import HandlerRegistry, Submission, WorkContext

from . import temporal_env
from .mission_harness import contract, mission_stack

pytestmark = pytest.mark.asyncio(loop_scope="session")
dev_env = temporal_env.dev_env


def _registry() -> HandlerRegistry:
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, object]) -> Submission:
        await ctx.guard()
        return Submission(
            outputs={"result": {"item": ctx.work_item_id}},
            evidence=[ctx.evidence("done", method="demo")],
        )

    return reg


async def test_small_dag_completes_and_chain_verifies__MW_10_4_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", _registry())
        await ms.agent("bob", _registry())
        c = contract().wire()
        spec = ms.spec("dag1", [
            {"work_item_id": "a", "contract": c},
            {"work_item_id": "b", "contract": c, "dependencies": ["a"]},
            {"work_item_id": "c", "contract": c, "dependencies": ["a"]},
            {"work_item_id": "d", "contract": c, "dependencies": ["b", "c"]},
        ])  # fmt: skip
        handle = await ms.start(spec)
        result = await handle.result()
        assert result.status == "completed"
        assert {i.work_item_id: i.state.value for i in result.items} == {
            "a": "verified",
            "b": "verified",
            "c": "verified",
            "d": "verified",
        }
        verify_log(ms.stack.authority.conn, ms.group, ms.stack.authority.public_key)
