"""Automatic retries are bounded by attempts, total wait, deadline, cost cap and the remaining
budget (MW-11.4-d); the ``work.failed`` Event that exhausts them says which bound, next to the
failure's Evidence (MW-11.4-f), and the Mission's plan does not retry it. A real Authority."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from missionweave.outcome import result_of
from missionweave.protocol import (
    RetryPolicy,
    WorkGraph,
    WorkItemState,
    reduce_events,
)
from missionweave.protocol._retry import total_backoff_ms
from missionweave.protocol.temporal_contract import MissionSpec, WorkItemSpec
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.workflows._plan import plan, retries_left
from missionweave.workflows._state import ItemState, MissionState
from missionweave.workflows._status import failed_for_good
from tests.support.contracts import contract
from tests.support.mission_harness import contract as mission_contract
from tests.support.mission_harness import mission_stack
from tests.support.waits import WAIT_S
from tests.support.world import World, evidence, make_world


def _failing(tmp_path: Path, **over: Any) -> World:
    w = make_world(tmp_path / "a.db")
    w.authorize("a", **over)
    return w


def _fail(w: World, usage: dict[str, int] | None = None, **body: Any) -> dict[str, Any]:
    """One attempt by worker-0: offered, accepted, started and failed; the ``work.failed``
    Event's body."""
    worker = w.workers[0]
    w.lease("a", worker)
    extra: dict[str, Any] = {"evidence": evidence("worker-0", "a"), **body}
    if usage is not None:
        extra["usage"] = usage
    r = w.ok(worker, "work.fail", w.leased("a", **extra))
    (failed,) = [e for e in r.events if e.type == "work.failed"]
    assert failed.body["evidence"], "a failure always carries Evidence (MW-11.4-f)"
    return failed.body


def _plan_retries(w: World, **over: Any) -> bool:
    """What the Mission's plan makes of the log: is the failed item retried?"""
    spec = WorkItemSpec(work_item_id="a", contract=contract(**over))
    facts = reduce_events(w.authority.all_events(w.group))["a"]
    item = ItemState(spec=spec, w=facts, authorized=True)
    state = MissionState(
        spec=MissionSpec(group_id=w.group, mission_id="m1", items=[spec]), items={"a": item}
    )
    graph = WorkGraph()
    graph.add({"a": []})
    exhausted = plan(state, graph, now_ms=w.clock.now).exhausted == ["a"]
    assert exhausted is not retries_left(item, w.clock.now)
    return not exhausted


def test_mw_11_4_d_attempts_bound_retries(tmp_path: Path) -> None:
    over: dict[str, Any] = {"retry": {"max_attempts": 2, "initial_backoff_ms": 0}}
    w = _failing(tmp_path, **over)
    first = _fail(w)
    assert first["retryable"] is True and "retry_exhausted" not in first
    assert _plan_retries(w, **over)
    second = _fail(w)
    assert second["retryable"] is False
    assert second["retry_exhausted"] == {"bound": "max_attempts", "limit": 2, "value": 2}
    assert not _plan_retries(w, **over)
    facts = reduce_events(w.authority.all_events(w.group))["a"]
    assert facts.state is WorkItemState.FAILED and facts.retry_exhausted == "max_attempts"


def test_mw_11_4_d_the_plan_takes_the_retry_bound_from_the_authority_alone(
    tmp_path: Path,
) -> None:
    """Issue 27 item 3: the bound is decided once, in ``work.failed``'s ``retryable``; the plan
    does not count attempts against the contract again. Facts whose attempts are past the
    contract's bound but whose last failure the Authority called retryable are retried; a
    failure it called past the bound is not, whatever the count."""
    over: dict[str, Any] = {"retry": {"max_attempts": 2, "initial_backoff_ms": 0}}
    w = _failing(tmp_path, **over)
    assert _fail(w)["retryable"] is True
    spec = WorkItemSpec(work_item_id="a", contract=contract(**over))
    facts = reduce_events(w.authority.all_events(w.group))["a"]
    miscounted = ItemState(spec=spec, w=dataclasses.replace(facts, attempts=5), authorized=True)
    assert retries_left(miscounted, w.clock.now)
    assert _fail(w)["retryable"] is False
    facts = reduce_events(w.authority.all_events(w.group))["a"]
    recounted = ItemState(spec=spec, w=dataclasses.replace(facts, attempts=0), authorized=True)
    assert not retries_left(recounted, w.clock.now)


def test_mw_11_4_d_max_total_wait_ms_bounds_retries(tmp_path: Path) -> None:
    # waits of 1 s then 2 s: the second retry would bring the total to 3 s > 2.5 s
    retry = {
        "max_attempts": 5,
        "initial_backoff_ms": 1_000,
        "backoff_multiplier": 2,
        "max_total_wait_ms": 2_500,
    }
    over: dict[str, Any] = {"retry": retry}
    w = _failing(tmp_path, **over)
    assert _fail(w)["retryable"] is True
    w.clock.advance(1_000)
    second = _fail(w)
    assert second["retry_exhausted"] == {
        "bound": "max_total_wait_ms",
        "limit": 2_500,
        "value": 3_000,
    }
    assert second["retryable"] is False and not _plan_retries(w, **over)


