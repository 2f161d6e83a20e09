"""A Pydantic AI agent run as a WorkItem's handler, governed by its contract: the tools the
model may see and call, each call's idempotency key, the structured output as the
Submission's Artifact, Evidence for every criterion, and the fence of irreversible tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart

from missionweave.agents import AgentDeps, agent_handler
from missionweave.artifacts import FilesystemStore
from missionweave.protocol import idempotency_key
from missionweave.protocol.temporal_contract import OutcomeKind
from tests.agents.harness import Script, agent_grant, execute
from tests.support.serving import LiveServer
from tests.support.world import World


class Notes(BaseModel):
    summary: str
    sources: list[str]


def _final(summary: str = "two facts") -> Any:
    def step(messages: Any, info: Any) -> ModelResponse:
        name = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(name, {"summary": summary, "sources": ["a"]})])

    return step


def _calls(*calls: tuple[str, dict[str, Any]]) -> Any:
    return lambda messages, info: ModelResponse(parts=[ToolCallPart(n, a) for n, a in calls])


def _agent(script: Script, ran: list[tuple[str, str]]) -> Agent[AgentDeps[None], Notes]:
    agent: Agent[AgentDeps[None], Notes] = Agent(
        script.model(), deps_type=AgentDeps, output_type=Notes
    )

    @agent.tool
    async def search(ctx: RunContext[AgentDeps[None]], q: str) -> str:
        ran.append(("search", ctx.deps.idempotency_key))
        return f"results for {q}"

    @agent.tool
    async def wipe(ctx: RunContext[AgentDeps[None]]) -> str:
        ran.append(("wipe", ctx.deps.idempotency_key))
        return "wiped"

    return agent


async def test_disallowed_tool_never_runs_and_is_evidenced__MW_10_1_a(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    script = Script([_calls(("wipe", {})), _calls(("search", {"q": "x"})), _final()])
    ran: list[tuple[str, str]] = []
    worker = world.workers[0]
    work = agent_grant(world, "a", worker, {"topic": "x"}, allowed_tools=["search"])
    fn = agent_handler(_agent(script, ran), prompt="research x")
    out = await execute(live.url, worker, work, fn)
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert [name for name, _ in ran] == ["search"]  # wipe never ran
    assert all(tools == ["search"] for tools in script.tools)  # never shown
    refusal = [
        p
        for p in script.seen[1][-1].parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "wipe"
    ]
    assert refusal and "Unknown tool name: 'wipe'" in str(refusal[0].content)  # a retry prompt
    by_criterion = {e.criterion: e for e in out.evidence}
    assert set(by_criterion) == {"hashes", "schema", "tool_policy"}
    assert "wipe (request 1)" in by_criterion["tool_policy"].summary


async def test_structured_output_is_the_submissions_artifact__MW_13_2_c(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    script = Script([_calls(("search", {"q": "x"})), _final("the answer")])
    worker = world.workers[0]
    work = agent_grant(world, "a", worker, {})
    fn = agent_handler(_agent(script, []), prompt="research x")
    out = await execute(live.url, worker, work, fn)
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    ref = out.outputs["report"]  # the contract's deliverable
    assert ref in out.artifacts
    body = FilesystemStore(tmp_path / "artifacts").for_group(world.group).get(ref)
    assert Notes.model_validate_json(body).summary == "the answer"
    ev = {e.criterion: e for e in out.evidence}["hashes"]
    assert ev.artifacts == [ref] and "output validated as Notes" in ev.summary
    assert "search#0=" in ev.summary  # the tool result's hash


async def test_output_type_from_the_deliverables_schema(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    }

    def step(messages: Any, info: Any) -> ModelResponse:
        assert info.output_tools[0].parameters_json_schema["required"] == ["title"]
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "t"})])

    script = Script([step])
    worker = world.workers[0]
    deliverables = [{"name": "report", "schema_id": "report@1"}]
    work = agent_grant(world, "a", worker, {}, deliverables=deliverables)
    agent = Agent(script.model(), deps_type=AgentDeps)
    fn = agent_handler(agent, prompt="write", schemas={"report@1": schema})
    out = await execute(live.url, worker, work, fn)
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    body = FilesystemStore(tmp_path / "artifacts").for_group(world.group).get(out.outputs["report"])
    assert json.loads(body) == {"title": "t"}


async def test_two_calls_of_one_tool_get_two_keys__MW_16_f(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    two = _calls(("search", {"q": "a"}), ("search", {"q": "b"}))
    script = Script([two, _calls(("search", {"q": "c"})), _final()])
    ran: list[tuple[str, str]] = []
    worker = world.workers[0]
    work = agent_grant(world, "a", worker, {})
    out = await execute(live.url, worker, work, agent_handler(_agent(script, ran), prompt="go"))
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    keys = [k for _, k in ran]
    assert len(set(keys)) == 3
    expected = {
        idempotency_key(work.mission_id, "a", work.lease.ownership_epoch, f"tool:search:{i}")
        for i in range(3)
    }
    assert set(keys) == expected


def _add_revoke(agent: Agent[AgentDeps[None], Notes], world: World, ran: list[Any]) -> None:
    worker = world.workers[0]

    @agent.tool(sequential=True)  # runs alone, before the other calls of its response
    async def revoke(ctx: RunContext[AgentDeps[None]]) -> str:
        ran.append(("revoke", ctx.deps.idempotency_key))
        cmd = worker.command("session.open", None, {}, issued_at_ms=world.clock.now)
        assert world.authority.submit(cmd).accepted  # revokes the worker's leases
        worker.session_epoch += 1
        return "revoked"


async def test_irreversible_tool_waits_for_a_confirmed_lease__MW_11_5_d(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    """The model asks for ``revoke`` (a reversible tool run alone first, which replaces the
    agent's session: the Authority revokes its lease) and ``wipe``. Marked irreversible,
    ``wipe`` asks the Authority before it runs, and never runs; left reversible (the negative
    control) it runs without a round trip."""
    worker = world.workers[0]
    for irreversible, expect in ((["wipe"], ["revoke"]), ([], ["revoke", "wipe"])):
        ran: list[tuple[str, str]] = []
        script = Script([_calls(("revoke", {}), ("wipe", {})), _final()])
        agent = _agent(script, ran)
        _add_revoke(agent, world, ran)

        wid = f"w{len(expect)}"
        work = agent_grant(world, wid, worker, {}, allowed_tools=["wipe", "revoke"])
        fn = agent_handler(agent, prompt="go", irreversible_tools=irreversible)
        out = await execute(live.url, worker, work, fn)
        assert [n for n, _ in ran] == expect
        assert out.kind is OutcomeKind.LEASE_LOST
