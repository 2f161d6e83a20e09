"""Pin the agents' public surface (names may be added deliberately, never lost), and the
pricing of a model response (genai-prices, Pydantic AI's own tables)."""

from __future__ import annotations

from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage

import missionweave.agents as agents
from missionweave.protocol import Budget
from tests.support.surface import assert_surface

AGENTS = {
    "AgentDeps", "AgentResult", "agent_handler", "run_agent", "output_type_for",
    "send_idempotency_key",
    "BudgetExhausted", "ContractCapability", "Governor", "Ledger", "price_minor_units",
    "CONVERSATION_MEDIA_TYPE", "without_private_reasoning",
}  # fmt: skip


def test_agents_surface() -> None:
    assert_surface(agents, AGENTS)


def _response(model: str) -> ModelResponse:
    usage = RequestUsage(input_tokens=1000, output_tokens=500)
    return ModelResponse(
        parts=[TextPart("x")], usage=usage, model_name=model, provider_name="openai"
    )


def test_a_known_model_is_priced_in_minor_units_rounded_up__MW_10_1_a() -> None:
    usd = Budget.model_validate({"money": {"amount_minor_units": 500, "currency": "USD"}})
    priced = agents.price_minor_units(_response("gpt-4o"), usd)
    assert priced is not None and priced >= 1  # a fraction of a cent costs one cent
    assert agents.price_minor_units(_response("no-such-model-xyz"), usd) is None
    eur = Budget.model_validate({"money": {"amount_minor_units": 500, "currency": "EUR"}})
    assert agents.price_minor_units(_response("gpt-4o"), eur) is None  # no exchange rate
    assert agents.price_minor_units(_response("gpt-4o"), Budget()) == 0  # no money budget
