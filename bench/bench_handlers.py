"""The handler of the overhead benchmark's agents when they run as their own processes
(``missionweave worker --handlers bench_handlers``, with ``bench/`` on ``PYTHONPATH``): the same
trivial body as the in-process agents, sleeping ``MISSIONWEAVE_BENCH_WORK_MS`` milliseconds."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from missionweave.worker import Submission, WorkContext, handler

WORK_S = int(os.environ.get("MISSIONWEAVE_BENCH_WORK_MS", "0")) / 1000


@handler("bench.step", version="1.0")
async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    """``{"result": {"item": <id>}}`` after ``WORK_S`` seconds of (simulated) work."""
    if WORK_S:
        await asyncio.sleep(WORK_S)
    return Submission(
        outputs={"result": {"item": ctx.work_item_id}},
        evidence=[ctx.evidence("done", method="bench")],
    )
