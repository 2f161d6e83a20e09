"""The fault suite's work handler, run by ``missionweave worker --handlers tests.faults.handlers``.

``fault.effect@1.0`` performs one *external effect* per WorkItem: it appends one line to the
ledger file named by ``$MW_FAULT_LEDGER`` and fsyncs it, keyed by
``ctx.idempotency_key("effect")`` (MW-16-f: the same key in every retry and resume of one
ownership epoch, a new one after a reassignment). It writes every time it runs — it does not
skip a key already there — so the ledger counts how often the effect was *performed*, which is
what the checker (:mod:`tests.faults.checker`) judges.

A line is ``<key> <work_item_id> <ownership_epoch> <agent_id> <pid>``, space separated.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from missionweave.worker import Submission, WorkContext, handler

#: The environment variable naming the ledger file.
LEDGER_ENV = "MW_FAULT_LEDGER"


def append_effect(path: str, line: str) -> None:
    """Append ``line`` and a newline to ``path`` and fsync it (one ``write``: the lines of
    concurrent writers never interleave)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@handler("fault.effect", version="1.0", estimate_ms=500)
async def effect(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    """Work ``input["before_ms"]``, perform the effect (one fsync'd ledger line), work
    ``input["after_ms"]`` more, then submit ``{"result": {"key": <idempotency key>}}``."""
    await ctx.report("working")
    await asyncio.sleep(int(input.get("before_ms", 0)) / 1000)
    key = ctx.idempotency_key("effect")
    line = f"{key} {ctx.work_item_id} {ctx.ownership_epoch} {ctx.agent_id} {os.getpid()}"
    await asyncio.to_thread(append_effect, os.environ[LEDGER_ENV], line)
    await asyncio.sleep(int(input.get("after_ms", 0)) / 1000)
    return Submission(
        outputs={"result": {"key": key}}, evidence=[ctx.evidence("done", method="fault-ledger")]
    )
