"""The scheduling Commands: ``group.set_priority`` (a Group's priority, by policy or the
MissionOwner, never a Coordinator, MW-11.1-c/d) and ``work.disclose_schedule`` (the owner's
schedule disclosure, a closed shape, MW-11.2-a/b). Refusals write nothing; the log verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from missionweave.authority import verify_log
from missionweave.protocol import Actor
from tests.support.world import World, make_world


def _disclosure(w: World, wid: str, epoch: int, **over: Any) -> dict[str, Any]:
    now = w.clock.now
    body: dict[str, Any] = {
        "work_item_id": wid,
        "ownership_epoch": epoch,
        "start_window": {"earliest_ms": now, "latest_ms": now + 60_000},
        "completion_estimate_ms": now + 120_000,
        "confidence": "medium",
        "capacity": {"state": "busy", "free_slots": 0, "queue_depth": 2},
        "compute_ms": 60_000,
    }
    body.update(over)
    return body


def _queued(w: World, wid: str) -> tuple[Actor, int]:
    w.authorize(wid)
    ada = w.workers[0]
    r = w.accept(ada, wid, w.offer(wid, ada))
    return ada, int(r.reply.get("ownership_epoch") or r.events[0].body["ownership_epoch"])


def test_the_owner_discloses_its_schedule_to_the_group__MW_11_2_a(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    ada, epoch = _queued(w, "w1")
    r = w.submit(ada, "work.disclose_schedule", _disclosure(w, "w1", epoch))
    assert r.accepted, r.rejection
    (ev,) = r.events
    assert ev.type == "work.schedule_disclosed" and ev.work_item_id == "w1"
    assert ev.body["start_window"]["latest_ms"] == w.clock.now + 60_000
    assert ev.body["capacity"] == {"state": "busy", "free_slots": 0, "queue_depth": 2}
    verify_log(w.authority.store, w.group, w.authority.public_key)


@pytest.mark.parametrize(
    ("over", "code"),
    [
        ({"other_group": {"group_id": "g2", "queue": ["x"]}}, "invalid_body"),  # no extra field
        (
            {"capacity": {"state": "busy", "free_slots": 0, "queue_depth": 1, "groups": ["g2"]}},
            "invalid_body",
        ),
        ({"confidence": "0.9"}, "invalid_body"),
        ({"completion_estimate_ms": 1}, "invalid_body"),
        ({"compute_ms": -1}, "invalid_body"),
        ({"ownership_epoch": 99}, "not_owner"),
    ],
)
def test_a_disclosure_of_another_shape_or_epoch_is_refused_and_writes_nothing__MW_11_2_b(
    tmp_path: Path, over: dict[str, Any], code: str
) -> None:
    w = make_world(tmp_path / "a.db")
    ada, epoch = _queued(w, "w1")
    head = w.authority.head(w.group)
    r = w.submit(ada, "work.disclose_schedule", _disclosure(w, "w1", epoch, **over))
    assert r.rejection is not None and r.rejection.code == code, r
    assert w.authority.head(w.group) == head


def test_only_the_owner_discloses__MW_11_2_b(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    _, epoch = _queued(w, "w1")
    r = w.submit(w.workers[1], "work.disclose_schedule", _disclosure(w, "w1", epoch))
    assert r.rejection is not None and r.rejection.code == "not_owner"


def test_a_groups_priority_is_set_by_policy_or_the_mission_owner_never_a_coordinator__MW_11_1_c(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    carl = Actor.generate("carl")
    w.ok(
        w.coordinator,
        "member.add",
        {
            "agent_id": carl.agent_id,
            "public_key": carl.public_key,
            "roles": ["coordinator", "worker"],
        },
    )
    carl.membership_epochs[w.group] = 1
    head = w.authority.head(w.group)
    r = w.submit(carl, "group.set_priority", {"priority_class": "critical", "weight": 10})
    assert r.rejection is not None and r.rejection.code == "role_not_allowed"
    assert w.authority.head(w.group) == head
    for bad in [
        {"priority_class": "urgent", "weight": 1},
        {"priority_class": "high"},
        {"priority_class": "high", "weight": 0},
        {"priority_class": "high", "weight": "2"},
        {"priority_class": "high", "weight": 1001},
        {"priority_class": "high", "weight": 2, "mission_id": "m1"},
    ]:
        r = w.submit(w.coordinator, "group.set_priority", bad)
        assert r.rejection is not None and r.rejection.code == "invalid_body", bad
    mo = Actor.generate("mona")  # a MissionOwner, nothing else
    w.ok(
        w.coordinator,
        "member.add",
        {"agent_id": mo.agent_id, "public_key": mo.public_key, "roles": ["mission_owner"]},
    )
    mo.membership_epochs[w.group] = 1
    r = w.submit(mo, "group.set_priority", {"priority_class": "low", "weight": 1})
    assert r.accepted, r.rejection
    assert r.events[0].body["set_by"] == "mona"
    r = w.submit(w.coordinator, "group.set_priority", {"priority_class": "high", "weight": 3})
    assert r.accepted, r.rejection
    (ev,) = r.events
    assert ev.type == "group.priority_set"
    assert ev.body == {
        "priority_class": "high",
        "weight": 3,
        "effective_weight_milli": 6000,
        "set_by": w.coordinator.agent_id,
    }
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_the_agents_projection_keeps_the_latest_priority_and_rebuilds_it__MW_11_1_b(
    tmp_path: Path,
) -> None:
    from missionweave.worker._state import LocalState

    w = make_world(tmp_path / "a.db")
    assert w.submit(
        w.coordinator, "group.set_priority", {"priority_class": "critical", "weight": 5}
    ).accepted
    assert w.submit(
        w.coordinator, "group.set_priority", {"priority_class": "low", "weight": 3}
    ).accepted
    for name in ("first.db", "replayed.db"):  # a fresh file is rebuilt by replaying the log
        state = LocalState(tmp_path / name, w.workers[0].agent_id)
        assert state.group_weight(w.group) is None
        for e in w.authority.all_events(w.group):
            state.apply(e)
        assert state.group_weight(w.group) == 1.5  # low (0.5) × 3: the latest, not the largest
        state.close()


def test_a_started_item_discloses_its_schedule__MW_11_2_a(tmp_path: Path) -> None:
    """Disclosure on start and on a material change while it runs: ``active`` is disclosable
    (the Authority knew no state ``running``, so every disclosure of an active item was
    refused); a finished one is not."""
    w = make_world(tmp_path / "a.db")
    ada, epoch = _queued(w, "w1")
    w.start(ada, "w1")
    assert w.item("w1")["state"] == "active"
    r = w.submit(ada, "work.disclose_schedule", _disclosure(w, "w1", epoch))
    assert r.accepted, r.rejection
    body = w.leased("w1", **w.report("w1", ada))
    w.ok(ada, "work.submit", body)
    r = w.submit(ada, "work.disclose_schedule", _disclosure(w, "w1", epoch))
    assert r.rejection is not None and r.rejection.code == "invalid_state"
