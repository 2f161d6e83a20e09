"""The contract's budgets govern the agent: checked before the next model request or tool
call, every response charged through the Authority before the next request goes out; and the
Authority refuses a charge past the budget even when the handler skips its own check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.usage import RequestUsage

from missionweave.agents import AgentDeps, agent_handler
from missionweave.protocol.temporal_contract import OutcomeKind
from tests.agents.harness import Script, agent_grant, execute
from tests.support.serving import LiveServer
from tests.support.world import World

#: Every scripted response reports this usage: 150 tokens a request.
USAGE = RequestUsage(input_tokens=100, output_tokens=50)


def _search(messages: Any, info: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("search", {"q": "x"})], usage=USAGE)


def _agent(script: Script, ran: list[str]) -> Agent[AgentDeps[None], str]:
    agent: Agent[AgentDeps[None], str] = Agent(script.model(), deps_type=AgentDeps)

    @agent.tool
    async def search(ctx: RunContext[AgentDeps[None]], q: str) -> str:
        ran.append(q)
        return "found"

    return agent


def _charged(world: World, wid: str) -> dict[str, int]:
    usage: dict[str, int] = json.loads(world.item(wid)["usage"])
    return usage


async def test_token_budget_stops_before_the_request_that_would_exceed_it__MW_11_4_d(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    """400 tokens, 150 a request: the third would pass the budget; it is never sent."""
    script = Script([_search] * 5)
    worker = world.workers[0]
    budget = {"tokens": 400, "tool_calls": 100, "wall_clock_ms": 600_000}
    work = agent_grant(world, "a", worker, {}, budget=budget)
    out = await execute(live.url, worker, work, agent_handler(_agent(script, []), prompt="go"))
    assert script.requests == 2
    assert out.kind is OutcomeKind.FAILED and out.retryable is False
    assert out.error is not None and "budget_exceeded: tokens: 300 spent of 400" in out.error
    assert out.evidence[0].result == "fail" and "budget_exceeded" in out.evidence[0].summary
    assert _charged(world, "a")["tokens"] == 300  # both responses charged, nothing more
    assert world.item("a")["state"] == "failed"


async def test_tool_call_budget_stops_before_the_call__MW_11_4_d(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    script = Script([_search] * 5)
    ran: list[str] = []
    worker = world.workers[0]
    budget = {"tool_calls": 2, "wall_clock_ms": 600_000}
    work = agent_grant(world, "a", worker, {}, budget=budget)
    out = await execute(live.url, worker, work, agent_handler(_agent(script, ran), prompt="go"))
    assert ran == ["x", "x"]  # the third call never ran
    assert out.kind is OutcomeKind.FAILED and out.retryable is False
    assert out.error is not None and "budget_exceeded: tool_calls" in out.error
    assert _charged(world, "a")["tool_calls"] == 2


async def test_the_authority_refuses_a_charge_past_the_budget_without_the_local_check__MW_11_5_j(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    """The handler skips its own check: the third response's charge (450 of 400 tokens) is
    refused by the Authority, which records nothing; no fourth request goes out, and the
    runtime fails the WorkItem for good with the Authority's verdict."""
    script = Script([_search] * 5)
    worker = world.workers[0]
    budget = {"tokens": 400, "tool_calls": 100, "wall_clock_ms": 600_000}
    work = agent_grant(world, "a", worker, {}, budget=budget)
    fn = agent_handler(_agent(script, []), prompt="go", check_budget_locally=False)
    out = await execute(live.url, worker, work, fn)
    assert script.requests == 3  # the third was sent (no local check), not a fourth
    assert out.kind is OutcomeKind.FAILED and out.retryable is False
    assert out.error is not None and out.error.startswith("budget exceeded: tokens 450 of 400")
    assert _charged(world, "a")["tokens"] == 300  # the refused charge left no trace
    assert world.item("a")["state"] == "failed"
    # the two paid responses' checkpoints only: whether the third response's charge went with
    # its checkpoint or with a heartbeat's renewal, no report passes a charge in flight
    # (tests/worker/test_charge_order.py), so the refused one leaves no checkpoint
    saved = [
        e for e in world.authority.all_events(world.group) if e.type == "work.progress_reported"
    ]
    assert len(saved) == 2
