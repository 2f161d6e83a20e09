"""Handlers for agents run as their own processes in the fault tests
(``missionweave worker --handlers tests.support.fault_handlers``)."""

from __future__ import annotations

import asyncio
from typing import Any

from missionweave.worker import Submission, WorkContext, handler


@handler("fault.sleep", version="1.0", estimate_ms=1_000)
async def sleep(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    """Work ``input["sleep_ms"]`` milliseconds (a plain sleep: a process frozen meanwhile finds
    it over when it resumes), then submit ``{"result": {"by": <agent>}}``. It reports progress
    first: the test freezes the process only once the handler is at work."""
    await ctx.report("sleeping")
    await asyncio.sleep(int(input.get("sleep_ms", 0)) / 1000)
    return Submission(
        outputs={"result": {"by": ctx.agent_id}},
        evidence=[ctx.evidence("done", method="fault-test")],
    )