def test_mw_11_4_d_the_deadline_bounds_retries(tmp_path: Path) -> None:
    """A retry that could not start before the deadline (its backoff ends after it) is none."""
    w = make_world(tmp_path / "a.db")
    deadline = w.clock.now + 60_000
    over: dict[str, Any] = {
        "deadline_ms": deadline,
        "retry": {"max_attempts": 5, "initial_backoff_ms": 10_000},
    }
    w.authorize("a", **over)
    assert _fail(w)["retryable"] is True  # now + 10 s is well before the deadline
    w.clock.advance(45_000)
    second = _fail(w)  # now + 20 s is past it
    assert second["retry_exhausted"] == {
        "bound": "deadline",
        "limit": deadline,
        "value": w.clock.now + 20_000,
    }
    assert not _plan_retries(w, **over)


def test_mw_11_4_d_cost_cap_bounds_retries(tmp_path: Path) -> None:
    money = {"amount_minor_units": 10_000, "currency": "EUR"}
    over: dict[str, Any] = {
        "budget": {"money": money, "wall_clock_ms": 600_000},
        "retry": {
            "max_attempts": 5,
            "initial_backoff_ms": 0,
            "cost_cap": {"amount_minor_units": 500, "currency": "EUR"},
        },
    }
    w = _failing(tmp_path, **over)
    assert _fail(w, usage={"money_minor_units": 200})["retryable"] is True
    assert _plan_retries(w, **over)
    second = _fail(w, usage={"money_minor_units": 300})  # 500 spent over both attempts
    assert second["retry_exhausted"] == {"bound": "cost_cap", "limit": 500, "value": 500}
    assert not _plan_retries(w, **over)
    # what the Mission's result says of the item
    spec = WorkItemSpec(work_item_id="a", contract=contract(**over))
    item = ItemState(spec=spec, w=reduce_events(w.authority.all_events(w.group))["a"])
    assert (
        failed_for_good(item)
        == "failed after 2 attempt(s) (retry bound cost_cap reached) at worker-0"
    )


def test_mw_11_4_d_the_remaining_budget_bounds_retries(tmp_path: Path) -> None:
    over: dict[str, Any] = {
        "budget": {"tool_calls": 10, "wall_clock_ms": 600_000},
        "retry": {"max_attempts": 5, "initial_backoff_ms": 0},
    }
    w = _failing(tmp_path, **over)
    assert _fail(w, usage={"tool_calls": 4})["retryable"] is True
    second = _fail(w, usage={"tool_calls": 6})  # nothing left: a retry could make no call
    assert second["retry_exhausted"] == {
        "bound": "budget",
        "limit": 10,
        "value": 10,
        "dimension": "tool_calls",
    }
    assert not _plan_retries(w, **over)


def test_mw_11_4_d_a_failure_reported_not_retryable_names_no_bound(tmp_path: Path) -> None:
    w = _failing(tmp_path)
    body = _fail(w, retryable=False)
    assert body["retryable"] is False and "retry_exhausted" not in body


@given(
    initial=st.integers(0, 10_000),
    mult=st.integers(1, 4),
    cap=st.integers(0, 100_000),
    retries=st.integers(0, 40),
)
def test_mw_11_4_d_total_backoff_is_the_sum_of_the_waits(
    initial: int, mult: int, cap: int, retries: int
) -> None:
    policy = RetryPolicy(initial_backoff_ms=initial, backoff_multiplier=mult, max_backoff_ms=cap)
    assert total_backoff_ms(policy, retries) == sum(
        policy.backoff_ms(k) for k in range(1, retries + 1)
    )


# ------------------------------------------------- end to end: a real Mission on the dev server


async def test_mw_11_4_d_a_mission_stops_retrying_at_the_cost_cap(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A handler spends 3 EUR and fails; the cap is 5 EUR and 5 attempts are allowed: the
    second failure reaches the cap, the Authority records ``retry_exhausted: cost_cap`` with
    the failure's Evidence, and the Mission fails with no third attempt."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        ctx.usage.add(money_minor_units=300)
        raise RuntimeError("the API said no")

    c = mission_contract(
        budget={"money": {"amount_minor_units": 10_000, "currency": "EUR"}},
        retry={
            "max_attempts": 5,
            "initial_backoff_ms": 100,
            "cost_cap": {"amount_minor_units": 500, "currency": "EUR"},
        },
    )
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("cap1", [{"work_item_id": "a", "contract": c.wire()}]))
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), WAIT_S)
        failed = [e.body for e in ms.events("a") if e.type == "work.failed"]
        assert [(b["attempts"], b["retryable"]) for b in failed] == [(1, True), (2, False)]
        assert failed[1]["retry_exhausted"] == {"bound": "cost_cap", "limit": 500, "value": 600}
        assert all(b["evidence"] for b in failed)  # MW-11.4-f
        res = result_of(info.value)
        assert res is not None and res.status == "failed"
        (a,) = res.items
        assert a.detail.startswith("failed after 2 attempt(s) (retry bound cost_cap reached)")
