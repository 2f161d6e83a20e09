"""MCP servers' tools obey the contract like function tools: a stdio MCP server offers
``lookup`` and ``wipe``; the contract names ``lookup`` only, so ``wipe`` is never shown to the
model, and a call to it never reaches the server (MW-10.1-a, MW-11.3-d)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart

from missionweave.agents import AgentDeps, agent_handler, send_idempotency_key
from missionweave.protocol import idempotency_key
from missionweave.protocol.temporal_contract import OutcomeKind
from tests.agents.harness import Script, agent_grant, execute
from tests.support.serving import LiveServer
from tests.support.world import World

SERVER = Path(__file__).with_name("mcp_notes.py")


def _notes(env: dict[str, str], **kw: Any) -> MCPToolset[Any]:
    """The notes server over stdio (a generous start-up time: the test machine is shared)."""
    transport = StdioTransport(sys.executable, [str(SERVER)], env=env)
    return MCPToolset(transport, id="notes", init_timeout=60, **kw)


def _calls(*names: str) -> Any:
    args = {"lookup": {"topic": "leases"}, "wipe": {}}
    return lambda messages, info: ModelResponse(parts=[ToolCallPart(n, args[n]) for n in names])


async def test_an_mcp_tool_the_contract_does_not_name_is_invisible_and_never_runs__MW_11_3_d(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    wiped = tmp_path / "wiped"
    env = {**os.environ, "NOTES_WIPED": str(wiped)}
    notes = _notes(env, process_tool_call=send_idempotency_key)
    script = Script([_calls("lookup", "wipe"), lambda m, i: ModelResponse(parts=[TextPart("ok")])])
    agent = Agent(script.model(), deps_type=AgentDeps)
    worker = world.workers[0]
    work = agent_grant(world, "a", worker, {}, allowed_tools=["lookup"])
    fn = agent_handler(agent, prompt="read the notes", toolsets=[notes])
    out = await execute(live.url, worker, work, fn)
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert script.tools == [["lookup"], ["lookup"]]  # wipe was never shown
    assert not wiped.exists()  # and never ran
    returns = {
        p.tool_name: p.content for p in script.seen[1][-1].parts if isinstance(p, ToolReturnPart)
    }
    # the MCP server answered the allowed call, which carried its own key (MW-16-f)
    key = idempotency_key(work.mission_id, "a", 1, "tool:lookup:0")
    assert returns["lookup"] == f"notes about leases (key {key})"
    assert "Unknown tool name: 'wipe'" in str(returns["wipe"])
    policy = {e.criterion: e for e in out.evidence}["tool_policy"]
    assert "wipe (request 1)" in policy.summary
    hashes = {e.criterion: e for e in out.evidence}["hashes"].summary
    assert "lookup#0=" in hashes and "1 tool calls" in hashes


async def test_the_same_mcp_call_runs_when_the_contract_names_it(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    """The negative control: named in ``allowed_tools``, ``wipe`` is shown and runs."""
    wiped = tmp_path / "wiped"
    env = {**os.environ, "NOTES_WIPED": str(wiped)}
    notes = _notes(env)
    script = Script([_calls("wipe"), lambda m, i: ModelResponse(parts=[TextPart("ok")])])
    worker = world.workers[0]
    work = agent_grant(world, "a", worker, {}, allowed_tools=["lookup", "wipe"])
    agent = Agent(script.model(), deps_type=AgentDeps)
    out = await execute(live.url, worker, work, agent_handler(agent, prompt="go", toolsets=[notes]))
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert sorted(script.tools[0]) == ["lookup", "wipe"] and wiped.exists()
