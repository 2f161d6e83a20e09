"""Handlers used by the worker tests (imported by name, as ``missionweave worker --handlers``
does)."""

from __future__ import annotations

from pydantic import BaseModel

from missionweave.worker import Submission, WorkContext, handler


class VerifyInput(BaseModel):
    files: list[str]


@handler("dist.verify", version="1.2", estimate_ms=1_000)
async def verify(ctx: WorkContext, input: VerifyInput) -> Submission:
    """Checks nothing for real: one Evidence per acceptance criterion."""
    await ctx.report("verifying", milestones=["listed"])
    await ctx.guard()
    return Submission(
        outputs={"report": {"files": len(input.files)}},  # the deliverable, inline
        evidence=[ctx.evidence(c.id, method="test") for c in ctx.contract.acceptance_criteria],
    )


@handler("dist.summarize", version="2.0")
async def summarize(ctx: WorkContext, input: dict[str, object]) -> Submission:
    return Submission(outputs={"keys": sorted(input)})
