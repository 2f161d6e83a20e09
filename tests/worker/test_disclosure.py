"""Schedule disclosure (spec 11.2): on acceptance and on material changes the agent tells each
WorkItem's Group its start window, completion estimate, confidence, capacity state and compute
time (MW-11.2-a), computed from that Group's data only — nothing of another Group appears in
what it publishes (MW-11.2-b)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from missionweave.protocol import Actor
from missionweave.worker._disclosure import MATERIAL_SHIFT_MS, estimate, material
from missionweave.worker._dispatch import Dispatcher
from missionweave.worker._scheduler import QueuedItem, Scheduler
from missionweave.worker._slots import SlotBoard
from missionweave.worker._state import LocalState
from tests.support.world import make_world

T0 = 1_800_000_000_000


def test_the_window_comes_from_the_groups_own_queue_and_the_bound__MW_11_2_a() -> None:
    q = [QueuedItem("a", f"w{i}", "m", 1, None, T0 + i, estimate_ms=10_000) for i in range(5)]
    d = estimate(q[3], q, slots=2, free_slots=0, max_wait_ms=None, now_ms=T0 + 10)
    # 3 of its Group ahead: at best 1 round of 10 s, at worst 4 items on one slot
    assert (d.earliest_ms, d.latest_ms, d.completion_ms) == (T0 + 10_010, T0 + 40_010, T0 + 50_010)
    assert (d.confidence, d.capacity, d.queue_depth, d.compute_ms) == ("low", "busy", 5, 10_000)
    bounded = estimate(q[3], q, slots=2, free_slots=0, max_wait_ms=15_000, now_ms=T0 + 10)
    assert bounded.latest_ms == T0 + 3 + 15_000 + 10_000 and bounded.confidence == "medium"
    first = estimate(q[0], q, slots=2, free_slots=1, max_wait_ms=None, now_ms=T0 + 10)
    assert (first.earliest_ms, first.latest_ms, first.confidence, first.capacity) == (
        T0 + 10,
        T0 + 10,
        "high",
        "available",
    )
    with pytest.raises(ValueError, match="own Group"):
        estimate(
            q[0],
            [*q, QueuedItem("b", "x", "m", 1, None, T0)],
            slots=2,
            free_slots=0,
            max_wait_ms=None,
            now_ms=T0,
        )


def test_only_a_material_change_is_disclosed_again__MW_11_2_a() -> None:
    q = [QueuedItem("a", f"w{i}", "m", 1, None, T0, estimate_ms=60_000) for i in range(4)]
    d = estimate(q[3], q, slots=1, free_slots=0, max_wait_ms=None, now_ms=T0)
    assert material(None, d, T0)
    later = estimate(q[3], q, slots=1, free_slots=0, max_wait_ms=None, now_ms=T0 + 20_000)
    assert not material(d, later, T0 + 20_000)  # 20 s later, same items ahead: same story
    sooner = estimate(q[3], q[2:], slots=1, free_slots=0, max_wait_ms=None, now_ms=T0 + 1_000)
    assert d.latest_ms - sooner.latest_ms > MATERIAL_SHIFT_MS and material(d, sooner, T0 + 1_000)


async def test_what_a_group_is_told_names_nothing_of_another_group__MW_11_2_b(
    tmp_path: Path,
) -> None:
    """An agent with one slot (taken) works in two Groups; each has queued WorkItems of its own
    Missions. Everything published to a Group is searched for every identifier of the other
    Group — its id, its Missions, its WorkItems — and for the other's queue length."""
    groups = {
        "alpha-ops": {"mission-apollo": ["apollo-build", "apollo-test", "apollo-ship"]},
        "beta-research": {
            "mission-zephyr": ["zephyr-crawl"],
            "mission-nimbus": [
                "nimbus-fit",
                "nimbus-eval",
                "nimbus-plot",
                "nimbus-report",
                "nimbus-archive",
            ],
        },
    }
    published: dict[str, list[dict[str, Any]]] = {g: [] for g in groups}

    async def disclose(group_id: str, bodies: list[dict[str, Any]]) -> None:
        published[group_id].extend(bodies)

    state = LocalState(tmp_path / "s.db", "ada")
    board = SlotBoard(1)
    board.reserve(("alpha-ops", "running-one"), hold_s=60)
    disp = Dispatcher(
        Actor.generate("ada"),
        state,
        list(groups),
        Scheduler(1, max_wait_ms=600_000),
        board,
        disclose=disclose,
        clock=lambda: T0 + 5_000,
    )
    waits = []
    for g, missions in groups.items():
        for m, items in missions.items():
            for i, wid in enumerate(items):
                it = QueuedItem(g, wid, m, 1, None, T0 + i, estimate_ms=30_000)
                waits.append(asyncio.create_task(disp.wait_for_slot(it, declared=True)))
    await asyncio.sleep(0)
    disp.dispatch_once()
    await disp._publish_disclosures()
    try:
        for g, missions in groups.items():
            own = {w for items in missions.values() for w in items}
            assert {b["work_item_id"] for b in published[g]} == own  # each disclosed once
            (other,) = set(groups) - {g}
            text = json.dumps(published[g])
            foreign = [other, *groups[other], *(w for ws in groups[other].values() for w in ws)]
            assert [s for s in foreign if s in text] == []
            told = {json.dumps(b["capacity"], sort_keys=True) for b in published[g]}
            assert told == {
                json.dumps(
                    {"free_slots": 0, "queue_depth": len(own), "state": "busy"}, sort_keys=True
                )
            }
            # the bound caps every window: queued + 10 min + one execution
            assert all(
                b["start_window"]["latest_ms"] <= T0 + 10 + 600_000 + 30_000 for b in published[g]
            )
        before = {g: len(b) for g, b in published.items()}
        disp.dispatch_once()  # nothing changed: nothing is disclosed again
        await disp._publish_disclosures()
        assert {g: len(b) for g, b in published.items()} == before
    finally:
        disp.close("test over")
        await asyncio.gather(*waits, return_exceptions=True)
        state.close()


