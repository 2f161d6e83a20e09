"""``agent_handler``: a Pydantic AI ``Agent`` as a MissionWeave handler.

What the agent produces becomes the Submission: its structured output (an ``output_type``
derived from the deliverable's schema when one is given) is published as the deliverable's
Artifact, and Evidence maps every acceptance criterion to what the run produced (MW-13.2-a/c);
the model's private reasoning never leaves the process (MW-13.2-d).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, StructuredDict
from pydantic_ai.toolsets import AbstractToolset

from ..protocol import Deliverable
from ..worker import Pause, Submission, WorkContext
from ._pydantic_ai import run_agent

#: The user prompt: a string, or ``(ctx, input) -> str`` (or an awaitable of one), e.g. to
#: read the Artifacts of the WorkItem's dependencies.
Prompt = str | Callable[[WorkContext, Any], str | Awaitable[str]]
Deps = Callable[[WorkContext, Any], Any]


def output_type_for(
    deliverable: Deliverable, output: Any, schemas: Mapping[str, dict[str, Any]]
) -> Any:
    """The agent's output type for ``deliverable``: ``output`` when given, else a
    ``StructuredDict`` of the deliverable's JSON Schema (``schemas[schema_id]``), else
    ``None`` (the agent's own)."""
    if output is not None:
        return output
    if deliverable.schema_id is not None and deliverable.schema_id in schemas:
        return StructuredDict(schemas[deliverable.schema_id], name=deliverable.name)
    return None


def _model_name(agent: Agent[Any, Any]) -> str:
    model = agent.model
    if model is None or isinstance(model, str):
        return model or "unknown"
    return str(getattr(model, "model_name", type(model).__name__))


def _output_bytes(value: Any) -> bytes:
    if isinstance(value, BaseModel):
        return value.model_dump_json().encode()
    return json.dumps(value, sort_keys=True).encode()


def agent_handler(
    agent: Agent[Any, Any],
    *,
    prompt: Prompt,
    output: Any = None,
    input: type[BaseModel] | None = None,
    schemas: Mapping[str, dict[str, Any]] | None = None,
    deps: Deps | None = None,
    toolsets: Sequence[AbstractToolset[Any]] = (),
    irreversible_tools: Sequence[str] = (),
    check_budget_locally: bool = True,
) -> Callable[[WorkContext, Any], Any]:
    """Turn ``agent`` into a handler; register it like any other::

        gather = handler("research.gather", version="1.0")(
            agent_handler(agent, prompt=lambda ctx, i: f"Research {i.topic}", input=Topic)
        )

    The WorkItem's contract governs the run (:func:`run_agent`): the model sees only
    ``allowed_tools``; budgets are checked before each model request and tool call and every
    response's usage is charged through the Authority before the next request; each tool call
    gets its own idempotency key (``RunContext.deps.idempotency_key``); the conversation is
    checkpointed after each response, so a reassigned, paused or restarted run resumes there.

    Args:
        agent: the agent.
        prompt: the user prompt, or ``(ctx, input) -> str`` (sync or async) that makes it.
        output: the output type; default: from the first deliverable's ``schema_id`` in
            ``schemas`` (a ``StructuredDict``), else the agent's.
        input: the pydantic model of the WorkItem's input (default: a ``dict``).
        schemas: JSON Schemas by id, as the Coordinator registers them for review.
        deps: ``(ctx, input) -> deps``: the tools' own dependencies (``deps.user``).
        toolsets: more toolsets, e.g. ``MCPToolset(StdioTransport(...))``: only the tools the
            contract names are shown.
        irreversible_tools: tools that change the world: each call waits for a lease the
            Authority confirms (MW-11.5-d).
        check_budget_locally: check budgets before each step (default).

    Returns:
        ``async (ctx, input) -> Submission | Pause``: the first deliverable's output published
        as an Artifact (its hash in ``outputs[deliverable.name]``), Evidence for every
        acceptance criterion plus ``tool_policy`` (refused tool calls).
    """

    async def run(ctx: WorkContext, input: Any) -> Submission | Pause:
        deliverable = ctx.contract.deliverables[0]
        out_type = output_type_for(deliverable, output, schemas or {})
        text = prompt if isinstance(prompt, str) else prompt(ctx, input)
        if inspect.isawaitable(text):
            text = await text
        done = await run_agent(
            ctx,
            agent,
            text,
            output_type=out_type,
            deps=deps(ctx, input) if deps is not None else None,
            toolsets=toolsets,
            irreversible_tools=irreversible_tools,
            check_budget_locally=check_budget_locally,
        )
        if isinstance(done, Pause):
            return done
        ref = await ctx.publish(
            _output_bytes(done.output),
            deliverable.media_type,
            schema_id=deliverable.schema_id,
            model_versions={"model": _model_name(agent)},
        )
        kind = getattr(out_type, "__name__", None) or type(done.output).__name__
        return Submission(
            outputs={deliverable.name: ref.hash},
            evidence=done.governor.evidence(ref.hash, f"output validated as {kind} (pydantic)"),
        )

    run.__annotations__ = {"ctx": WorkContext, "input": input or dict, "return": Any}
    run.__qualname__ = run.__name__ = f"agent_handler_{getattr(agent, 'name', None) or 'agent'}"
    return run


__all__ = ["agent_handler", "output_type_for"]
