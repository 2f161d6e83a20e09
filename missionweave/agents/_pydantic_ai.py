"""Pydantic AI inside a WorkItem: the contract's :class:`Governor` plugged into an ``Agent``'s
run through a capability (tools shown, tool calls fenced and keyed, refusals recorded) and
through the run's node loop (budgets checked and usage charged at each model-request
boundary, the conversation checkpointed after each model response, cooperative pauses).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any, Generic, TypeVar

from pydantic_ai import Agent, CallToolsNode, ModelRequestNode, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import UsageLimits
from pydantic_graph import End

from ..protocol import Budget, RejectionCode
from ..worker import Pause, WorkContext
from ._conversation import load_history, save_history
from ._governor import BudgetExhausted, Governor

T = TypeVar("T")

#: The idempotency key of the tool call running in this task (each call runs in its own).
_CALL_KEY: ContextVar[str | None] = ContextVar("missionweave_tool_call_key", default=None)


@dataclass
class AgentDeps(Generic[T]):
    """What a tool finds in ``RunContext.deps`` when its agent runs inside a WorkItem.

    Attributes:
        work: the WorkItem's context (ids, contract, ``publish``, ``logger`` …).
        user: the handler's own dependencies (``deps=`` of :func:`run_agent`), or ``None``.
    """

    work: WorkContext
    user: T

    @property
    def idempotency_key(self) -> str:
        """The idempotency key of the tool call now running: ``ctx.idempotency_key(
        "tool:<name>:<index>")``, its own for each call of the conversation and the same when a
        resumed run repeats the call (MW-16-f). Pass it to the external API.

        Raises:
            RuntimeError: read outside a tool call.
        """
        key = _CALL_KEY.get()
        if key is None:
            raise RuntimeError("idempotency_key is only known inside a tool call")
        return key


async def send_idempotency_key(
    ctx: RunContext[AgentDeps[Any]],
    call_tool: Any,
    name: str,
    args: dict[str, Any],
) -> Any:
    """Hand each MCP tool call its idempotency key: pass as ``MCPToolset(...,
    process_tool_call=send_idempotency_key)``, and the server finds the key of the call in its
    request's ``_meta["idempotency_key"]`` (MW-16-f), as a function tool finds it in
    ``ctx.deps.idempotency_key``."""
    return await call_tool(name, args, metadata={"idempotency_key": ctx.deps.idempotency_key})


def _call_index(messages: Sequence[ModelMessage], tool_call_id: str, fallback: int) -> int:
    """The 0-based position of tool call ``tool_call_id`` among every tool call of the
    conversation: stable across a resume, since the conversation is checkpointed with it."""
    n = 0
    for m in messages:
        if isinstance(m, ModelResponse):
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    if p.tool_call_id == tool_call_id:
                        return n
                    n += 1
    return fallback


@dataclass
class ContractCapability(AbstractCapability[AgentDeps[Any]]):
    """The contract's tool rules as a Pydantic AI capability.

    The model is shown only the tools ``allowed_tools`` names — function tools and MCP
    servers' tools alike — so a call to any other is refused by Pydantic AI before anything
    runs, and the model gets a retry prompt naming the tools it may use; the refusal is
    recorded for the Evidence. Every tool call is fenced, metered and keyed
    (:meth:`Governor.before_tool`).
    """

    governor: Governor

    async def prepare_tools(
        self, ctx: RunContext[AgentDeps[Any]], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        shown = set(self.governor.visible(t.name for t in tool_defs))
        return [t for t in tool_defs if t.name in shown]

    async def after_model_request(
        self,
        ctx: RunContext[AgentDeps[Any]],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        shown = request_context.model_request_parameters.tool_defs
        for part in response.parts:
            if isinstance(part, ToolCallPart) and part.tool_name not in shown:
                self.governor.refuse(part.tool_name)
        return response

    async def wrap_tool_execute(
        self,
        ctx: RunContext[AgentDeps[Any]],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: Any,
    ) -> Any:
        if tool_def.kind != "function":
            return await handler(args)
        index = _call_index(ctx.messages, call.tool_call_id, self.governor.ledger.tool_calls)
        key = await self.governor.before_tool(call.tool_name, index)
        token = _CALL_KEY.set(key)
        try:
            result = await handler(args)
        finally:
            _CALL_KEY.reset(token)
        self.governor.tool_result(call.tool_name, index, result)
        return result


def price_minor_units(response: ModelResponse, budget: Budget) -> int | None:
    """What ``response`` cost in the budget's currency's minor units, rounded up, from
    ``genai-prices`` (Pydantic AI's price tables, which are in USD); ``None`` when no price is
    known (an unknown or test model) or the budget's currency is not USD. A contract without
    a money budget is charged nothing."""
    if budget.money is None:
        return 0
    if budget.money.currency.upper() != "USD":
        return None
    try:
        total = Decimal(response.cost().total_price)
    except (LookupError, ValueError, AssertionError):
        return None
    return int((total * 100).to_integral_value(rounding=ROUND_CEILING))


@dataclass(frozen=True)
class AgentResult(Generic[T]):
    """A finished run: its ``output`` and the :class:`Governor` that kept its accounts."""

    output: T
    governor: Governor


async def run_agent(
    ctx: WorkContext,
    agent: Agent[Any, Any],
    prompt: str,
    *,
    output_type: Any = None,
    deps: Any = None,
    toolsets: Sequence[AbstractToolset[Any]] = (),
    irreversible_tools: Sequence[str] = (),
    check_budget_locally: bool = True,
    usage_limits: UsageLimits | None = None,
) -> AgentResult[Any] | Pause:
    """Run ``agent`` under the WorkItem's contract, durably.

    The model sees only the contract's ``allowed_tools``; each model request is preceded by
    the budget check (tokens, money, wall clock) and a look at ``ctx.should_pause()``; each
    model response is charged to the WorkItem through the Authority (``ctx.save``: the usage
    delta rides with the checkpoint) together with the conversation so far, published as an
    Artifact without private reasoning. A run whose checkpoint holds a conversation resumes
    from it: no model request is paid twice.

    Args:
        ctx: the WorkItem's context.
        agent: the Pydantic AI agent (its model, tools, toolsets and instructions).
        prompt: the user prompt of a fresh run (ignored when resuming).
        output_type: the run's output type (default: the agent's).
        deps: the handler's own dependencies, ``RunContext.deps.user`` in tools.
        toolsets: more toolsets for this run, e.g. an MCP server (``MCPToolset``).
        irreversible_tools: tools whose calls wait for a lease the Authority confirms.
        check_budget_locally: check budgets before each step (default); ``False`` leaves it
            to the Authority's charge alone.
        usage_limits: Pydantic AI's own limits for this run (counted from this run's start,
            not the WorkItem's); default: none, the contract's budget alone decides.

    Returns:
        The output and the accounts, or ``Pause`` (return it) when the runtime asked to pause.

    Raises:
        BudgetExhausted: the budget cannot pay for the next step (a ``PermanentFailure``).
        LeaseLost: the lease is gone.
    """
    gov = Governor(ctx, irreversible_tools=irreversible_tools, check_locally=check_budget_locally)
    history = await load_history(ctx, gov.ledger.history) if gov.ledger.history else None
    kwargs: dict[str, Any] = {} if output_type is None else {"output_type": output_type}
    async with agent.iter(
        None if history else prompt,
        message_history=history,
        deps=AgentDeps(ctx, deps),
        toolsets=list(toolsets),
        capabilities=[ContractCapability(gov)],
        # the contract's budget decides, not Pydantic AI's default of 50 requests a run
        usage_limits=usage_limits or UsageLimits(request_limit=None),
        **kwargs,
    ) as run:
        node: Any = run.next_node
        requested = False  # a response is charged once: not again when a resume replays it
        while not isinstance(node, End):
            if isinstance(node, ModelRequestNode):
                if ctx.should_pause():  # a model-request boundary is a safe point
                    messages = [*run.all_messages()]
                    if not messages or messages[-1] is not node.request:
                        messages.append(node.request)
                    return ctx.pause(gov.checkpoint(await save_history(ctx, messages)))
                gov.before_request()
                requested = True
            elif isinstance(node, CallToolsNode) and requested:
                requested = False
                await _charge(ctx, gov, node.model_response, run.all_messages())
            node = await run.next(node)
        result = run.result
        assert result is not None  # the loop ended on End
        return AgentResult(result.output, gov)


async def _charge(
    ctx: WorkContext, gov: Governor, response: ModelResponse, messages: list[ModelMessage]
) -> None:
    """Meter ``response``, publish the conversation and save the checkpoint, which charges
    the usage: the Authority judges it before the next request goes out (MW-11.5-j)."""
    usage = response.usage
    price = price_minor_units(response, ctx.contract.budget)
    gov.charge(usage.input_tokens + usage.output_tokens, price)
    state = gov.checkpoint(await save_history(ctx, messages))
    verdict = await ctx.save(state, phase="model_response")
    rej = verdict.rejection if verdict is not None and not verdict.accepted else None
    if rej is None or rej.code != RejectionCode.BUDGET_EXCEEDED:
        return
    # The Authority refused the charge and recorded nothing (MW-11.5-j): no further request
    # goes out. The unpaid usage rides with the runtime's next lease renewal, which the
    # Authority refuses the same way; the runtime then cancels this handler and fails the
    # WorkItem for good with the Authority's budget verdict, charging nothing.
    ctx.logger.warning("the Authority refused the charge: %s", rej.reason)
    # A renewal comes every heartbeat; waiting a lease length is only ever reached if none
    # does (then the lease expires, and the WorkItem with it).
    await asyncio.sleep(ctx.contract.timeouts.lease_ms / 1000)
    dims = rej.detail.get("dimensions") or ["budget"]
    raise BudgetExhausted(str(dims[0]), gov.ledger.tokens, ctx.contract.budget.tokens or 0, 0)


__all__ = [
    "AgentDeps",
    "AgentResult",
    "ContractCapability",
    "price_minor_units",
    "run_agent",
    "send_idempotency_key",
]
