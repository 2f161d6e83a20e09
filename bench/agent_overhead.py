"""Benchmark: a Pydantic AI agent run inside a WorkItem against the same agent run bare.

Usage: ``python bench/agent_overhead.py [--steps N] [--step-ms MS] [--json]``

One agent on a ``FunctionModel`` whose every step takes ``--step-ms`` (default 50 ms, a fast
model's latency): ``--steps`` (default 100) model steps, each but the last calling one tool.

* **bare s** — ``agent.run(...)``: the model steps and the tool calls, nothing else.
* **in WorkItem s** — the same agent as the handler of a WorkItem (``agent_handler``), run by
  ``execute_work_item`` against ``missionweave authority serve`` (its own process, SQLite
  file) over loopback HTTP, with a filesystem artifact store: after each model response the
  conversation is published as an Artifact (a confirmed lease first) and the checkpoint
  saved, which charges the usage; each tool call passes the fence; the output is published
  and the Submission signed.
* **ratio** — in WorkItem / bare (target ≤ 1.2 at 50 ms steps); **overhead ms/step**.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _figures import parser, print_figures
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from missionweave.agents import AgentDeps, agent_handler
from missionweave.authority import now_ms
from missionweave.protocol.temporal_contract import OutcomeKind
from tests.agents.harness import agent_grant, execute
from tests.support.serving import ProcessServer
from tests.support.world import make_world


def _agent(steps: int, step_s: float) -> Agent[Any, str]:
    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(step_s)
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if n < steps - 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"n": n})])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[Any, str] = Agent(FunctionModel(model, model_name="bench"), deps_type=AgentDeps)

    @agent.tool_plain
    def lookup(n: int) -> str:
        return f"fact {n}"

    return agent


async def _in_work_item(steps: int, step_s: float, tmp: Path) -> float:
    """The agent as a WorkItem's handler, against ``missionweave authority serve`` as its own
    process (as deployed: the Authority does not share the agent's event loop)."""
    w = make_world(tmp / "authority.db")
    w.clock.now = now_ms()
    worker = w.workers[0]
    budget = {"tokens": 10**9, "tool_calls": 10 * steps, "wall_clock_ms": 3_600_000}
    timeouts = {"start_deadline_ms": 60_000, "lease_ms": 30_000, "heartbeat_ms": 5_000}
    work = agent_grant(
        w, "a", worker, {}, allowed_tools=["lookup"], budget=budget, timeouts=timeouts
    )
    w.authority.key.to_file(tmp / "authority.pem")
    w.authority.close()
    server = ProcessServer(tmp / "authority.db", tmp / "authority.pem", (w.coordinator.public_key,))
    await server.start()
    try:
        fn = agent_handler(_agent(steps, step_s), prompt="go")
        start = time.perf_counter()
        out = await execute(server.url, worker, work, fn)  # Artifacts: beside the db
        elapsed = time.perf_counter() - start
        assert out.kind is OutcomeKind.SUBMITTED, out.error
        return elapsed
    finally:
        await server.stop()


async def _bare(steps: int, step_s: float) -> float:
    start = time.perf_counter()
    result = await _agent(steps, step_s).run("go", usage_limits=UsageLimits(request_limit=None))
    assert result.output == "done"
    return time.perf_counter() - start


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-ms", type=int, default=50)
    args = ap.parse_args()
    step_s = args.step_ms / 1000
    bare = asyncio.run(_bare(args.steps, step_s))
    with tempfile.TemporaryDirectory() as tmp:
        inside = asyncio.run(_in_work_item(args.steps, step_s, Path(tmp)))
    print_figures(
        {
            "steps": args.steps,
            "step ms": args.step_ms,
            "bare s": round(bare, 3),
            "in WorkItem s": round(inside, 3),
            "ratio": round(inside / bare, 3),
            "overhead ms/step": round((inside - bare) * 1000 / args.steps, 1),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
