"""The agent's scheduler is weighted-fair and starvation-free (spec 11.1), checked the way
Kubernetes APF checks its queueset: a fake clock, several Groups with different weights, all
backlogged, and each Group's measured share of slot-time against its weighted share — with the
old round-robin and strict priority as negative controls that must fail the same check."""

from __future__ import annotations

import pytest

from missionweave.worker._scheduler import QueuedItem, RunningItem, Scheduler
from tests.support.scheduler_sim import T0, RoundRobin, StrictPriority, simulate, weighted_shares

WEIGHTS = {"gold": 4.0, "silver": 2.0, "bronze": 1.0}
#: Different durations per Group: the shares are of slot-time, not of starts.
DURATIONS = {"gold": 1_000, "silver": 3_000, "bronze": 2_000}
HOUR = 3_600_000


def _errors(shares: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Each Group's relative error against its weighted share."""
    want = weighted_shares(weights)
    return {g: abs(shares[g] - want[g]) / want[g] for g in weights}


def test_each_groups_share_of_slot_time_is_within_5_percent_of_its_weight__MW_11_1_d() -> None:
    sched = Scheduler(slots=4, weights=WEIGHTS)
    out = simulate(sched, DURATIONS, slots=4, horizon_ms=2 * HOUR)
    errors = _errors(out.shares(), WEIGHTS)
    assert max(errors.values()) <= 0.05, (out.shares(), errors)


@pytest.mark.parametrize("control", ["round_robin", "strict_priority"])
def test_the_old_round_robin_and_strict_priority_fail_the_same_check__MW_11_1_d(
    control: str,
) -> None:
    """Negative controls: the check above can fail, and does for what spec 11.1 rules out."""
    sched = RoundRobin(4) if control == "round_robin" else StrictPriority(4, WEIGHTS)
    out = simulate(sched, DURATIONS, slots=4, horizon_ms=2 * HOUR)
    assert max(_errors(out.shares(), WEIGHTS).values()) > 0.05, out.shares()


def test_no_item_waits_past_the_bound_whatever_its_weight__MW_11_1_c() -> None:
    """A Group of weight 1 against one of weight 1000: the bound still holds for every item
    (the next free slot goes to an item that waited that long), and without it, it would not."""
    weights = {"heavy": 1000.0, "light": 1.0}
    durations = {"heavy": 1_000, "light": 1_000}
    bound = 30_000
    fair = simulate(
        Scheduler(slots=2, weights=weights, max_wait_ms=bound),
        durations,
        slots=2,
        horizon_ms=HOUR,
        backlog=4,
    )
    assert fair.max_wait_ms() <= bound + max(durations.values()), fair.max_wait_ms()
    assert fair.waits_ms["light"], "the light Group was served"
    unbounded = simulate(
        Scheduler(slots=2, weights=weights), durations, slots=2, horizon_ms=HOUR, backlog=4
    )
    assert unbounded.max_wait_ms() > bound + max(durations.values())


def test_a_tight_deadline_cannot_jump_an_old_item_of_another_mission__MW_11_1_c() -> None:
    """The P3 case: one Group, one slot; Mission ``old``'s item has waited 10 minutes, and a
    Coordinator queues Mission ``rush``'s items with 5 s start deadlines. The old item gets the
    next slot, and ``rush`` never gets two slots in a row while ``old`` waits."""
    old = QueuedItem("g", "old-1", "old", 1, None, T0 - 600_000)
    rush = [QueuedItem("g", f"rush-{i}", "rush", 1, T0 + 5_000, T0 - 1) for i in range(5)]
    sched = Scheduler(slots=1, max_wait_ms=300_000)
    plan = sched.plan({"g": [*rush, old]}, [], T0)
    assert [i.work_item_id for i in plan.start] == ["old-1"]
    # below the bound too: Missions of one Group share its slots, whatever their deadlines
    sched = Scheduler(slots=1)
    young = [QueuedItem("g", f"old-{i}", "old", 1, None, T0 - 1_000) for i in range(3)]
    out, queue = [], [*rush, *young]
    for step in range(6):  # each item ends as the next plan begins: half a second each
        (it,) = sched.plan({"g": queue}, [], T0 + step * 500).start
        out.append(it.mission_id)
        queue.remove(it)
    assert out == ["old", "rush", "old", "rush", "old", "rush"] or out == [
        "rush",
        "old",
        "rush",
        "old",
        "rush",
        "old",
    ]


def test_an_idle_group_banks_no_credit__MW_11_1_d() -> None:
    """A Group that had nothing queued for an hour re-enters at the others' virtual time: it
    does not take every slot for the next hour."""
    sched = Scheduler(slots=1)
    busy = [QueuedItem("busy", f"b{i}", "m", 1, None, T0) for i in range(100)]
    now = T0
    for _ in range(60):  # an hour of one-minute items (each ends as the next plan begins)
        (it,) = sched.plan({"busy": busy}, [], now).start
        busy.remove(it)
        now += 60_000
    back = [QueuedItem("back", f"k{i}", "m", 1, None, now) for i in range(10)]
    starts = []
    for _ in range(6):
        (it,) = sched.plan({"busy": busy, "back": back}, [], now).start
        (busy if it.group_id == "busy" else back).remove(it)
        starts.append(it.group_id)
        now += 60_000
    assert starts.count("busy") >= 2, starts


def test_a_weight_change_reorders_the_queue_at_once_and_quotas_cap_a_group__MW_11_1_d() -> None:
    sched = Scheduler(slots=4, quotas={"a": 1})
    queues = {
        "a": [QueuedItem("a", f"a{i}", "m", 1, None, T0) for i in range(4)],
        "b": [QueuedItem("b", f"b{i}", "m", 1, None, T0) for i in range(4)],
    }
    plan = sched.plan(queues, [], T0)
    assert sorted(i.group_id for i in plan.start) == ["a", "b", "b", "b"]  # a's quota is 1
    sched = Scheduler(slots=1)
    sched.set_weight("b", 9.0)
    picks = []
    for step in range(10):  # one-second items, each ending as the next plan begins
        now = T0 + step * 1_000
        (it,) = sched.plan(queues, [], now).start
        queues[it.group_id].remove(it)
        queues[it.group_id].append(
            QueuedItem(it.group_id, it.work_item_id + "'", "m", 1, None, now)
        )
        picks.append(it.group_id)
    assert picks.count("b") >= 8, picks
    with pytest.raises(ValueError):
        sched.set_weight("b", 0)


def test_group_weights_come_from_the_workers_command_line__MW_11_1_d() -> None:
    from missionweave.cli._common import CliError
    from missionweave.cli._worker import parse_group_weights

    assert parse_group_weights(["ops=3", "research=0.5"], ["ops", "research"]) == {
        "ops": 3.0,
        "research": 0.5,
    }
    for bad in [
        ["ops"],
        ["ops=0"],
        ["ops=-1"],
        ["ops=x"],
        ["=2"],
        ["ops=inf"],
        ["other=1"],
        ["ops=2", "ops=3"],
    ]:
        with pytest.raises(CliError, match="--group-weight"):
            parse_group_weights(bad, ["ops", "research"])


def test_the_scheduler_sees_metadata_only__MW_13_3_e() -> None:
    """What the scheduler is given of a WorkItem — queued or running — is scheduling metadata:
    ids, epochs, times, lease length, interruptibility, risk class, approval, resource sizes and
    a duration estimate; never contract text, input, checkpoint or outputs (MW-13.3-e). A
    field added to either type must be added here, knowingly."""
    import dataclasses

    metadata = {
        "group_id",
        "work_item_id",
        "mission_id",
        "ownership_epoch",
        "start_deadline_ms",
        "queued_at_ms",
        "lease_ms",
        "started_at_ms",
        "interruptible",
        "risk_class",
        "approved",
        "resources",
        "estimate_ms",
    }
    for kind in (QueuedItem, RunningItem):
        fields = {f.name: f.type for f in dataclasses.fields(kind)}
        assert set(fields) <= metadata, (kind.__name__, set(fields) - metadata)
        assert all(t in ("str", "int", "int | None", "bool", "Demand") for t in fields.values()), (
            fields
        )
