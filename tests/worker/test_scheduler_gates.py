"""Risk gates and resource fit in the agent's scheduler (spec 11.1, MW-11.1-d): pure plans on a
fake clock, scheduling metadata only."""

from __future__ import annotations

from missionweave.worker._gates import RiskGate, demand
from missionweave.worker._scheduler import QueuedItem, RunningItem, Scheduler
from tests.support.scheduler_sim import simulate

T0 = 1_700_000_000_000


def _q(
    g: str,
    wid: str,
    *,
    risk: str = "low",
    approved: bool = False,
    res: dict[str, int] | None = None,
    at: int = T0,
) -> QueuedItem:
    return QueuedItem(
        g, wid, "m", 1, None, at, risk_class=risk, approved=approved, resources=demand(res or {})
    )


def test_a_risk_class_that_needs_an_approval_waits_for_it__MW_11_1_d() -> None:
    s = Scheduler(4, risk_gate=RiskGate(approval_from="high"))
    q = {"a": [_q("a", "hi", risk="high"), _q("a", "crit", risk="critical"), _q("a", "lo")]}
    assert [i.work_item_id for i in s.plan(q, [], T0).start] == ["lo"]
    q = {"a": [_q("a", "hi", risk="high", approved=True)]}
    assert [i.work_item_id for i in s.plan(q, [], T0 + 1).start] == ["hi"]


def test_a_groups_risk_budget_holds_its_risky_items_back_not_other_groups__MW_11_1_d() -> None:
    s = Scheduler(4, risk_gate=RiskGate(budgets={"a": 2}))
    running = [RunningItem("a", "r1", T0, risk_class="high")]  # 2 units: the budget
    q = {"a": [_q("a", "m1", risk="medium"), _q("a", "l1")], "b": [_q("b", "h1", risk="high")]}
    started = {i.work_item_id for i in s.plan(q, running, T0 + 10).start}
    assert started == {"l1", "h1"}  # a's medium item would go over a's budget; b has none


def test_an_item_starts_only_where_its_resources_fit__MW_11_1_d() -> None:
    s = Scheduler(4, resources={"gpu": 1})
    q = {"a": [_q("a", "g1", res={"gpu": 1}), _q("a", "g2", res={"gpu": 1})], "b": [_q("b", "c1")]}
    started = {i.work_item_id for i in s.plan(q, [], T0).start}
    assert started == {"c1", "g1"} or started == {"c1", "g2"}  # one GPU, free slots left
    running = [RunningItem("a", "g1", T0, resources=demand({"gpu": 1}))]
    q = {"a": [_q("a", "g2", res={"gpu": 1})]}
    assert s.plan(q, running, T0 + 1).start == []


def test_an_overdue_item_waiting_for_a_resource_is_not_jumped_by_younger_ones__MW_11_1_c() -> None:
    s = Scheduler(4, resources={"gpu": 2}, max_wait_ms=60_000)
    running = [RunningItem("b", "x", T0, resources=demand({"gpu": 1}))]
    q = {
        "a": [_q("a", "old", res={"gpu": 2}, at=T0)],
        "b": [_q("b", "young", res={"gpu": 1}, at=T0 + 50_000), _q("b", "cpu", at=T0 + 50_000)],
    }
    started = [i.work_item_id for i in s.plan(q, running, T0 + 61_000).start]
    assert started == ["cpu"]  # "young" would take the GPU "old" waits for


def test_several_resources_are_shared_by_dominant_resource_fairness__MW_11_1_d() -> None:
    """Equal weights, 4 slots, 2 GPUs; Group a's items each need a GPU (dominant share 1/2),
    b's only a slot (1/4). DRF equalizes dominant shares: a runs 4/3 items on average and b
    8/3, so a gets 1/3 of the slot-time (±5 %). Plain slot-time fairness would give a 1/2."""
    out = simulate(
        Scheduler(4, resources={"gpu": 2}),
        {"a": 1_000, "b": 1_000},
        slots=4,
        horizon_ms=600_000,
        backlog=4,
        resources={"a": demand({"gpu": 1})},
    )
    share = out.shares()["a"]
    assert abs(share - 1 / 3) <= 0.05 / 3, share


