"""The contract's rules for one agent run, independent of any agent framework.

:class:`Governor` is the seam a framework adapter plugs into (``_pydantic_ai.py`` is the one
adapter today): it decides which tools the model may see (MW-10.1-a, MW-11.3-d), refuses
the others, checks the budgets before each model request and tool call (MW-10.1-a,
MW-11.4-d), meters what was spent into ``ctx.usage`` — charged through the Authority with the
next checkpoint — and hands each tool call its own idempotency key (MW-16-f, MW-11.4-e). Its
bookkeeping (:class:`Ledger`) travels in the WorkItem's checkpoint, so a resumed run keeps
counting where the last one stopped.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..protocol import Evidence
from ..worker import PermanentFailure, WorkContext

#: The operation-id prefix of a tool call's idempotency key: ``tool:<name>:<index>``.
TOOL_OP = "tool"


class BudgetExhausted(PermanentFailure):
    """The contract's budget cannot pay for the next model request or tool call: the run stops
    before it, and the WorkItem fails for good (``work.failed``, MW-11.4-f).

    Attributes:
        dimension: ``tokens``, ``tool_calls``, ``money`` or ``wall_clock_ms``.
        used: what was spent in that dimension (money in the budget's minor units).
        limit: the contract's limit.
        needed: what the next step needs at least.
    """

    def __init__(self, dimension: str, used: int, limit: int, needed: int) -> None:
        super().__init__(
            f"budget_exceeded: {dimension}: {used} spent of {limit}, the next step needs at "
            f"least {needed} more (budget.{dimension})"
        )
        self.dimension, self.used, self.limit, self.needed = dimension, used, limit, needed


@dataclass
class Ledger:
    """What a run has spent and seen; kept in the checkpoint (JSON, integers only).

    Attributes:
        history: SHA-256 of the last checkpointed conversation Artifact, or ``None``.
        tokens: model tokens charged so far, over every run of this WorkItem.
        money_minor_units: money charged so far, in the budget's minor units.
        unpriced_requests: model requests whose price no table knew (charged 0 money).
        tool_calls: tool calls made so far.
        requests: model requests made so far.
        wall_clock_ms: milliseconds spent in earlier runs.
        last_request_tokens: the last request's input + output tokens (the lower bound of the
            next one: the history it sends only grows).
        last_request_money: the last request's price, minor units (the next one's lower bound,
            for the same reason).
        refused: ``{"tool", "request"}`` (the 1-based model request that asked) of each call
            to a tool the contract does not allow.
        tool_results: ``{"tool", "index", "sha256"}`` of each tool result.
    """

    history: str | None = None
    tokens: int = 0
    money_minor_units: int = 0
    unpriced_requests: int = 0
    tool_calls: int = 0
    requests: int = 0
    wall_clock_ms: int = 0
    last_request_tokens: int = 0
    last_request_money: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any] | None) -> Ledger:
        """The ledger a checkpoint holds under ``"agent"``, or a new one."""
        raw = (state or {}).get("agent")
        return cls(**raw) if isinstance(raw, dict) else cls()

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint to save (``{"agent": {...}}``)."""
        return {"agent": asdict(self)}