def test_an_item_waiting_for_an_approval_is_disclosed_with_low_confidence__MW_11_2_a() -> None:
    q = [QueuedItem("a", "w0", "m", 1, None, T0, estimate_ms=1_000)]
    sure = estimate(q[0], q, slots=1, free_slots=1, max_wait_ms=None, now_ms=T0, declared=True)
    held = estimate(
        q[0], q, slots=1, free_slots=1, max_wait_ms=None, now_ms=T0, declared=True, held=True
    )
    assert (sure.confidence, held.confidence) == ("high", "low")
    assert material(sure, held, T0)  # approval granted or not: the Group hears of it


async def test_an_item_started_at_once_is_disclosed_on_start__MW_11_2_a(tmp_path: Path) -> None:
    """An item that gets a free slot at once (accepted and started in one request) is
    disclosed too, and the real Authority takes that disclosure once the item is active."""
    w = make_world(tmp_path / "a.db")
    ada = w.workers[0]
    w.authorize("w1")
    epoch = int(w.accept(ada, "w1", w.offer("w1", ada)).reply["ownership_epoch"])
    results = []

    async def disclose(group_id: str, bodies: list[dict[str, Any]]) -> None:
        for b in bodies:
            cmd = ada.command("work.disclose_schedule", group_id, b, issued_at_ms=w.clock.now)
            results.append(w.authority.submit(cmd))

    state = LocalState(tmp_path / "s.db", ada.agent_id)
    disp = Dispatcher(ada, state, [w.group], Scheduler(2), SlotBoard(2), disclose=disclose,
                      clock=w.clock)  # fmt: skip
    it = QueuedItem(w.group, "w1", w.mission, epoch, None, w.clock.now, estimate_ms=30_000)
    try:
        waiting = asyncio.create_task(disp.wait_for_slot(it))
        await asyncio.sleep(0)
        disp.dispatch_once()
        await waiting  # the slot is granted at once
        w.start(ada, "w1")  # the runtime's work.start
        await disp._publish_disclosures()
    finally:
        disp.close("test over")
        state.close()
    [r] = results
    assert r.accepted, r.rejection
    [ev] = r.events
    assert ev.body["start_window"] == {"earliest_ms": w.clock.now, "latest_ms": w.clock.now}
    assert ev.body["confidence"] == "high" and ev.body["compute_ms"] == 30_000
    assert ev.body["capacity"] == {"state": "available", "free_slots": 1, "queue_depth": 1}
