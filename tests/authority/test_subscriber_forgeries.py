"""Forged Events against a Subscriber that checks the Authority's signature only on the newest
Event of each linked run (docs/authority.md): a forgery — a stranger's signature over a
self-consistent hash — is refused wherever it sits in a batch, never applied, never taken for
a fork of the log (which would end the subscription), and the replay heals the gap
(MW-16-a, MW-16-b)."""

from __future__ import annotations

from typing import Any

import pytest

from missionweave.authority.client import MemoryCursorStore, Subscriber
from missionweave.protocol import Event, SigningKey, seal_event
from tests.support.world import World

STRANGER = SigningKey.generate()


@pytest.fixture
def log(world: World) -> list[Event]:
    for i in range(4):
        world.ok(world.coordinator, "mission.create", {"mission_id": f"x{i}", "title": "t"})
    return world.authority.all_events(world.group)


def forge(ev: Event, **update: Any) -> Event:
    """The same sequence and link, another body, the hash recomputed, a stranger's signature."""
    return seal_event(
        ev.model_copy(update={"body": {**ev.body, "injected": True}, **update}), STRANGER
    )


class Applied:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, ev: Event) -> None:
        self.events.append(ev)

    @property
    def seqs(self) -> list[int]:
        assert all("injected" not in e.body for e in self.events)
        return [e.seq for e in self.events]


def subscriber(world: World) -> tuple[Subscriber, Applied]:
    applied = Applied()
    sub = Subscriber(
        "ws://127.0.0.1:9/v1/stream",
        world.workers[0],
        [world.group],
        MemoryCursorStore(),
        applied,
        authority_public_key=world.authority.public_key,
    )
    return sub, applied


async def test_a_forgery_then_the_real_event_in_one_batch__MW_16_b(
    world: World, log: list[Event]
) -> None:
    sub, applied = subscriber(world)
    await sub._deliver([log[0], forge(log[1]), log[1]])
    assert applied.seqs == [1, 2]


async def test_a_fresh_subscriber_applies_nothing_across_a_gap__MW_16_b(
    world: World, log: list[Event]
) -> None:
    """Events 3 and 4 arrive first, at a subscriber with no Event yet to link them to: none is
    applied and the cursor stays at 0 until 1 and 2 come; then all four, in order."""
    sub, applied = subscriber(world)
    await sub._deliver([log[2], log[3]])
    assert applied.seqs == [] and sub.cursor(world.group) == 0
    await sub._deliver([log[0], log[1]])
    assert applied.seqs == [1, 2, 3, 4] and sub.cursor(world.group) == 4


async def test_a_forgery_of_an_event_held_behind_a_gap__MW_16_b(
    world: World, log: list[Event]
) -> None:
    sub, applied = subscriber(world)
    await sub._deliver([log[0], log[2]])
    await sub._deliver([forge(log[2])])
    await sub._deliver([log[1]])
    assert applied.seqs == [1, 2, 3]


async def test_a_forgery_that_does_not_link__MW_16_b(world: World, log: list[Event]) -> None:
    sub, applied = subscriber(world)
    await sub._deliver([forge(log[0], prev_hash="f" * 64)])
    await sub._deliver([log[0]])
    assert applied.seqs == [1]


@pytest.mark.parametrize("where", [1, 2])
async def test_a_forgery_inside_or_at_the_end_of_a_batch__MW_16_a(
    world: World, log: list[Event], where: int
) -> None:
    sub, applied = subscriber(world)
    batch = [*log[:where], forge(log[where]), *log[where + 1 :]]
    await sub._deliver(batch)
    assert applied.seqs == list(range(1, where + 1))  # stops before the forgery
    await sub._deliver(log)  # the replay after the reconnect
    assert applied.seqs == [e.seq for e in log]


async def test_an_event_whose_hash_does_not_match_is_refused__MW_16_b(
    world: World, log: list[Event]
) -> None:
    sub, applied = subscriber(world)
    bad = log[1].model_copy(update={"body": {"injected": True}})  # hash not recomputed
    await sub._deliver([log[0], bad, log[2]])
    assert [e.seq for e in applied.events] == [1]


async def test_a_bad_signature_on_authentic_content_inside_a_run_is_vouched_for(
    world: World, log: list[Event]
) -> None:
    """Content the newest Event's signature vouches for through the chain is authentic even if
    its own signature bytes were damaged in transit: it is applied (by design, see
    docs/authority.md); ``events verify`` would still flag the stored copy."""
    sub, applied = subscriber(world)
    damaged = log[1].model_copy(update={"signature": seal_event(log[1], STRANGER).signature})
    await sub._deliver([log[0], damaged, log[2]])
    assert [e.event_id for e in applied.events] == [e.event_id for e in log[:3]]