class Governor:
    """The contract's rules over one run of an agent inside a WorkItem.

    Args:
        ctx: the WorkItem's context (its contract, meters, fence and keys).
        irreversible_tools: tools that change the world: each call waits for a lease the
            Authority confirms (MW-11.5-d); every tool of a ``high``/``critical`` contract does.
        check_locally: check budgets before each step (default). ``False`` leaves the whole
            decision to the Authority's charge, which refuses a usage past the budget
            (MW-11.5-j); for tests of that refusal.
    """

    def __init__(
        self,
        ctx: WorkContext,
        *,
        irreversible_tools: Iterable[str] = (),
        check_locally: bool = True,
    ) -> None:
        self.ctx = ctx
        self.ledger = Ledger.from_checkpoint(ctx.checkpoint)
        self.allowed = frozenset(ctx.contract.allowed_tools)
        self.irreversible = frozenset(irreversible_tools)
        self.check_locally = check_locally
        self._started = time.monotonic()

    # ------------------------------------------------------------------------- tools

    def visible(self, names: Iterable[str]) -> list[str]:
        """The tools among ``names`` the model may be shown: those the contract's
        ``allowed_tools`` names (MW-10.1-a, the capability token's scope, MW-11.3-d)."""
        return [n for n in names if n in self.allowed]

    def refuse(self, tool: str) -> None:
        """Record a call to a tool the contract does not allow; it never runs."""
        self.ctx.logger.warning("refused a call to tool %r: not in allowed_tools", tool)
        self.ledger.refused.append({"tool": tool, "request": self.ledger.requests + 1})

    async def before_tool(self, tool: str, index: int) -> str:
        """Check, fence and meter tool call number ``index`` (0-based over the conversation)
        of ``tool``; return its idempotency key, ``idempotency_key("tool:<tool>:<index>")``:
        its own for every call, the same when a resumed run repeats the call (MW-16-f).

        Raises:
            PermissionError: ``tool`` is not allowed (a framework that filtered the tools it
                showed never gets here).
            BudgetExhausted: the contract's ``tool_calls`` budget is spent.
            LeaseLost: the lease is gone (irreversible tools wait for one the Authority
                confirms).
        """
        if tool not in self.allowed:
            self.refuse(tool)
            raise PermissionError(f"tool {tool!r} is not in the contract's allowed_tools")
        limit = self.ctx.contract.budget.tool_calls
        if self.check_locally and limit is not None and self.ledger.tool_calls + 1 > limit:
            raise BudgetExhausted("tool_calls", self.ledger.tool_calls, limit, 1)
        # the fence, the tool_calls meter and the key: one per call (``op_id`` = its index in
        # the conversation, so a resumed run repeating the call derives the same key)
        key = await self.ctx.tool_call(
            tool, op_id=str(index), reversible=tool not in self.irreversible
        )
        self.ledger.tool_calls += 1
        return key

    def tool_result(self, tool: str, index: int, result: Any) -> None:
        """Record the SHA-256 of a tool's result (Evidence cites it)."""
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        sha = hashlib.sha256(text.encode()).hexdigest()
        self.ledger.tool_results.append({"tool": tool, "index": index, "sha256": sha})

    # ------------------------------------------------------------------------ budgets

    def wall_clock_ms(self) -> int:
        """Milliseconds spent by every run so far, this one included."""
        return self.ledger.wall_clock_ms + int((time.monotonic() - self._started) * 1000)

    def before_request(self) -> None:
        """Check that the budget can pay for the next model request, before it is sent: its
        tokens and its price are at least the last request's (the history it sends only
        grows; at least 1 of each), and the wall clock must be under its limit (MW-11.4-d).

        Raises:
            BudgetExhausted: the next request would pass a limit.
        """
        if not self.check_locally:
            return
        budget, led = self.ctx.contract.budget, self.ledger
        need = max(led.last_request_tokens, 1)
        if budget.tokens is not None and led.tokens + need > budget.tokens:
            raise BudgetExhausted("tokens", led.tokens, budget.tokens, need)
        money = budget.money
        need = max(led.last_request_money, 1)
        if money is not None and led.money_minor_units + need > money.amount_minor_units:
            raise BudgetExhausted("money", led.money_minor_units, money.amount_minor_units, need)
        wall = budget.wall_clock_ms
        if wall is not None and self.wall_clock_ms() >= wall:
            raise BudgetExhausted("wall_clock_ms", self.wall_clock_ms(), wall, 1)

    def charge(self, tokens: int, money_minor_units: int | None) -> None:
        """Meter one model response: ``tokens`` and its price (``None``: no price known).
        The Authority charges it with the next checkpoint (:meth:`checkpoint`)."""
        self.ledger.requests += 1
        self.ledger.tokens += tokens
        self.ledger.last_request_tokens = tokens
        if money_minor_units is None:
            self.ledger.unpriced_requests += 1
            money_minor_units = 0
        self.ledger.money_minor_units += money_minor_units
        self.ledger.last_request_money = money_minor_units
        self.ctx.usage.add(tokens=tokens, money_minor_units=money_minor_units)

    def checkpoint(self, history: str | None) -> dict[str, Any]:
        """The checkpoint state after a model response whose conversation is Artifact
        ``history``."""
        self.ledger.history = history
        state = self.ledger.checkpoint()
        state["agent"]["wall_clock_ms"] = self.wall_clock_ms()
        return state

    # ----------------------------------------------------------------------- evidence

    def evidence(self, output_ref: str | None, validated: str) -> list[Evidence]:
        """Evidence for every acceptance criterion (MW-13.2-a): what the run produced — the
        output's validation and Artifact, the tool results' hashes — and one ``tool_policy``
        Evidence listing refused tool calls. Facts only, never the model's reasoning
        (MW-13.2-d)."""
        led = self.ledger
        results = ", ".join(
            f"{r['tool']}#{r['index']}={r['sha256'][:12]}" for r in led.tool_results
        )
        facts = (
            f"{validated}; {led.requests} model requests, {led.tokens} tokens, "
            f"{led.tool_calls} tool calls"
        ) + (f"; tool results sha256: {results}" if results else "")
        refs = [output_ref] if output_ref else []
        out = [
            self.ctx.evidence(
                c.id, method="pydantic-ai agent", summary=facts[:2000], artifacts=refs
            )
            for c in self.ctx.contract.acceptance_criteria
        ]
        refused = ", ".join(f"{r['tool']} (request {r['request']})" for r in led.refused)
        out.append(
            self.ctx.evidence(
                "tool_policy",
                method="allowed_tools",
                summary=(f"refused before running: {refused}" if refused else "no call refused")[
                    :2000
                ],
            )
        )
        return out


__all__ = ["TOOL_OP", "BudgetExhausted", "Governor", "Ledger"]
