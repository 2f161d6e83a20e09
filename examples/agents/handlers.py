"""Handlers of the example agents (``missionweave worker --handlers examples.agents.handlers``).

Two small, deterministic capabilities over a text given in the WorkItem's input:

* ``text.stats@1.0`` — lines, words and characters of ``input.text`` (deliverable ``stats``);
* ``text.checksum@1.0`` — the SHA-256 of ``input.text``, checked against ``input.expected_sha256``
  when given (deliverable ``checksum``); a mismatch fails the WorkItem for good.

Each returns one Evidence per acceptance criterion of its contract, as the review requires.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel

from missionweave.worker import PermanentFailure, Submission, WorkContext, handler


class TextInput(BaseModel):
    text: str
    expected_sha256: str | None = None


@handler("text.stats", version="1.0", estimate_ms=1_000)
async def stats(ctx: WorkContext, input: TextInput) -> Submission:
    """Count lines, words and characters."""
    await ctx.report("counting")
    counts = {
        "lines": len(input.text.splitlines()),
        "words": len(input.text.split()),
        "characters": len(input.text),
    }
    summary = f"{counts['lines']} lines, {counts['words']} words"
    return Submission(
        outputs={"stats": counts},
        evidence=[
            ctx.evidence(c.id, method="str.split", summary=summary)
            for c in ctx.contract.acceptance_criteria
        ],
    )


@handler("text.checksum", version="1.0", estimate_ms=1_000)
async def checksum(ctx: WorkContext, input: TextInput) -> Submission:
    """SHA-256 of the text; fails for good when it is not the expected one."""
    data = input.text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    if input.expected_sha256 is not None and input.expected_sha256 != digest:
        raise PermanentFailure(f"sha256 {digest} is not the expected {input.expected_sha256}")
    return Submission(
        outputs={"checksum": {"sha256": digest, "bytes": len(data)}},
        evidence=[
            ctx.evidence(c.id, method="hashlib.sha256", summary=digest)
            for c in ctx.contract.acceptance_criteria
        ],
    )
