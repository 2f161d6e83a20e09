"""An accepted offer cancels the other candidates' offers of the same WorkItem only (MW-10.3-c).
WorkItem ids may hold ``@``: the workflow once keyed executions ``<item>@<agent>``, and the
acceptance of item ``x`` cancelled item ``x@y``'s execution at another agent."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from missionweave.worker import HandlerRegistry, Submission, WorkContext
from tests.support.mission_harness import contract, mission_stack, step_registry
from tests.support.waits import WAIT_S, until


async def test_an_acceptance_cancels_only_its_own_items_other_offers__MW_10_3_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    seen: list[str] = []
    reg = HandlerRegistry()

    @reg.handler("demo.hold", version="1.0")
    async def hold(ctx: WorkContext, input: dict[str, object]) -> Submission:
        started.set()
        try:
            await asyncio.wait_for(release.wait(), WAIT_S)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return Submission(
            outputs={"result": {"item": ctx.work_item_id}},
            evidence=[ctx.evidence("done", method="demo")],
        )

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("zed", reg, capabilities=["demo.hold@1.0"])
        await ms.agent("ada", step_registry())
        spec = ms.spec(
            "keys",
            [
                {"work_item_id": "x@y", "contract": contract(("demo.hold@1.0",)).wire()},
                {"work_item_id": "x", "contract": contract().wire(), "dependencies": []},
            ],
        )
        handle = await ms.start(spec)
        await asyncio.wait_for(started.wait(), WAIT_S)
        await until(
            "x verified",
            lambda: any(
                e.type == "work.result_accepted" and e.work_item_id == "x"
                for e in ms.stack.authority.events(ms.group)
            ),
        )
        await asyncio.sleep(2)
        release.set()
        try:
            await asyncio.wait_for(handle.result(), WAIT_S)
        except Exception as exc:
            seen.append(f"result: {type(exc).__name__}")
        finally:
            from temporalio.api.enums.v1 import EventType

            h = await handle.fetch_history()
            seen.extend(
                f"cancel_requested:{e.activity_task_cancel_requested_event_attributes.scheduled_event_id}"
                for e in h.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED
            )
            with contextlib.suppress(RPCError):  # already closed: nothing to terminate
                await handle.terminate("done")
        log = [
            (e.type, e.work_item_id)
            for e in ms.stack.authority.events(ms.group)
            if e.work_item_id == "x@y"
        ]
    assert not seen, log
