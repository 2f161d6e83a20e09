"""Reads cost the Authority a bounded amount (issue 24, finding 5), over a real loopback
server: large reads in flight are bounded per key and in total (429 with ``Retry-After``), a
page is streamed a chunk at a time and reads the same as before, a far-behind ``SUBSCRIBE`` is
answered ``CURSOR_TOO_OLD`` with a recent snapshot instead of a replay, and the server bounds
request headers and idle connections. No timing is asserted (bench/hostile_reads.py measures)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from missionweave.authority import now_ms, verify_snapshot
from missionweave.authority.client import AuthorityClient
from missionweave.authority.http import ReadGate
from missionweave.authority.http._limits import (
    IDLE_TIMEOUT_S,
    MAX_HEADER_BYTES,
    READ_CHUNK_BYTES,
)
from missionweave.authority.http._read_gate import RETRY_AFTER_S
from missionweave.protocol import Actor, Event
from tests.authority.subscribing import restore_then_follow
from tests.support.serving import LiveServer, signed_http, signed_subscribe
from tests.support.waits import WAIT_S
from tests.support.world import World, make_world


def _padded(world: World, n: int, pad: int) -> None:
    """``n`` Events of about ``pad`` bytes each (progress reports with a checkpoint)."""
    world.authorize("pad")
    offer = world.offer("pad", world.workers[0])
    assert world.accept(world.workers[0], "pad", offer).accepted
    world.start(world.workers[0], "pad")
    for i in range(n):
        world.ok(
            world.workers[0],
            "progress.report",
            world.leased("pad", report={"phase": "padding"}, checkpoint={"pad": f"{i}" * pad}),
        )


@pytest.mark.both_backends
async def test_large_reads_past_their_bounds_get_429_with_retry_after(
    live: LiveServer, world: World
) -> None:
    gate: ReadGate = live.app.state.read_gate
    reader = world.workers[1]
    url = f"/v1/groups/{world.group}/events"
    async with signed_http(live.url, reader) as http:
        assert (await http.get(url)).status_code == 200
        assert gate.in_flight == 0  # a page streamed to its end gives its slot back
        # this key's bound: its reads in flight are taken
        for _ in range(gate.per_key):
            assert gate.enter(reader.public_key) is None
        for path in (url, f"/v1/groups/{world.group}/snapshots/1"):
            r = await http.get(path)
            assert r.status_code == 429, path
            assert r.headers["Retry-After"] == str(RETRY_AFTER_S)
            body = r.json()
            assert body["code"] == "too_many_reads" and body["reason"]
            assert body["detail"] == {
                "scope": "key",
                "in_flight": gate.per_key,
                "max": gate.per_key,
                "retry_after_s": RETRY_AFTER_S,
            }
        for _ in range(gate.per_key):
            gate.leave(reader.public_key)
        # the server's bound: every reader together
        others = [f"other-{i}" for i in range(gate.total)]
        for key in others:
            assert gate.enter(key) is None
        r = await http.get(url)
        assert r.status_code == 429 and r.json()["detail"]["scope"] == "total"
        for key in others:
            gate.leave(key)
        assert (await http.get(url)).status_code == 200
    assert gate.in_flight == 0 and gate.refused == 3


@pytest.mark.both_backends
async def test_a_page_is_streamed_in_chunks_and_reads_as_before(
    live: LiveServer, world: World
) -> None:
    _padded(world, 12, READ_CHUNK_BYTES // 3)  # a page of several chunks
    head, _ = world.authority.head(world.group)
    expected, _ = world.authority.events_page(world.group, 0, 1000, 4 * 1024 * 1024)
    async with signed_http(live.url, world.workers[1], timeout=30) as http:
        r = await http.get(f"/v1/groups/{world.group}/events", params={"limit": 1000})
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        page = r.json()
        # a limit in the middle of a chunk ends the page there
        r = await http.get(
            f"/v1/groups/{world.group}/events", params={"after_sequence": 3, "limit": 5}
        )
        assert [e["seq"] for e in r.json()["events"]] == [4, 5, 6, 7, 8]
    got = [Event.model_validate(e) for e in page["events"]]
    assert got == expected and got[-1].seq == head and page["head_seq"] == head
    assert live.app.state.read_gate.in_flight == 0


@pytest.mark.both_backends
async def test_a_far_behind_subscriber_gets_a_recent_snapshot__MW_16_e(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.clock.now = now_ms()
    for i in range(12):
        w.ok(w.coordinator, "mission.create", {"mission_id": f"w{i}", "title": "t"})
    head, _ = w.authority.head(w.group)
    server = LiveServer(w.authority, poll_interval_s=0.05, max_replay_events=5)
    await server.start()
    try:
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps(signed_subscribe(w.workers[0], w.group, 0, w.clock.now)))
            err = json.loads(await ws.recv())
            assert err["type"] == "ERROR" and err["code"] == "CURSOR_TOO_OLD", err
            assert err["detail"] == {
                "group": w.group,
                "after_sequence": 0,
                "head_seq": head,
                "max_replay_events": 5,
            }
            ref = err["snapshot"]
            assert ref["group_id"] == w.group and head - 5 <= ref["seq"] <= head
            async with AuthorityClient(server.url, signing_key=w.coordinator.key) as client:
                snap = await client.snapshot(w.group, ref["seq"])
            assert verify_snapshot(snap, w.authority.public_key)
            # within the bound, a replay as before (MW-16-d)
            await ws.send(
                json.dumps(signed_subscribe(w.workers[0], w.group, head - 5, w.clock.now))
            )
            frames = [json.loads(await ws.recv()) for _ in range(5)]
            assert [f["event"]["seq"] for f in frames] == list(range(head - 4, head + 1))
        # the client restores that snapshot and follows the log from there
        rec = await restore_then_follow(server.ws_url, w)
        assert rec.snapshots[0]["seq"] >= head - 5
        assert rec.events[-1].seq == head + 1
    finally:
        await server.stop()
        w.authority.close()


async def test_request_headers_are_bounded(live: LiveServer, world: World) -> None:
    async with signed_http(live.url, world.workers[1]) as http:
        r = await http.get(
            f"/v1/groups/{world.group}/head", headers={"x-pad": "a" * (MAX_HEADER_BYTES + 1)}
        )
    assert r.status_code == 431
    body = r.json()
    assert body["code"] == "headers_too_large" and body["detail"]["max_bytes"] == MAX_HEADER_BYTES
    # a request head that never ends is not buffered past the bound: the server answers and
    # closes instead of reading on
    reader, writer = await asyncio.open_connection(live.host, live.port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ")
        for _ in range(16):
            writer.write(b"a" * 16 * 1024)
            await writer.drain()
        answer = await asyncio.wait_for(reader.read(4096), WAIT_S)
        assert answer.startswith(b"HTTP/1.1 4"), answer[:80]
    except ConnectionError:
        pass  # reset while writing: closed, as wanted
    finally:
        writer.close()


async def test_idle_connections_are_closed(world: World) -> None:
    server = LiveServer(world.authority, ws_idle_timeout_s=0.2)
    await server.start()
    try:
        # a WebSocket that subscribes to nothing is closed (1008)
        async with connect(server.ws_url) as ws:
            try:
                await asyncio.wait_for(ws.recv(), WAIT_S)
            except ConnectionClosed as exc:
                assert exc.rcvd is not None and exc.rcvd.code == 1008
            else:
                raise AssertionError("the idle socket got a frame instead of a close")
        # an idle keep-alive HTTP connection is closed by the server
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        first = await asyncio.wait_for(reader.read(4096), WAIT_S)
        assert first.startswith(b"HTTP/1.1 200")
        rest = await asyncio.wait_for(reader.read(), IDLE_TIMEOUT_S + 10)
        assert rest == b""  # EOF: the server closed the idle connection
        writer.close()
    finally:
        await server.stop()


def test_the_read_gate_counts_per_key_and_in_total() -> None:
    gate = ReadGate(per_key=2, total=3)
    assert gate.enter("a") is None and gate.enter("a") is None
    assert (gate.enter("a") or {})["scope"] == "key"
    assert gate.enter("b") is None
    assert (gate.enter("c") or {})["scope"] == "total"
    gate.leave("a")
    assert gate.enter("c") is None and gate.in_flight == 3 and gate.refused == 2
    stranger = Actor.generate("x")
    assert (gate.enter(stranger.public_key) or {})["max"] == 3
