"""The ``/v1/stream`` WebSocket over a real loopback server, driven by a raw websockets client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from missionweave.authority import verify_log, verify_snapshot
from missionweave.authority.client import AuthorityClient
from missionweave.protocol import GENESIS_HASH, Actor, Event, check_event
from tests.support.serving import LiveServer, mission_cmd, signed_subscribe, windowed_world
from tests.support.waits import WAIT_S
from tests.support.world import World


async def recv(ws: ClientConnection) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))
    return frame


async def recv_events(ws: ClientConnection, n: int) -> list[Event]:
    out = []
    for _ in range(n):
        frame = await recv(ws)
        assert frame["type"] == "EVENT", frame
        out.append(Event.model_validate(frame["event"]))
    return out


async def barrier(ws: ClientConnection) -> None:
    """Frames are handled in order: the ERROR answering this bad frame proves every earlier
    frame has been handled."""
    await ws.send(json.dumps({"type": "BARRIER"}))
    while (frame := await recv(ws))["type"] != "ERROR" or frame["code"] != "invalid_frame":
        pass


@pytest.mark.both_backends
async def test_subscribe_replays_then_streams_live__MW_16_d(live: LiveServer, world: World) -> None:
    head, _ = world.authority.head(world.group)
    worker = world.workers[0]
    async with connect(live.ws_url) as ws:
        await ws.send(json.dumps(signed_subscribe(worker, world.group, 0, world.clock.now)))
        replay = await recv_events(ws, head)
        assert [e.seq for e in replay] == list(range(1, head + 1))
        prev = GENESIS_HASH
        for e in replay:
            assert check_event(e, world.authority.public_key, prev) is None
            prev = e.hash
        # a live append through the HTTP front (the BatchWriter wakes the stream) ...
        async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
            r = await client.submit(mission_cmd(world, "m-live"))
        (live_ev,) = await recv_events(ws, 1)
        assert live_ev.event_id == r.events[0].event_id and live_ev.prev_hash == prev
        # ... and one written straight to the database, found by the fallback poll
        direct = world.ok(world.coordinator, "mission.create", {"mission_id": "m-db", "title": "t"})
        (polled,) = await recv_events(ws, 1)
        assert polled.event_id == direct.events[0].event_id and polled.seq == head + 2


async def test_subscribe_after_sequence_replays_only_later_events__MW_16_d(
    live: LiveServer, world: World
) -> None:
    head, _ = world.authority.head(world.group)
    async with connect(live.ws_url) as ws:
        frame = signed_subscribe(world.workers[1], world.group, head - 2, world.clock.now)
        await ws.send(json.dumps(frame))
        events = await recv_events(ws, 2)
        assert [e.seq for e in events] == [head - 1, head]
        await barrier(ws)  # nothing else was sent before the barrier's answer


async def test_bad_subscribe_gets_structured_errors_and_socket_stays_open(
    live: LiveServer, world: World
) -> None:
    worker = world.workers[0]
    now = world.clock.now
    forged = signed_subscribe(worker, world.group, 0, now)
    forged["signature"] = Actor.generate(worker.agent_id).key.sign(b"something else")
    stale = signed_subscribe(worker, world.group, 0, now - 400_000)
    stranger = signed_subscribe(Actor.generate("stranger"), world.group, 0, now)
    ahead = signed_subscribe(worker, world.group, 10_000, now)
    tampered = dict(signed_subscribe(worker, world.group, 5, now), afterSequence=0)
    cases = [
        (forged, "unauthorized"),
        (stale, "unauthorized"),
        (stranger, "unauthorized"),
        (tampered, "unauthorized"),
        (signed_subscribe(worker, "nope", 0, now), "unauthorized"),  # no Group: no hint
        (ahead, "invalid_frame"),
        ({"type": "SUBSCRIBE", "group": world.group}, "invalid_frame"),
        ({"type": "HELLO"}, "invalid_frame"),
        ([1, 2], "invalid_frame"),
        ({"type": "ACK", "cursors": {world.group: "x"}}, "invalid_frame"),
    ]
    async with connect(live.ws_url) as ws:
        for frame, code in cases:
            await ws.send(json.dumps(frame))
            err = await recv(ws)
            assert err["type"] == "ERROR" and err["code"] == code, (frame, err)
            assert isinstance(err["reason"], str) and isinstance(err["detail"], dict)
        await ws.send("not json")
        assert (await recv(ws))["code"] == "invalid_frame"
        # the socket is still usable after all those errors
        await ws.send(json.dumps(signed_subscribe(worker, world.group, 0, now)))
        assert (await recv(ws))["type"] == "EVENT"


@pytest.mark.both_backends
async def test_ack_records_cursor_and_keeps_history__MW_16_c(
    live: LiveServer, world: World
) -> None:
    head, _ = world.authority.head(world.group)
    worker = world.workers[0]
    async with connect(live.ws_url) as ws:
        # ACK before SUBSCRIBE: this socket speaks for no agent in that group yet
        await ws.send(json.dumps({"type": "ACK", "cursors": {world.group: 1}}))
        assert (await recv(ws))["code"] == "invalid_frame"
        await ws.send(json.dumps(signed_subscribe(worker, world.group, 0, world.clock.now)))
        await recv_events(ws, head)
        await ws.send(json.dumps({"type": "ACK", "cursors": {world.group: head}}))
        await barrier(ws)
        rows = world.authority.query(
            "SELECT seq FROM cursors WHERE group_id=? AND agent_id=?", world.group, worker.agent_id
        )
        assert rows == [{"seq": head}]
        await ws.send(json.dumps({"type": "ACK", "cursors": {world.group: head + 5}}))
        assert (await recv(ws))["code"] == "invalid_frame"  # beyond the head
        await ws.send(json.dumps({"type": "ACK", "cursors": {world.group: 1}}))
        await barrier(ws)
    # the cursor never goes back, and ACK deleted nothing: the whole log is still served
    rows = world.authority.query("SELECT seq FROM cursors WHERE agent_id=?", worker.agent_id)
    assert rows == [{"seq": head}]
    assert len(world.authority.events(world.group, 0)) == head
    assert verify_log(world.authority.store, world.group, world.authority.public_key).events == head


@pytest.mark.both_backends
async def test_several_groups_on_one_socket(live: LiveServer, world: World) -> None:
    owner = world.coordinator
    r = world.authority.submit(
        owner.command("group.create", "g2", {"public_key": owner.public_key, "roles": ["owner"]})
    )
    assert r.accepted
    head1, _ = world.authority.head(world.group)
    async with connect(live.ws_url) as ws:
        await ws.send(json.dumps(signed_subscribe(owner, world.group, head1 - 1, world.clock.now)))
        await ws.send(json.dumps(signed_subscribe(owner, "g2", 0, world.clock.now)))
        frames = [await recv(ws) for _ in range(3)]
    by_group: dict[str, list[int]] = {}
    for f in frames:
        by_group.setdefault(f["group"], []).append(f["event"]["seq"])
    assert by_group == {world.group: [head1], "g2": [1, 2]}


@pytest.mark.both_backends
async def test_cursor_too_old_error_frame_carries_snapshot__MW_16_e(tmp_path: Path) -> None:
    w = windowed_world(tmp_path / "a.db", window=2)
    for i in range(4):
        w.ok(w.coordinator, "mission.create", {"mission_id": f"w{i}", "title": "t"})
    through = w.authority.maybe_archive(w.group, force=True)
    w.ok(w.coordinator, "mission.create", {"mission_id": "after", "title": "t"})
    server = LiveServer(w.authority)
    await server.start()
    try:
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps(signed_subscribe(w.workers[0], w.group, 0, w.clock.now)))
            err = await recv(ws)
            assert err["type"] == "ERROR" and err["code"] == "CURSOR_TOO_OLD"
            assert err["detail"]["first_online_seq"] == through + 1
            ref = err["snapshot"]
            assert ref["group_id"] == w.group and ref["seq"] >= through
            async with AuthorityClient(server.url, signing_key=w.coordinator.key) as client:
                snap = await client.snapshot(w.group, ref["seq"])
            assert verify_snapshot(snap, w.authority.public_key)
            # resuming from the snapshot's sequence works on the same socket
            head, _ = w.authority.head(w.group)
            frame = signed_subscribe(w.workers[0], w.group, ref["seq"], w.clock.now)
            await ws.send(json.dumps(frame))
            assert head > ref["seq"]
            events = await recv_events(ws, head - ref["seq"])
            assert events[0].seq == ref["seq"] + 1
            assert events[0].prev_hash == snap["head_hash"]
            await barrier(ws)
        # archiving moved Events, it deleted none (MW-16-c)
        assert [e.seq for e in w.authority.all_events(w.group)] == list(range(1, head + 1))
    finally:
        await server.stop()
        w.authority.close()