def test_risk_gate_and_resources_come_from_the_workers_command_line__MW_11_1_d() -> None:
    import pytest

    from missionweave.cli._common import CliError
    from missionweave.cli._worker_sched import scheduler_options

    got = scheduler_options(
        ["gpu=2", "memory_mb=16384"], "high", ["ops=4"], ["ops", "lab"], ["lab=1"]
    )
    assert got["resources"] == {"gpu": 2, "memory_mb": 16384}
    assert got["group_quotas"] == {"lab": 1}
    assert got["risk_gate"] == RiskGate(approval_from="high", budgets={"ops": 4})
    assert scheduler_options([], None, [], ["ops"]) == {
        "resources": None,
        "risk_gate": None,
        "group_quotas": None,
    }
    for bad in [
        (["gpu"], None, []),
        (["gpu=0"], None, []),
        (["gpu=x"], None, []),
        (["gpu=1", "gpu=2"], None, []),
        ([], "urgent", []),
        ([], None, ["other=1"]),
        ([], None, ["ops=-1"]),
    ]:
        with pytest.raises(CliError, match=r"--resource|--approval-risk|--risk-budget"):
            scheduler_options(*bad, ["ops"])
    for quota in (["ops=0"], ["lab=1"], ["ops"]):
        with pytest.raises(CliError, match="--group-quota"):
            scheduler_options([], None, [], ["ops"], quota)


def test_fuzz_never_overfills_resources_risk_budgets_or_starts_unapproved__MW_11_1_d() -> None:
    import random

    from missionweave.worker._gates import RISK_ORDER, risk_rank, risk_units

    rnd = random.Random(11)
    gated_starts = 0
    for _trial in range(200):
        groups = [f"g{k}" for k in range(rnd.randint(1, 4))]
        capacity = {"gpu": rnd.randint(1, 3), "mem": rnd.randint(1, 8)}
        budgets = {g: rnd.randint(0, 5) for g in groups if rnd.random() < 0.6}
        approval = rnd.choice([None, *RISK_ORDER])
        s = Scheduler(
            rnd.randint(1, 6),
            max_wait_ms=rnd.choice([None, 1_000]),
            resources=capacity,
            risk_gate=RiskGate(approval, budgets),
        )
        now, n, running = T0, 0, []
        for _step in range(30):
            now += rnd.choice([0, 10, 1_000, 100_000])
            queues: dict[str, list[QueuedItem]] = {}
            for g in groups:
                for _ in range(rnd.choice([0, 1, 4])):
                    n += 1
                    res = {k: rnd.randint(0, 4) for k in capacity if rnd.random() < 0.5}
                    queues.setdefault(g, []).append(
                        QueuedItem(
                            g,
                            f"w{n}",
                            f"m{n % 3}",
                            1,
                            None,
                            now - rnd.randint(0, 5_000),
                            risk_class=rnd.choice(RISK_ORDER),
                            approved=rnd.random() < 0.5,
                            resources=demand(res),
                        )
                    )
            running = [r for r in running if rnd.random() < 0.7]
            p = s.plan(queues, running, now)
            assert len(running) + len(p.start) <= s.slots
            for i in p.start:
                assert (
                    approval is None or i.approved or risk_rank(i.risk_class) < risk_rank(approval)
                )
            gated_starts += sum(1 for i in p.start if i.resources and i.risk_class != "low")
            running += [
                RunningItem(
                    i.group_id, i.work_item_id, now, risk_class=i.risk_class, resources=i.resources
                )
                for i in p.start
            ]
            for k, cap in capacity.items():
                assert sum(dict(r.resources).get(k, 0) for r in running) <= cap, (k, running)
            for g, b in budgets.items():
                assert sum(risk_units(r.risk_class) for r in running if r.group_id == g) <= b
    assert gated_starts > 100  # the gates were exercised, not only bypassed


def test_an_overdue_risky_item_keeps_its_groups_risk_budget_for_itself__MW_11_1_c() -> None:
    s = Scheduler(4, risk_gate=RiskGate(budgets={"a": 2}), max_wait_ms=60_000)
    running = [RunningItem("a", "r", T0, risk_class="medium")]  # 1 of a's 2 units
    q = {
        "a": [
            _q("a", "old", risk="high", at=T0),
            _q("a", "med", risk="medium", at=T0 + 9),
            _q("a", "low", at=T0 + 9),
        ]
    }
    started = [i.work_item_id for i in s.plan(q, running, T0 + 61_000).start]
    assert started == ["low"]  # "med" would take the unit "old" waits for; "low" takes none
