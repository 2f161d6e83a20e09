"""The recipient side of section 16: GroupSequencer directly, Subscriber over a real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from missionweave.authority import Authority, verify_snapshot
from missionweave.authority.client import (
    AuthorityClient,
    EventVerificationError,
    GroupSequencer,
    MemoryCursorStore,
    SnapshotVerificationError,
    SqliteCursorStore,
    Subscriber,
    SubscriptionRefused,
)
from missionweave.dev import free_port
from missionweave.protocol import Actor, Event, SigningKey, seal_event
from tests.authority.subscribing import Recorder, restore_then_follow, subscriber
from tests.support.serving import LiveServer, mission_cmd, tamper, windowed_world
from tests.support.waits import WAIT_S, eventually
from tests.support.world import World

# ------------------------------------------------------------------ the ordering core


def drain(seq: GroupSequencer, out: list[int]) -> None:
    while (ev := seq.ready()) is not None:
        out.append(ev.seq)
        seq.commit(ev)


@pytest.fixture
def log(world: World) -> list[Event]:
    for i in range(3):
        world.ok(world.coordinator, "mission.create", {"mission_id": f"x{i}", "title": "t"})
    return world.authority.all_events(world.group)


def test_out_of_order_buffered_and_cursor_never_crosses_gap__MW_16_b(
    world: World, log: list[Event]
) -> None:
    seq = GroupSequencer(world.group, world.authority.public_key)
    by_seq = {e.seq: e for e in log}
    processed: list[int] = []
    cursors = []
    for s in [3, 1, 5, 2, 6, 4]:
        assert seq.offer(by_seq[s]) == "buffered"
        drain(seq, processed)
        cursors.append(seq.cursor)
    assert cursors == [0, 1, 1, 3, 3, 6]
    assert processed == [1, 2, 3, 4, 5, 6]
    seq2 = GroupSequencer(world.group, world.authority.public_key)
    for s in [2, 4, 3]:
        seq2.offer(by_seq[s])
    drain(seq2, processed)
    assert seq2.cursor == 0 and seq2.buffered == [2, 3, 4]  # the gap at 1 holds everything


def test_duplicates_dropped_by_event_id__MW_16_a(world: World, log: list[Event]) -> None:
    seq = GroupSequencer(world.group, world.authority.public_key)
    assert seq.offer(log[2]) == "buffered"
    assert seq.offer(log[2]) == "duplicate"  # held, same id
    assert seq.offer(log[0]) == "buffered"
    out: list[int] = []
    drain(seq, out)
    assert seq.offer(log[0]) == "duplicate"  # already processed
    assert seq.offer(log[1]) == "buffered"
    drain(seq, out)
    assert out == [1, 2, 3] and seq.cursor == 3


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_arrival_order_with_duplicates_processes_each_event_once__MW_16_a(
    world: World, log: list[Event], data: st.DataObject
) -> None:
    arrivals = data.draw(st.lists(st.sampled_from(log), min_size=len(log)))
    arrivals += data.draw(st.permutations(log))  # every Event arrives at least once
    seq = GroupSequencer(world.group, world.authority.public_key)
    out: list[int] = []
    for ev in arrivals:
        seq.offer(ev)
        before = seq.cursor
        drain(seq, out)
        assert seq.cursor >= before
        assert out == list(range(1, seq.cursor + 1))  # contiguous, never across a gap
    assert out == [e.seq for e in log]


def test_forged_or_foreign_events_are_invalid(world: World, log: list[Event]) -> None:
    seq = GroupSequencer(world.group, world.authority.public_key)
    altered = log[0].model_copy(update={"body": {"group_id": "evil"}})
    other_key = seal_event(log[0], SigningKey.generate())
    foreign = log[0].model_copy(update={"group_id": "g2"})
    assert [seq.offer(e) for e in (altered, other_key, foreign)] == ["invalid"] * 3
    assert seq.ready() is None and seq.cursor == 0


def test_fork_is_refused(world: World, log: list[Event]) -> None:
    key = world.authority.key  # only the Authority can sign a fork
    seq = GroupSequencer(world.group, world.authority.public_key)
    seq.offer(log[1])
    rival = seal_event(log[1].model_copy(update={"body": {"forked": True}}), key)
    with pytest.raises(EventVerificationError, match="conflicting"):
        seq.offer(rival)
    seq2 = GroupSequencer(world.group, world.authority.public_key, cursor=1, last_hash=log[0].hash)
    unlinked = seal_event(log[1].model_copy(update={"prev_hash": "f" * 64}), key)
    assert seq2.offer(unlinked) == "buffered"
    with pytest.raises(EventVerificationError, match="broken link"):
        seq2.ready()
    assert seq2.cursor == 1


def test_reset_to_snapshot_links_the_next_event__MW_16_e(world: World, log: list[Event]) -> None:
    seq = GroupSequencer(world.group, world.authority.public_key)
    seq.offer(log[4])
    seq.reset(4, log[3].hash)  # a snapshot taken at 4 carries Event 4's hash as head_hash
    out: list[int] = []
    drain(seq, out)
    assert out == [5] and seq.cursor == 5


def test_sqlite_cursor_store_survives_reopen(tmp_path: Path) -> None:
    store = SqliteCursorStore(tmp_path / "agent" / "cursors.db")
    assert store.get("g1") == 0 and store.last_hash("g1") is None
    store.set("g1", 7, "ab" * 32)
    store.set("g2", 1, "cd" * 32)
    store.close()
    again = SqliteCursorStore(tmp_path / "agent" / "cursors.db")
    assert (again.get("g1"), again.last_hash("g1"), again.get("g2")) == (7, "ab" * 32, 1)
    again.close()


# ------------------------------------------------------------ Subscriber over a real server


@pytest.mark.both_backends
async def test_subscriber_delivers_acks_and_resumes_after_restart__MW_16_c(
    live: LiveServer, world: World, tmp_path: Path
) -> None:
    head, _ = world.authority.head(world.group)
    store = SqliteCursorStore(tmp_path / "cursors.db")
    rec = Recorder()
    sub = subscriber(live.ws_url, world, store, rec)
    task = asyncio.create_task(sub.run())
    await eventually(lambda: sub.cursor(world.group) == head)
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        await client.submit_many([mission_cmd(world, "m-a"), mission_cmd(world, "m-b")])
    await eventually(lambda: sub.cursor(world.group) == head + 2)

    def acked() -> bool:
        rows = world.authority.query(
            "SELECT seq FROM cursors WHERE agent_id=?", world.workers[0].agent_id
        )
        return rows == [{"seq": head + 2}]

    await eventually(acked)
    await sub.stop()
    await task
    store.close()
    assert [e.seq for e in rec.events] == list(range(1, head + 3))
    # a new process: the durable cursor and its hash come back from the file
    world.ok(world.coordinator, "mission.create", {"mission_id": "m-c", "title": "t"})
    store2 = SqliteCursorStore(tmp_path / "cursors.db")
    assert store2.get(world.group) == head + 2
    assert store2.last_hash(world.group) == rec.events[-1].hash
    rec2 = Recorder()
    sub2 = subscriber(live.ws_url, world, store2, rec2)
    task2 = asyncio.create_task(sub2.run())
    await eventually(lambda: sub2.cursor(world.group) == head + 3)
    await sub2.stop()
    await task2
    store2.close()
    assert [e.seq for e in rec2.events] == [head + 3]
    assert rec2.events[0].prev_hash == rec.events[-1].hash


@pytest.mark.both_backends
async def test_reconnect_replays_duplicates_delivered_once__MW_16_a__MW_16_d(
    world: World,
) -> None:
    """The server goes away while a handler is busy; after the restart the replay from the
    durable cursor repeats Events already read. Each still reaches the handler exactly once."""
    server = LiveServer(world.authority, poll_interval_s=0.05)
    await server.start()
    head, _ = world.authority.head(world.group)
    k = 3
    gate, entered = asyncio.Event(), asyncio.Event()
    seen: list[Event] = []

    async def on_event(ev: Event) -> None:
        seen.append(ev)
        if ev.seq == k:
            entered.set()
            await gate.wait()  # the durable cursor stays at k - 1 meanwhile

    store = MemoryCursorStore()
    sub = Subscriber(
        server.ws_url,
        world.workers[0],
        [world.group],
        store,
        on_event,
        authority_public_key=world.authority.public_key,
        reconnect_delay_s=0.05,
    )
    task = asyncio.create_task(sub.run())
    try:
        await asyncio.wait_for(entered.wait(), WAIT_S)
        await eventually(lambda: sub.received >= head)  # k+1..head read and held
        await server.stop()  # the server closes the socket mid-stream
        # a new Authority process on the same database appends while the server is down
        old = world.authority
        world.authority = Authority(old.db_path, old.key, clock=world.clock)
        old.close()
        for m in ("m-d1", "m-d2"):
            world.ok(world.coordinator, "mission.create", {"mission_id": m, "title": "t"})
        server.authority = world.authority
        await server.start()
        # the replay after k - 1 brings k..head again, plus the two new Events
        await eventually(lambda: sub.received >= head + (head - k + 1) + 2)
        assert sub.connections >= 2 and store.get(world.group) == k - 1
        gate.set()
        await eventually(lambda: sub.cursor(world.group) == head + 2)
    finally:
        await sub.stop()
        await task
        await server.stop()
    assert [e.seq for e in seen] == list(range(1, head + 3))
    assert len({e.event_id for e in seen}) == len(seen)
    assert sub.duplicates >= head - k + 1
    assert store.get(world.group) == head + 2


@pytest.mark.both_backends
async def test_cursor_too_old_restores_verified_snapshot_and_resumes__MW_16_e(
    tmp_path: Path,
) -> None:
    w = windowed_world(tmp_path / "a.db", window=3)
    for i in range(6):
        w.ok(w.coordinator, "mission.create", {"mission_id": f"w{i}", "title": "t"})
    assert w.authority.maybe_archive(w.group, force=True) > 0
    snap_seq, _ = w.authority.head(w.group)
    server = LiveServer(w.authority, poll_interval_s=0.05)
    await server.start()
    store = MemoryCursorStore()
    try:
        rec = await restore_then_follow(server.ws_url, w, store)
    finally:
        await server.stop()
        w.authority.close()
    (snap,) = rec.snapshots
    assert snap["seq"] == snap_seq and verify_snapshot(snap, w.authority.public_key)
    assert [e.seq for e in rec.events] == [snap_seq + 1]  # resumed after the snapshot
    assert rec.events[0].prev_hash == snap["head_hash"]
    assert store.get(w.group) == snap_seq + 1


async def test_snapshot_fetch_failure_is_retried_not_fatal__MW_16_e(tmp_path: Path) -> None:
    """When the snapshot cannot be fetched (here: the client points at a dead port) the
    Subscriber keeps reconnecting instead of dying, and its cursor does not move."""
    w = windowed_world(tmp_path / "a.db", window=3)
    for i in range(6):
        w.ok(w.coordinator, "mission.create", {"mission_id": f"w{i}", "title": "t"})
    w.authority.maybe_archive(w.group, force=True)
    server = LiveServer(w.authority)
    await server.start()
    rec = Recorder()
    store = MemoryCursorStore()
    dead = AuthorityClient(f"http://127.0.0.1:{free_port()}", timeout=1)
    sub = Subscriber(
        server.ws_url,
        w.workers[0],
        [w.group],
        store,
        rec.on_event,
        authority_public_key=w.authority.public_key,
        client=dead,
        on_snapshot=rec.on_snapshot,
        reconnect_delay_s=0.05,
    )
    task = asyncio.create_task(sub.run())
    try:
        await eventually(lambda: sub.connections >= 3)
        assert not task.done()
    finally:
        await sub.stop()
        await task
        await dead.aclose()
        await server.stop()
        w.authority.close()
    assert rec.snapshots == [] and rec.events == [] and store.get(w.group) == 0


@pytest.mark.both_backends
async def test_tampered_snapshot_is_refused__MW_16_e(tmp_path: Path) -> None:
    w = windowed_world(tmp_path / "a.db", window=3)
    for i in range(6):
        w.ok(w.coordinator, "mission.create", {"mission_id": f"w{i}", "title": "t"})
    w.authority.maybe_archive(w.group, force=True)
    (row,) = w.authority.query(
        "SELECT data FROM snapshots WHERE group_id=? ORDER BY seq DESC LIMIT 1", w.group
    )
    snap = json.loads(row["data"])
    snap["state"]["members"] = []  # drop the members, keep the old hash and signature
    tamper(
        w, "UPDATE snapshots SET data=? WHERE group_id=? AND seq=?", json.dumps(snap), w.group,
        snap["seq"],
    )  # fmt: skip
    server = LiveServer(w.authority)
    await server.start()
    rec = Recorder()
    store = MemoryCursorStore()
    try:
        with pytest.raises(SnapshotVerificationError):
            await asyncio.wait_for(subscriber(server.ws_url, w, store, rec).run(), WAIT_S)
    finally:
        await server.stop()
        w.authority.close()
    assert rec.snapshots == [] and rec.events == [] and store.get(w.group) == 0


@pytest.mark.both_backends
async def test_tampered_event_is_never_delivered_until_replay_heals(
    live: LiveServer, world: World
) -> None:
    """An Event whose stored bytes were altered fails its hash check: it is dropped, the cursor
    waits before it (MW-16-b), and a reconnect replays it once the store is repaired."""
    head, _ = world.authority.head(world.group)
    bad = head - 1
    (good,) = world.authority.query(
        "SELECT data FROM events WHERE group_id=? AND seq=?", world.group, bad
    )
    altered = json.loads(good["data"])
    altered["body"]["injected"] = True
    change = "UPDATE events SET data=? WHERE group_id=? AND seq=?"
    tamper(world, change, json.dumps(altered), world.group, bad)
    rec = Recorder()
    sub = subscriber(live.ws_url, world, MemoryCursorStore(), rec)
    task = asyncio.create_task(sub.run())
    try:
        await eventually(lambda: sub.connections >= 2)  # dropped and reconnected at least once
        assert sub.cursor(world.group) == bad - 1
        tamper(world, change, good["data"], world.group, bad)  # repaired
        await eventually(lambda: sub.cursor(world.group) == head)
    finally:
        await sub.stop()
        await task
    assert [e.seq for e in rec.events] == list(range(1, head + 1))
    assert "injected" not in rec.events[bad - 1].body


async def test_subscription_refused_for_a_stranger(live: LiveServer, world: World) -> None:
    rec = Recorder()
    sub = subscriber(live.ws_url, world, MemoryCursorStore(), rec, Actor.generate("stranger"))
    with pytest.raises(SubscriptionRefused) as err:
        await asyncio.wait_for(sub.run(), WAIT_S)
    assert err.value.code == "unauthorized" and rec.events == []


async def test_stop_before_run_returns_at_once(world: World) -> None:
    rec = Recorder()
    sub = subscriber("ws://127.0.0.1:9/v1/stream", world, MemoryCursorStore(), rec)
    await sub.stop()
    await asyncio.wait_for(sub.run(), WAIT_S)
    assert sub.connections == 0 and rec.events == []
