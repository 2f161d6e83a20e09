"""A handler that runs until the test opens its gate (imported by name, as ``missionweave worker
--handlers tests.support.gate_handlers`` does): ``test.gate@1.0`` logs through ``ctx.logger``, then
waits for the file named by ``input["gate"]`` to exist and submits ``{"result": <its text>}``
with one Evidence per acceptance criterion."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from missionweave.worker import Submission, WorkContext, handler


def _wait_for(path: Path) -> str:
    """The text of ``path`` once it exists (polled every 50 ms, in a thread)."""
    while not path.exists():
        time.sleep(0.05)
    return path.read_text(encoding="utf-8")


@handler("test.gate", version="1.0")
async def gate(ctx: WorkContext, input: dict[str, str]) -> Submission:
    path = Path(input["gate"])
    ctx.logger.info("waiting at the gate %s", path.name)
    text = await asyncio.to_thread(_wait_for, path)
    return Submission(
        outputs={"result": text},
        evidence=[
            ctx.evidence(c.id, method="the gate's file", summary=text)
            for c in ctx.contract.acceptance_criteria
        ],
    )
