"""Research and summarise: two WorkItems run by Pydantic AI agents under their contracts
(``missionweave worker --handlers examples.agents.research``; docs/agents.md, "Agents built
with Pydantic AI").

* ``research.gather@1.0`` — an agent with the tool ``search_notes`` (a small local corpus)
  gathers facts about ``input.topic``; its output, :class:`Notes`, is the ``notes`` Artifact.
* ``research.write@1.0`` — an agent with no tool writes a :class:`Summary` from the notes its
  dependency submitted (read from the artifact store).

No API key is needed: without ``MISSIONWEAVE_AGENT_MODEL`` both agents run on an offline
scripted model (Pydantic AI's ``FunctionModel``) that searches once per keyword and answers
from what it found. With ``MISSIONWEAVE_AGENT_MODEL=openai:gpt-4o`` (and ``OPENAI_API_KEY``;
``pip install 'pydantic-ai-slim[openai]'``) the same agents run on that model, and every
response is charged in tokens and, where genai-prices knows the model, money.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from missionweave.agents import AgentDeps, agent_handler
from missionweave.worker import WorkContext, handler

#: The corpus ``search_notes`` reads: keyword → fact.
CORPUS = {
    "lease": "An execution lease binds a WorkItem to one agent, session and ownership epoch.",
    "epoch": "A reassignment raises the ownership epoch, so a former owner's Commands fail.",
    "evidence": "Evidence records subject, criterion, method, result, producer and time.",
    "budget": "Budgets cover money, tokens, tool calls, compute, wall clock, side effects.",
    "artifact": "Artifacts are content-addressed: the SHA-256 of the bytes is the identity.",
}


class Topic(BaseModel):
    topic: str
    keywords: list[str]


class Notes(BaseModel):
    topic: str
    facts: list[str]


class Summary(BaseModel):
    title: str
    text: str


def _prompt_text(messages: list[ModelMessage]) -> str:
    return "\n".join(
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    )


def offline_gatherer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Search each keyword named in the prompt once, then return the facts found."""
    searched = [
        p.args_as_dict()["query"]
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart) and p.tool_name == "search_notes"
    ]
    prompt = _prompt_text(messages)
    wanted = [k for k in CORPUS if k in prompt.lower() and k not in searched]
    if wanted:
        return ModelResponse(parts=[ToolCallPart("search_notes", {"query": wanted[0]})])
    found = [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "search_notes"
    ]
    topic = prompt.split("Topic:", 1)[-1].splitlines()[0].strip()
    out = {"topic": topic, "facts": found}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, out)])


def offline_writer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Join the facts listed in the prompt (lines starting with ``- ``) into a summary."""
    prompt = _prompt_text(messages)
    facts = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
    topic = prompt.split("Topic:", 1)[-1].splitlines()[0].strip()
    out = {"title": f"{topic}: what we know", "text": " ".join(facts) or "Nothing was found."}
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, out)])


def model_for(offline: Any) -> Model | str:
    """``MISSIONWEAVE_AGENT_MODEL`` (e.g. ``openai:gpt-4o``) when set, else the offline one."""
    return os.environ.get("MISSIONWEAVE_AGENT_MODEL") or FunctionModel(
        offline, model_name="offline"
    )


gatherer: Agent[AgentDeps[None], Notes] = Agent(
    model_for(offline_gatherer),
    deps_type=AgentDeps,
    output_type=Notes,
    instructions="Gather facts about the topic with search_notes, one keyword per search.",
)


@gatherer.tool
async def search_notes(ctx: RunContext[AgentDeps[None]], query: str) -> str:
    """Search the notes for one keyword."""
    ctx.deps.work.logger.info("search_notes %r (key %s)", query, ctx.deps.idempotency_key)
    return CORPUS.get(query.lower(), f"nothing about {query}")


writer: Agent[AgentDeps[None], Summary] = Agent(
    model_for(offline_writer),
    deps_type=AgentDeps,
    output_type=Summary,
    instructions="Write a short summary from the facts given. Use no tool.",
)


def gather_prompt(ctx: WorkContext, input: Topic) -> str:
    return f"Topic: {input.topic}\nKeywords: {', '.join(input.keywords)}"


async def write_prompt(ctx: WorkContext, input: Topic) -> str:
    """The facts of the dependency's ``notes`` Artifact, one per line."""
    facts: list[str] = []
    for hashes in ctx.dependency_artifacts.values():
        for h in hashes:
            try:
                notes = Notes.model_validate_json(await ctx.fetch(h))
            except ValueError:  # a conversation checkpoint, not the notes
                continue
            facts += notes.facts
    return f"Topic: {input.topic}\n" + "".join(f"- {f}\n" for f in facts)


gather = handler("research.gather", version="1.0", estimate_ms=10_000)(
    agent_handler(gatherer, prompt=gather_prompt, input=Topic)
)
write = handler("research.write", version="1.0", estimate_ms=10_000)(
    agent_handler(writer, prompt=write_prompt, input=Topic)
)
