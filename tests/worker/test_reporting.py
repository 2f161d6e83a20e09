"""The runtime reports by itself (MW-11.4-b): each durable checkpoint with the whole structured
state and the current estimate, and a revised estimate once the last one has run out — the
``execute_work_item`` activity in ``ActivityEnvironment`` against a real Authority on
loopback."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from missionweave.authority.client import AuthorityClient
from missionweave.protocol.temporal_contract import OutcomeKind
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.worker._execute import WorkItemExecutor
from tests.support.executor_harness import VerifyInput, grant
from tests.support.serving import LiveServer
from tests.support.world import World

TIMEOUTS = {"start_deadline_ms": 60_000, "lease_ms": 30_000, "heartbeat_ms": 300}


async def test_runtime_reports_checkpoints_and_estimate_changes_by_itself__MW_11_4_b(
    world: World, live: LiveServer
) -> None:
    """The handler declares ``estimate_ms=200``, reports once, checkpoints once and then runs
    well past its estimate without reporting again: the checkpoint's report carries the last
    milestones and a remaining estimate, and the runtime reports revised estimates itself,
    each under the last reported phase."""

    async def slow(ctx: WorkContext, inp: VerifyInput) -> Submission:
        await ctx.report("listing", milestones=["opened"], next_checkpoint="after listing")
        await ctx.save({"listed": len(inp.files)}, phase="listed")
        await asyncio.sleep(2.5)  # far beyond the declared estimate, silent
        return Submission(
            outputs={"report": {"files": len(inp.files)}},
            evidence=[ctx.evidence(c, method="test") for c in ("hashes", "schema")],
        )

    registry = HandlerRegistry()
    registry.handler("dist.verify", version="1.0", estimate_ms=200)(slow)
    worker = world.workers[0]
    work = grant(world, "a", worker, timeouts=TIMEOUTS)
    async with AuthorityClient(live.url, signing_key=worker.key) as client:
        executor = WorkItemExecutor(worker, client, registry)
        out = await ActivityEnvironment().run(executor.execute_work_item, work)
    assert out.kind is OutcomeKind.SUBMITTED
    reports = [
        e.body
        for e in world.authority.events(world.group)
        if e.type == "work.progress_reported" and e.work_item_id == "a"
    ]
    first, checkpoint, *by_itself = reports
    assert first["report"]["phase"] == "listing"
    assert checkpoint["checkpoint"] == {"listed": 2}
    assert checkpoint["report"]["phase"] == "listed"
    assert checkpoint["report"]["milestones_completed"] == ["opened"]
    assert checkpoint["report"]["next_checkpoint"] == "after listing"
    assert checkpoint["report"]["estimate_remaining_ms"] is not None
    assert by_itself, "the runtime reported the overrun estimate itself"
    for body in by_itself:
        assert "checkpoint" not in body
        assert body["report"]["phase"] == "listed"
        assert body["report"]["estimate_remaining_ms"] > 0
    estimates = [b["report"]["estimate_remaining_ms"] for b in by_itself]
    assert estimates == sorted(estimates)  # each revision pushes the end further out
