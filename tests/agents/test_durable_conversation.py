"""The agent's conversation survives its process: checkpointed after each model response
(an Artifact whose hash the checkpoint holds), so a new owner — after a crash, or a pause —
makes only the model requests that remain; and the model's private reasoning never leaves
the process (MW-13.2-d)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter

from missionweave.agents import agent_handler
from missionweave.artifacts import FilesystemStore
from missionweave.protocol.temporal_contract import OutcomeKind
from missionweave.worker import WorkContext
from tests.agents.harness import agent_grant, execute, restart
from tests.agents.resume_agent import MARKER, QUERIES, StepModel, research_agent
from tests.support.cli_processes import Process
from tests.support.serving import LiveServer
from tests.support.world import World


async def test_a_killed_agent_is_resumed_without_repeating_model_requests__MW_11_5_a(
    live: LiveServer, world: World, tmp_path: Path, processes: list[Process]
) -> None:
    first, second = world.workers
    store = tmp_path / "artifacts"
    work = agent_grant(world, "a", first, {})
    key = tmp_path / "worker-0.pem"
    first.key.to_file(key)
    spec = {
        "url": live.url,
        "agent_id": first.agent_id,
        "key": str(key),
        "session_epoch": first.session_epoch,
        "membership_epochs": first.membership_epochs,
        "work": work.model_dump_json(),
        "store": str(store),
        "kill_at": 2,  # asked for the third of four steps, the process dies
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = [sys.executable, "-m", "tests.agents.kill_runner", str(tmp_path / "spec.json")]
    proc = Process(args, tmp_path / "runner.log")
    processes.append(proc)
    assert await asyncio.to_thread(proc.proc.wait, 90) == -9  # killed, nothing reported
    saved = [
        e for e in world.authority.all_events(world.group) if e.type == "work.progress_reported"
    ]
    assert len(saved) == 2  # one checkpoint per model response
    assert world.item("a")["state"] == "active"  # its lease still stands

    # The Authority heard nothing while the process ran and died: that silence is credited to
    # the live lease (two whole leases from now, MW-11.5-c) at its next write, this one; then
    # the lease expires on the Authority's clock and the WorkItem is offered again.
    world.authorize("after-the-kill")
    world.clock.advance(3 * 30_000 + 1)
    again = agent_grant(world, "a", second, {})
    assert again.lease is not None and again.lease.ownership_epoch == 2
    assert again.checkpoint is not None and again.checkpoint["agent"]["requests"] == 2
    model, ran = StepModel(), []
    fn = agent_handler(research_agent(model, ran), prompt="research")
    out = await execute(live.url, second, again, fn)
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert model.requests == [2, 3]  # only the two remaining requests
    # "beta", whose call the dead owner had not finished, then "gamma"; never "alpha" again
    assert ran == ["beta", "gamma"]
    body = json.loads(FilesystemStore(store).for_group(world.group).get(out.outputs["report"]))
    assert body == {"summary": "three searches", "queries": QUERIES}


async def test_a_pause_at_a_model_request_boundary_resumes_there__MW_11_3_g(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    worker = world.workers[0]
    store = tmp_path / "artifacts"
    model, ran = StepModel(), []
    inner = agent_handler(research_agent(model, ran), prompt="research")
    contexts: list[WorkContext] = []

    def slot_wanted(n: int) -> None:
        if n == 0:  # the scheduler wants the slot while the first request is answered
            contexts[0].request_pause("slot needed")

    model.on_request = slot_wanted

    async def pausing(ctx: WorkContext, input: dict[str, Any]) -> Any:
        contexts.append(ctx)
        return await inner(ctx, input)

    work = agent_grant(world, "a", worker, {})
    out = await execute(live.url, worker, work, pausing)
    assert out.kind is OutcomeKind.PAUSED, out.error
    assert out.checkpoint is not None and out.checkpoint["agent"]["requests"] == 1
    conversation = (
        FilesystemStore(store).for_group(world.group).get(out.checkpoint["agent"]["history"])
    )
    messages = ModelMessagesTypeAdapter.validate_json(conversation)
    assert messages[-1].kind == "request"  # the tool's result, ready for the next request
    resumed = restart(world, work, worker)
    assert resumed.checkpoint == out.checkpoint
    out = await execute(live.url, worker, resumed, inner)
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert model.requests == [0, 1, 2, 3] and ran == QUERIES  # nothing asked or run twice


async def test_private_reasoning_never_leaves_the_process__MW_13_2_d(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    """The model thinks a unique marker at every step; the Authority's log, its database
    files, every Artifact (conversations and output) and every manifest are searched for it."""
    worker = world.workers[0]
    model = StepModel()
    agent = research_agent(model, [])
    work = agent_grant(world, "a", worker, {})
    out = await execute(live.url, worker, work, agent_handler(agent, prompt="go"))
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert model.saw_own_thinking  # the marker was in the conversation, inside the process
    for e in world.authority.all_events(world.group):
        assert MARKER not in e.model_dump_json()
    assert len(out.artifacts) == 1  # the output; the conversation checkpoints are not submitted
    published = [
        e for e in world.authority.all_events(world.group) if e.type == "artifact.published"
    ]
    assert len(published) == 5  # four conversation checkpoints and the output
    files = _every_file(tmp_path)
    assert {Path(f).name for f in files} >= set(out.artifacts)  # every Artifact, by its hash
    for name, body in files.items():  # the database (and its WAL), Artifacts, manifests, all
        assert MARKER.encode() not in body, name


def _every_file(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, by path: its bytes."""
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}
