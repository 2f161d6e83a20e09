"""A four-step research agent on a model that answers from the conversation it is sent (not
from how often it was called), so a resumed run picks up where the checkpoint left it: step
``n`` is the one whose request carries ``n`` earlier responses. ``kill_runner`` runs it in a
process that kills itself at a chosen step."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from missionweave.agents import AgentDeps

#: What the model thinks at every step: it must never leave the process (MW-13.2-d).
MARKER = "PRIVATE-REASONING-7f3c9e1d-do-not-leak"
QUERIES = ["alpha", "beta", "gamma"]


class Findings(BaseModel):
    summary: str
    queries: list[str]


@dataclass
class StepModel:
    """Answers step ``n`` (earlier responses in the request): a search per query, then the
    output. ``kill_at``: SIGKILL this process when asked for that step (0-based)."""

    kill_at: int | None = None
    on_request: Callable[[int], None] | None = None
    requests: list[int] = field(default_factory=list)
    #: whether a request carried the model's own earlier thinking (inside the process)
    saw_own_thinking: bool = False

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if n == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        self.requests.append(n)
        if self.on_request is not None:
            self.on_request(n)
        self.saw_own_thinking |= MARKER.encode() in ModelMessagesTypeAdapter.dump_json(messages)
        thought = ThinkingPart(f"{MARKER} step {n}")
        if n < len(QUERIES):
            return ModelResponse(parts=[thought, ToolCallPart("search", {"q": QUERIES[n]})])
        out = {"summary": "three searches", "queries": QUERIES}
        return ModelResponse(parts=[thought, ToolCallPart(info.output_tools[0].name, out)])


def research_agent(model: StepModel, ran: list[str]) -> Agent[AgentDeps[None], Findings]:
    """The agent: one tool, ``search``; ``ran`` collects each call's query."""
    agent: Agent[AgentDeps[None], Findings] = Agent(
        FunctionModel(model, model_name="step-model"), deps_type=AgentDeps, output_type=Findings
    )

    @agent.tool
    async def search(ctx: RunContext[AgentDeps[None]], q: str) -> str:
        ran.append(q)
        return f"facts about {q}"

    return agent
