"""The framework-neutral rules (:class:`missionweave.agents.Governor`) on their own: the money
and wall-clock checks before a model request, and the ledger a checkpoint carries."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from missionweave.agents import BudgetExhausted, Governor, Ledger
from missionweave.worker._lease import UsageMeter
from tests.support.contracts import contract


def _ctx(checkpoint: dict[str, Any] | None = None, **budget: Any) -> Any:
    c = contract(budget={"tool_calls": 10, **budget}, allowed_tools=["search"])
    return SimpleNamespace(
        contract=c, checkpoint=checkpoint, usage=UsageMeter(), logger=logging.getLogger("t")
    )


def test_money_stops_before_the_request_the_last_price_says_would_pass_it__MW_11_4_d() -> None:
    gov = Governor(_ctx(money={"amount_minor_units": 100, "currency": "USD"}))
    gov.before_request()
    gov.charge(tokens=150, money_minor_units=75)  # a request of 75 cents
    with pytest.raises(BudgetExhausted) as e:
        gov.before_request()  # 75 + at least 75 > 100
    assert (e.value.dimension, e.value.used, e.value.needed) == ("money", 75, 75)
    assert gov.ctx.usage.money_minor_units == 75 and gov.ctx.usage.tokens == 150


def test_an_unpriced_response_is_counted_and_charged_no_money() -> None:
    gov = Governor(_ctx(money={"amount_minor_units": 100, "currency": "USD"}))
    gov.charge(tokens=10, money_minor_units=None)
    assert gov.ledger.unpriced_requests == 1 and gov.ledger.money_minor_units == 0
    gov.before_request()  # still at least 1 cent left


def test_wall_clock_counts_earlier_runs_from_the_checkpoint__MW_11_4_d() -> None:
    earlier = Ledger(wall_clock_ms=60_000).checkpoint()
    gov = Governor(_ctx(earlier, wall_clock_ms=60_000))
    with pytest.raises(BudgetExhausted) as e:
        gov.before_request()
    assert e.value.dimension == "wall_clock_ms"
    Governor(_ctx(earlier, wall_clock_ms=120_000)).before_request()  # time is left


def test_the_ledger_round_trips_through_a_checkpoint() -> None:
    gov = Governor(_ctx())
    gov.charge(tokens=42, money_minor_units=0)
    gov.refuse("wipe")
    state = gov.checkpoint("ab" * 32)
    again = Governor(_ctx(state))
    assert again.ledger.tokens == 42 and again.ledger.history == "ab" * 32
    assert again.ledger.refused == [{"tool": "wipe", "request": 2}]
    assert again.visible(["search", "wipe"]) == ["search"]
