"""The scheduler under adversarial inputs (a seeded fuzz and the cases it found): it never
starts more than the free slots, never exceeds a quota, starts the oldest overdue item first,
never charges a slot twice, and forgets Missions long gone (MW-11.1-c/d/e)."""

from __future__ import annotations

import math
import random

from missionweave.worker._scheduler import QueuedItem, RunningItem, Scheduler

T0 = 1_700_000_000_000


def _check(s: Scheduler, queues, running, now, quotas):
    p = s.plan(queues, running, now)
    free = s.slots - len(running)
    assert len(p.start) <= max(0, free), (len(p.start), free)
    held = {}
    for r in running:
        held[r.group_id] = held.get(r.group_id, 0) + 1
    started_ids = [(i.group_id, i.work_item_id) for i in p.start]
    assert len(set(started_ids)) == len(started_ids), "started twice"
    for i in p.start:
        held[i.group_id] = held.get(i.group_id, 0) + 1
        assert i.start_deadline_ms is None or now + s.start_margin_ms < i.start_deadline_ms
    for g, q in quotas.items():
        before = sum(1 for r in running if r.group_id == g)
        assert held.get(g, 0) <= max(q, before), (g, held.get(g), q)
    for v in s.virtual_times().values():
        assert not math.isnan(v)
    if s.max_wait_ms is not None and p.start:
        open_g = {
            g for g in queues if sum(1 for r in running if r.group_id == g) < quotas.get(g, s.slots)
        }
        overdue = [
            i
            for g in open_g
            for i in queues[g]
            if i.queued_at_ms <= now - s.max_wait_ms
            and (i.start_deadline_ms is None or now + s.start_margin_ms < i.start_deadline_ms)
        ]
        if overdue:
            oldest = min(overdue, key=lambda i: i.queued_at_ms)
            assert p.start[0].queued_at_ms == oldest.queued_at_ms
    return p


def test_fuzz_never_overfills_slots_or_quotas_and_honours_the_bound__MW_11_1_c() -> None:
    rnd = random.Random(7)
    for _trial in range(300):
        ngroups = rnd.randint(1, 5)
        groups = [f"g{k}" for k in range(ngroups)]
        weights = {g: rnd.choice([1e-300, 1e-9, 1.0, 3.0, 1e9, 1e300]) for g in groups}
        quotas = {g: rnd.randint(1, 4) for g in groups if rnd.random() < 0.5}
        slots = rnd.randint(1, 8)
        s = Scheduler(
            slots,
            max_wait_ms=rnd.choice([None, 0, 1000, 60_000]),
            start_margin_ms=rnd.choice([0, 500]),
            weights=weights,
            quotas=quotas,
        )
        now = T0
        running: list[RunningItem] = []
        n = 0
        for _step in range(40):
            now += rnd.choice([-5000, -1, 0, 1, 10, 1000, 10**6])  # clock may go back
            queues = {}
            for g in groups:
                k = rnd.choice([0, 1, 5, 50])
                items = []
                for _ in range(k):
                    n += 1
                    items.append(
                        QueuedItem(
                            g,
                            f"w{n}",
                            f"m{rnd.randint(0, 2000)}",
                            1,
                            rnd.choice([None, now - 1, now, now + 10, now + 10**7]),
                            now - rnd.randint(0, 10**6),
                        )
                    )
                if items:
                    queues[g] = items
            # running items vanish at random
            running = [r for r in running if rnd.random() < 0.7]
            p = _check(s, queues, running, now, quotas)
            running += [
                RunningItem(i.group_id, i.work_item_id, now, rnd.random() < 0.5, i.mission_id)
                for i in p.start
            ]


def test_a_clock_that_goes_back_charges_nothing_twice__MW_11_1_d() -> None:
    """The clock reads one second earlier once: the Group is charged for what it held, once."""
    s = Scheduler(2)
    q = {"a": [QueuedItem("a", "x", "m", 1, None, T0)]}
    s.plan(q, [], T0)  # x starts, prepaid 1000
    r = [RunningItem("a", "x", T0, True, "m")]
    s.plan({}, r, T0 + 2000)
    vt1 = s.virtual_times()["a"]  # 2000 charged
    s.plan({}, r, T0 + 1000)  # clock goes back 1 s
    s.plan({}, r, T0 + 3000)
    assert s.virtual_times()["a"] == vt1 + 1000, s.virtual_times()


def test_an_item_listed_twice_starts_once__MW_11_1_e() -> None:
    s = Scheduler(4)
    it = QueuedItem("a", "x", "m", 1, None, T0)
    p = s.plan({"a": [it, it]}, [], T0)
    assert len(p.start) == 1, p.start


def test_missions_long_gone_are_forgotten__MW_11_1_d() -> None:
    s = Scheduler(1)
    for i in range(5000):
        s.plan({"g": [QueuedItem("g", f"w{i}", f"m{i}", 1, None, T0 + i)]}, [], T0 + i)
    assert len(s._missions["g"].vt) < 100, len(s._missions["g"].vt)
