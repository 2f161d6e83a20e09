"""A handler with one external effect, for the bounded-offline tests
(``missionweave worker --handlers tests.support.offline_handlers`` or :func:`registry`).

``offline.ledger`` works ``steps`` steps of ``step_ms`` milliseconds — reversible computation,
each step metered (``tokens``) and checkpointed with ``ctx.save`` — then takes its one external
effect: it appends a line to the ledger file named by ``$MW_TEST_LEDGER``, keyed by
``ctx.effect("ledger")`` (the WorkItem's idempotency key under its ownership epoch). A resumed
execution starts from its checkpoint's step.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from missionweave.worker import HandlerRegistry, Submission, WorkContext, handler, load_handlers

CAPABILITY = "offline.ledger@1.0"
LEDGER_ENV = "MW_TEST_LEDGER"
#: The bounded-offline tests' contract timeouts: a 10 s lease, heartbeats every second.
TIMEOUTS = {"start_deadline_ms": 60_000, "lease_ms": 10_000, "heartbeat_ms": 1_000}


@handler("offline.ledger", version="1.0", estimate_ms=1_000)
async def ledger(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    start = int((ctx.checkpoint or {}).get("step", 0))
    for i in range(start, int(input.get("steps", 6))):
        await asyncio.sleep(int(input.get("step_ms", 500)) / 1000)
        ctx.usage.add(tokens=10)
        await ctx.save({"step": i + 1}, phase=f"step {i + 1}")
    key = await ctx.effect("ledger")  # irreversible: waits for a lease the Authority confirms
    line = {
        "work_item_id": ctx.work_item_id,
        "key": key,
        "resumed_from": start,
        "ownership_epoch": ctx.ownership_epoch,
        "agent_id": ctx.agent_id,
    }
    await asyncio.to_thread(_append, Path(os.environ[LEDGER_ENV]), line)
    return Submission(
        outputs={"result": {"item": ctx.work_item_id}},
        evidence=[ctx.evidence("done", method="ledger")],
    )


def _append(path: Path, line: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")


def registry() -> HandlerRegistry:
    """This module's handlers, for an in-process agent runtime."""
    return load_handlers(__name__)


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """The ledger's lines."""
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


#: Set by a test once it has cut the agent off from the Authority (in-process agents only; a
#: test replaces it with an Event of its own loop).
OUTAGE = asyncio.Event()


@handler("offline.ended", version="1.0", estimate_ms=1_000)
async def ended_while_cut_off(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    """Checkpoints once, waits for :data:`OUTAGE`, checkpoints twice more (buffered: the
    Authority is unreachable), then fences for an external effect — which waits for the
    Authority until the lease's grace deadline and ends the execution with ``LeaseLost``."""
    await ctx.save({"step": 1}, phase="online")
    await OUTAGE.wait()
    await ctx.save({"step": 2}, phase="offline")
    await ctx.save({"step": 3}, phase="offline")
    await ctx.guard()
    raise AssertionError("the Authority was unreachable past the grace deadline")
