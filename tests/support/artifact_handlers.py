"""Handlers of an agent run as a process (``missionweave worker --handlers
tests.support.artifact_handlers``) that publishes and fetches Artifacts through the Authority."""

from __future__ import annotations

import json
from typing import Any

from missionweave.worker import Submission, WorkContext, handler

#: What ``art.publish`` publishes.
CONTENT = b"rows,published by an agent process\n1,2\n"


@handler("art.publish", version="1.0")
async def publish(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    ref = await ctx.publish(CONTENT, "text/csv", classification="confidential")
    return Submission(
        outputs={"result": {"hash": ref.hash}},
        evidence=[
            ctx.evidence(c.id, method="test", artifacts=[ref.hash])
            for c in ctx.contract.acceptance_criteria
        ],
    )


@handler("art.derive", version="1.0")
async def derive(ctx: WorkContext, input: dict[str, Any]) -> Submission:
    (raw,) = [h for hashes in ctx.dependency_artifacts.values() for h in hashes]
    rows = len((await ctx.fetch(raw)).decode().splitlines())
    ref = await ctx.publish(json.dumps({"rows": rows}).encode(), "application/json", sources=[raw])
    return Submission(
        outputs={"result": {"rows": rows}},
        evidence=[
            ctx.evidence(c.id, method="test", artifacts=[ref.hash])
            for c in ctx.contract.acceptance_criteria
        ],
    )
