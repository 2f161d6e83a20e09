"""Handler registry, admission control (MW-10.3-d/e) and the scheduler (MW-11.1-c/e): pure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from missionweave.protocol import AgentCard, DeclineReason, SigningKey, WorkContract
from missionweave.worker import (
    AdmissionPolicy,
    HandlerLoadError,
    HandlerRegistry,
    handler,
    load_handlers,
)
from missionweave.worker._admission import (
    AMBIGUOUS,
    Accept,
    AdmissionControl,
    AdmissionRequest,
    Decline,
)
from missionweave.worker._scheduler import QueuedItem, RunningItem, Scheduler
from tests.support import worker_handlers
from tests.support.contracts import contract
from tests.support.world import T0, make_world

# ------------------------------------------------------------------------------ handlers


def test_load_handlers_collects_decorated_functions() -> None:
    reg = load_handlers("tests.support.worker_handlers")
    assert reg.capabilities == ["dist.summarize@2.0", "dist.verify@1.2"]
    spec = reg.find("dist.verify@1.0")
    assert spec is not None and spec.fn is worker_handlers.verify
    assert spec.input_model is worker_handlers.VerifyInput and spec.estimate_ms == 1_000
    summarize = reg.find("dist.summarize@2")
    assert summarize is not None and summarize.input_model is None  # a dict input


@pytest.mark.parametrize(
    ("required", "served"),
    [
        ("dist.verify@1.0", True),
        ("dist.verify@1.2", True),
        ("dist.verify@1", True),
        ("dist.verify@1.3", False),
        ("dist.verify@2.0", False),
        ("dist.verify@0.9", False),
        ("other@1.0", False),
    ],
)
def test_handler_chosen_by_name_and_major_version(required: str, served: bool) -> None:
    reg = load_handlers("tests.support.worker_handlers")
    assert (reg.find(required) is not None) is served


def test_handler_errors_are_one_clear_error() -> None:
    with pytest.raises(HandlerLoadError, match="cannot import"):
        load_handlers("tests.no_such_module")
    with pytest.raises(HandlerLoadError, match="no @handler"):
        load_handlers("tests.support.world")
    with pytest.raises(HandlerLoadError, match="async"):
        handler("x.y")(lambda ctx, i: None)  # type: ignore[arg-type,return-value]
    reg = HandlerRegistry()

    @reg.handler("x.y")
    async def one(ctx: Any, i: dict[str, Any]) -> Any: ...

    async def two(ctx: Any, i: dict[str, Any]) -> Any: ...

    with pytest.raises(HandlerLoadError, match="two handlers"):
        reg.add(handler("x.y")(two))


# ----------------------------------------------------------------------------- admission

CARD = AgentCard(agent_id="w", public_key=SigningKey.generate().public_key,
                 capabilities=["dist.verify@1.2"], max_concurrency=2,
                 cost_per_item_minor_units=50, currency="EUR")  # fmt: skip


def request(c: WorkContract | None, **over: Any) -> AdmissionRequest:
    base: dict[str, Any] = dict(
        group_id="g1",
        work_item_id="a",
        contract=c,
        roles=frozenset({"worker"}),
        queue_depth=0,
        queued_total=0,
        busy_slots=0,
        now_ms=T0,
    )
    base.update(over)
    return AdmissionRequest(**base)


def unreadable(group_id: str, c: WorkContract) -> str | None:
    return next((i for i in c.inputs if i.startswith("secret/")), None)


ADMISSION = AdmissionControl(
    CARD, load_handlers("tests.support.worker_handlers"),
    AdmissionPolicy(max_queue_depth=3, default_estimate_ms=5_000, dependency_check=unreadable),
)  # fmt: skip

CASES: list[tuple[str, dict[str, Any], dict[str, Any], Accept | str]] = [
    ("accept", {}, {}, Accept()),
    ("authorization", {}, {"roles": frozenset({"reviewer"})}, DeclineReason.AUTHORIZATION),
    ("capability", {"required_capabilities": ["dist.verify@1.0", "gpu.render@3.0"]}, {},
     DeclineReason.CAPABILITY),
    ("capability-version", {"required_capabilities": ["dist.verify@2.0"]}, {},
     DeclineReason.CAPABILITY),
    ("ambiguity", {"open_questions": ["which mirror?"]}, {}, AMBIGUOUS),
    ("queue capacity", {}, {"queue_depth": 3, "queued_total": 3}, DeclineReason.CAPACITY),
    ("concurrency", {"timeouts": {"start_deadline_ms": 2_000}},
     {"queued_total": 2, "busy_slots": 2}, DeclineReason.CAPACITY),
    ("deadline", {"deadline_ms": T0 + 500}, {}, DeclineReason.DEADLINE),
    ("dependency", {"inputs": ["public/a", "secret/b"]}, {}, DeclineReason.DEPENDENCY),
    ("budget money", {"budget": {"money": {"amount_minor_units": 10, "currency": "EUR"}}}, {},
     DeclineReason.BUDGET),
    ("budget currency", {"budget": {"money": {"amount_minor_units": 999, "currency": "USD"}}}, {},
     DeclineReason.BUDGET),
    ("budget wall clock", {"budget": {"wall_clock_ms": 100}}, {}, DeclineReason.BUDGET),
]  # fmt: skip


def test_a_zero_queue_takes_only_work_that_starts_at_once__MW_10_3_d_e() -> None:
    """``max_queue_depth=0``: accept onto a free slot (the work starts at once), decline with
    ``capacity`` what would have to wait."""
    strict = AdmissionControl(
        CARD, load_handlers("tests.support.worker_handlers"), AdmissionPolicy(max_queue_depth=0)
    )
    assert isinstance(strict.decide(request(contract(), busy_slots=1)), Accept)
    busy = strict.decide(request(contract(), busy_slots=2))
    assert isinstance(busy, Decline) and busy.reason == DeclineReason.CAPACITY
    assert busy.detail["limit"] == "queue_depth"


@pytest.mark.parametrize(("name", "over", "facts", "want"), CASES, ids=[c[0] for c in CASES])
def test_admission_decides_each_reason__MW_10_3_d_e(
    name: str, over: dict[str, Any], facts: dict[str, Any], want: Accept | str
) -> None:
    decision = ADMISSION.decide(request(contract(**over), **facts))
    if isinstance(want, Accept):
        assert isinstance(decision, Accept), decision
    else:
        assert isinstance(decision, Decline) and decision.reason == want, decision
        assert decision.detail  # structured facts, never prose alone


def test_admission_unknown_contract_and_deadline_uses_handler_estimate__MW_10_3_d() -> None:
    d = ADMISSION.decide(request(None))
    assert isinstance(d, Decline) and d.reason is DeclineReason.DEPENDENCY
    # dist.verify declares 1 s: a deadline 2 s away is credible, 0.5 s is not.
    assert isinstance(ADMISSION.decide(request(contract(deadline_ms=T0 + 2_000))), Accept)
    busy = request(contract(deadline_ms=T0 + 2_000), queued_total=2, busy_slots=2)
    d = ADMISSION.decide(busy)  # a round of work ahead of it pushes completion past it
    assert isinstance(d, Decline) and d.reason is DeclineReason.DEADLINE


# ----------------------------------------------------------------------------- scheduler


def queued(g: str, n: int, *, deadline: int | None = None) -> list[QueuedItem]:
    return [QueuedItem(g, f"{g}-{i}", "m", 1, deadline, T0 + i) for i in range(n)]


def test_round_robin_two_groups_one_with_many_items__MW_11_1_c() -> None:
    sched = Scheduler(slots=1)
    queues = {"busy": queued("busy", 20), "quiet": queued("quiet", 2)}
    order = []
    for _ in range(6):  # one slot: start, finish, start the next
        plan = sched.plan(queues, [], T0 + 100)
        (it,) = plan.start
        order.append(it.group_id)
        queues[it.group_id].remove(it)
    assert order == ["busy", "quiet", "busy", "quiet", "busy", "busy"]


def test_slot_limit_and_deadlines__MW_11_1_e() -> None:
    sched = Scheduler(slots=3)
    queues = {"a": queued("a", 5), "b": queued("b", 5)}
    running = [RunningItem("a", "x", T0)]
    plan = sched.plan(queues, running, T0)
    assert len(plan.start) == 2  # 3 slots, 1 taken
    assert {i.group_id for i in plan.start} == {"a", "b"}
    assert sched.plan(queues, [RunningItem("a", str(i), T0) for i in range(3)], T0).start == []
    # earliest start deadline first within a Group; a missed one is never started
    late = [
        QueuedItem("a", "soon", "m", 1, T0 + 10, T0),
        QueuedItem("a", "later", "m", 1, T0 + 99_000, T0),
        QueuedItem("a", "gone", "m", 1, T0 - 1, T0),
    ]
    plan = Scheduler(slots=1).plan({"a": late}, [], T0)
    assert [i.work_item_id for i in plan.start] == ["soon"]
    assert [i.work_item_id for i in plan.missed] == ["gone"]


def test_starving_group_triggers_cooperative_preemption__MW_11_3_g() -> None:
    sched = Scheduler(slots=2, max_wait_ms=60_000)
    running = [
        RunningItem("busy", "b1", T0),
        RunningItem("busy", "b2", T0 + 5),
        RunningItem("busy", "b3", T0 - 1, interruptible=False),
    ]
    waiting = {"quiet": queued("quiet", 1)}
    assert sched.plan(waiting, running, T0 + 1_000).preempt == []  # not waiting long yet
    plan = sched.plan(waiting, running, T0 + 61_000)
    assert plan.start == [] and [r.work_item_id for r in plan.preempt] == ["b1"]


@pytest.mark.parametrize(
    "case",
    [
        ({"timeouts": {"start_deadline_ms": 2_000}}, {"busy_slots": 2}),
        ({"deadline_ms": T0 + 2_500}, {"busy_slots": 2}),
    ],
)
def test_a_decline_publishes_nothing_of_other_groups_queues__MW_11_2_b(
    tmp_path: Path, case: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    """The decline goes into the offering Group's log (``work.decline_offer``): what it says
    is the same whether other Groups queue 2 or 40 WorkItems at this agent."""
    fields, load = case
    logged = []
    for others in (2, 40):
        w = make_world(tmp_path / f"{others}.db")
        w.authorize("a")
        offer_id = w.offer("a", w.workers[0])
        d = ADMISSION.decide(request(contract(**fields), queued_total=others, **load))
        assert not isinstance(d, Accept)
        body = {"work_item_id": "a", "offer_id": offer_id, "reason": d.reason, "detail": d.detail}
        (ev,) = w.ok(w.workers[0], "work.decline_offer", body).events
        logged.append(ev.body["detail"])
    assert logged[0] == logged[1], logged
