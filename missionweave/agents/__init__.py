"""AI agents inside WorkItems, governed by the work contract (``docs/agents.md``, "Agents built
with Pydantic AI"). Needs the optional extra ``missionweave[pydantic-ai]``.

:func:`agent_handler` turns a Pydantic AI ``Agent`` into a handler; :func:`run_agent` runs one
inside a hand-written handler. The contract decides which tools the model sees (MW-10.1-a,
MW-11.3-d), the budgets checked before each step and charged through the Authority
(MW-11.4-d, MW-11.5-j), the fence and idempotency key of every tool call (MW-16-f,
MW-11.4-e, MW-11.5-d); the conversation is checkpointed after each model response, and private
reasoning never leaves the process (MW-13.2-d). :class:`Governor` holds those rules apart
from the framework: it is the seam a second framework plugs into.
"""

from ._conversation import CONVERSATION_MEDIA_TYPE, without_private_reasoning
from ._governor import BudgetExhausted, Governor, Ledger
from ._handler import agent_handler, output_type_for
from ._pydantic_ai import (
    AgentDeps,
    AgentResult,
    ContractCapability,
    price_minor_units,
    run_agent,
    send_idempotency_key,
)

__all__ = [  # noqa: RUF022 (grouped by who uses them)
    # Writing agent handlers
    "AgentDeps",
    "AgentResult",
    "agent_handler",
    "run_agent",
    "output_type_for",
    "send_idempotency_key",
    # The rules, apart from the framework (the seam of a second one)
    "BudgetExhausted",
    "ContractCapability",
    "Governor",
    "Ledger",
    "price_minor_units",
    # What leaves the process
    "CONVERSATION_MEDIA_TYPE",
    "without_private_reasoning",
]
