"""The Authority's HTTP routes over a real loopback uvicorn server, and AuthorityClient."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import httpx
import pytest

from missionweave.authority import (
    CursorTooOldError,
    UnknownGroupError,
    open_store,
    verify_snapshot,
)
from missionweave.authority.client import (
    AuthorityClient,
    AuthorityRequestError,
    AuthorityUnavailable,
    SnapshotVerificationError,
)
from missionweave.authority.http import create_app
from missionweave.protocol import GENESIS_HASH, check_event
from tests.support.serving import (
    LiveServer,
    mission_cmd,
    signed_http,
    tamper,
    windowed_world,
)
from tests.support.surface import assert_surface
from tests.support.waits import eventually
from tests.support.world import World


@pytest.mark.both_backends
async def test_post_command_accepted_rejected_and_repeated(live: LiveServer, world: World) -> None:
    cmd = mission_cmd(world, "m-http")
    async with signed_http(live.url, world.coordinator) as http:
        first = await http.post("/v1/commands", json=cmd.model_dump(mode="json"))
        assert first.status_code == 200
        body = first.json()
        assert body["status"] == "accepted" and body["duplicate"] is False
        assert [e["type"] for e in body["events"]] == ["mission.created"]

        again = await http.post("/v1/commands", json=cmd.model_dump(mode="json"))
        assert again.status_code == 200
        assert again.json()["duplicate"] is True
        assert again.json()["events"] == body["events"]  # idempotent: the original Events

        worker = world.workers[0]
        refused = worker.command("mission.create", world.group, {"mission_id": "nope"})
        resp = await http.post("/v1/commands", json=refused.model_dump(mode="json"))
        assert resp.status_code == 409
        rej = resp.json()
        assert rej["status"] == "rejected" and rej["events"] == []
        assert rej["rejection"]["code"] == "role_not_allowed"
        assert set(rej["rejection"]) == {"code", "reason", "detail"}

    head, _ = world.authority.head(world.group)
    assert world.authority.all_events(world.group)[-1].seq == head


async def test_client_submit_and_submit_many(live: LiveServer, world: World) -> None:
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        r = await client.submit(mission_cmd(world, "m-one"))
        assert r.accepted and r.events[0].type == "mission.created"
        conflict = world.coordinator.command(
            "mission.create",
            world.group,
            {"mission_id": "m-two", "title": "x"},
            command_id=r.command_id,
        )
        refused = await client.submit(conflict)
        assert refused.rejection is not None
        assert refused.rejection.code == "idempotency_conflict"
        cmds = [mission_cmd(world, f"m-many-{i}") for i in range(5)]
        cmds.insert(2, mission_cmd(world, "m-one"))  # exists already: rejected in the middle
        results = await client.submit_many(cmds)
    assert [x.command_id for x in results] == [c.command_id for c in cmds]
    assert [x.status for x in results] == ["accepted"] * 2 + ["rejected"] + ["accepted"] * 3
    seqs = [x.events[0].seq for x in results if x.accepted]
    assert seqs == list(range(seqs[0], seqs[0] + 5))


@pytest.mark.both_backends
async def test_events_paging_and_head(live: LiveServer, world: World) -> None:
    head, head_hash = world.authority.head(world.group)
    async with signed_http(live.url, world.coordinator) as http:
        pages, after = [], 0
        while True:
            resp = await http.get(
                f"/v1/groups/{world.group}/events", params={"after_sequence": after, "limit": 3}
            )
            assert resp.status_code == 200
            page = resp.json()
            assert page["head_seq"] == head
            if not page["events"]:
                break
            assert len(page["events"]) <= 3
            pages.append(page["events"])
            after = page["events"][-1]["seq"]
        assert len(pages) == -(-head // 3)
        got = (await http.get(f"/v1/groups/{world.group}/head")).json()
        assert got == {"seq": head, "hash": head_hash}
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        events = await client.events(world.group, 0, 1000)
        assert await client.head(world.group) == (head, head_hash)
    assert [e.seq for e in events] == list(range(1, head + 1))
    assert [e["event_id"] for p in pages for e in p] == [e.event_id for e in events]
    prev = GENESIS_HASH
    for e in events:
        assert check_event(e, world.authority.public_key, prev) is None
        prev = e.hash


async def test_error_bodies_are_structured(live: LiveServer, world: World) -> None:
    async with signed_http(live.url, world.coordinator) as http:
        r = await http.get("/v1/groups/nope/events")
        assert r.status_code == 404
        assert r.json() == {
            "code": "unknown_group",
            "reason": "unknown group 'nope'",
            "detail": {"group_id": "nope"},
        }
        r = await http.post("/v1/commands", json={"command_id": "x", "type": "t"})
        assert r.status_code == 422
        body = r.json()
        assert body["code"] == "invalid_command" and body["reason"]
        assert {tuple(e["loc"]) for e in body["detail"]["errors"]} >= {
            ("body", "actor"),
            ("body", "issued_at_ms"),
        }
        headers = {"content-type": "application/json"}
        r = await http.post("/v1/commands", content=b"{not json", headers=headers)
        assert r.status_code == 422 and r.json()["code"] == "invalid_command"
        floaty = mission_cmd(world, "m-float").model_copy(update={"body": {"x": 1.5}})
        r = await http.post("/v1/commands", json=floaty.model_dump(mode="json"))
        assert r.status_code == 422 and r.json()["code"] == "invalid_command"
        assert "float 1.5 at body.x" in r.json()["reason"]
        for bad in ("NaN", "Infinity", "-Infinity"):  # NaN must not be signed as null
            raw = json.dumps(floaty.model_dump(mode="json")).replace("1.5", bad)
            r = await http.post("/v1/commands", content=raw, headers=headers)
            assert r.status_code == 422 and r.json()["code"] == "invalid_command", bad
        r = await http.get(f"/v1/groups/{world.group}/events", params={"limit": 0})
        assert r.status_code == 422 and r.json()["code"] == "invalid_request"
        r = await http.get("/v1/no/such/route")
        assert r.status_code == 404 and set(r.json()) == {"code", "reason", "detail"}
        too_many = [mission_cmd(world, "m-x").model_dump(mode="json")] * 1001
        r = await http.post("/v1/commands/batch", json=too_many)
        assert r.status_code == 422 and "at most 1000 items" in r.json()["reason"]
        assert [e["type"] for e in r.json()["detail"]["errors"]] == ["too_long"]
        r = await http.get(f"/v1/groups/{world.group}/snapshots/999")
        assert r.status_code == 404 and r.json()["code"] == "unknown_snapshot"
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        with pytest.raises(UnknownGroupError) as unknown:
            await client.events("nope")
        assert isinstance(unknown.value, AuthorityRequestError)  # one except for every answer
        assert unknown.value.status == 404 and unknown.value.group_id == "nope"
        with pytest.raises(AuthorityRequestError) as err:
            await client.submit(floaty)
        assert err.value.status == 422 and err.value.code == "invalid_command"


async def test_lease_info_and_health(live: LiveServer, world: World) -> None:
    world.authorize("a")
    offer = world.offer("a", world.workers[0])
    assert world.accept(world.workers[0], "a", offer).accepted
    lease = world.start(world.workers[0], "a")
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        row = await client.lease(lease["lease_id"])
        assert row is not None and row["valid"] is True and row["agent_id"] == "worker-0"
        assert await client.lease("lease_unknown") is None
        info = await client.info()
    assert info == {
        "public_key": world.authority.public_key,
        "groups": [world.group],
        "operator": True,
    }
    async with signed_http(live.url, world.coordinator) as http:
        assert (await http.get("/healthz")).json() == {"ok": True}
        assert (await http.get("/v1/leases/lease_unknown")).json()["code"] == "unknown_lease"


@pytest.mark.both_backends
async def test_concurrent_posts_share_transactions(live: LiveServer, world: World) -> None:
    """Many concurrent POSTs: every Command lands once, sequences stay contiguous, and the one
    BatchWriter commits them in fewer transactions than Commands (group commit)."""
    writer = live.app.state.writer
    n = 60
    cmds = [mission_cmd(world, f"m-c{i}") for i in range(n)]
    start, _ = world.authority.head(world.group)
    # No silence credit here: the test holds the write lock itself, and a credit of the silence
    # before the burst (over 1 s on a loaded machine) would wait on that lock in the request
    # path, so no request would reach the writer (seen once in four runs under load 9).
    watch = world.authority.stall_watch
    if watch is not None:
        watch.quiet_ms = 10**9
    # Hold the Group's write lock (SQLite's file lock, PostgreSQL's advisory lock) from a
    # second Store so the first transaction waits and the rest queue behind it.
    blocker = open_store(world.db)
    blocker.begin()
    blocker.lock_groups([world.group])
    async with signed_http(live.url, world.coordinator) as http:

        async def post(i: int) -> httpx.Response:
            return await http.post("/v1/commands", json=cmds[i].model_dump(mode="json"))

        tasks = [asyncio.create_task(post(i)) for i in range(n)]
        try:
            # a transaction waits on the lock with two Commands in it, or with one and two
            # queued behind it (committed together next): a batch of two or more. Not all n:
            # the lock must be let go well within the Store's 30 s busy timeout, and on a loaded
            # machine n requests may not all have arrived by then.
            await eventually(
                lambda: writer.in_flight >= 1 and writer.in_flight + writer.queued >= 3
            )
        finally:
            blocker.commit()
            blocker.close()
        responses = await asyncio.gather(*tasks)
    assert all(r.status_code == 200 for r in responses)
    seqs = sorted(r.json()["events"][0]["seq"] for r in responses)
    assert seqs == list(range(start + 1, start + n + 1))
    assert 0 < writer.batches < n
    assert writer.commands == n and writer.largest_batch > 1
    assert world.authority.head(world.group)[0] == start + n


@pytest.mark.both_backends
async def test_cursor_too_old_410_and_snapshot_verification(tmp_path: Path) -> None:
    """MW-16-e over HTTP: 410 CURSOR_TOO_OLD names a signed snapshot that verifies."""
    w = windowed_world(tmp_path / "a.db", window=3)
    for i in range(6):
        w.ok(w.coordinator, "mission.create", {"mission_id": f"w{i}", "title": "t"})
    assert w.authority.maybe_archive(w.group, force=True) > 0
    server = LiveServer(w.authority)
    await server.start()
    try:
        async with signed_http(server.url, w.coordinator) as http:
            r = await http.get(f"/v1/groups/{w.group}/events", params={"after_sequence": 0})
            assert r.status_code == 410
            body = r.json()
            assert body["code"] == "CURSOR_TOO_OLD" and body["detail"]["first_online_seq"] > 1
            ref = body["snapshot"]
            full = (await http.get(f"/v1/groups/{w.group}/snapshots/{ref['seq']}")).json()
            assert verify_snapshot(full, w.authority.public_key) and full["hash"] == ref["hash"]
        async with AuthorityClient(server.url, signing_key=w.coordinator.key) as client:
            with pytest.raises(CursorTooOldError) as err:
                await client.events(w.group, 0)
            assert err.value.snapshot == ref and err.value.group_id == w.group
            assert err.value.first_online_seq == body["detail"]["first_online_seq"]
            assert isinstance(err.value, AuthorityRequestError) and err.value.status == 410
            snap = await client.snapshot(w.group, ref["seq"])
            assert snap["head_hash"] == full["head_hash"]
            # a tampered snapshot row is refused by the client
            tampered = dict(full, state={**full["state"], "members": []})
            tamper(
                w,
                "UPDATE snapshots SET data=? WHERE group_id=? AND seq=?",
                json.dumps(tampered),
                w.group,
                ref["seq"],
            )
            with pytest.raises(SnapshotVerificationError):
                await client.snapshot(w.group, ref["seq"])
            with pytest.raises(SnapshotVerificationError):  # a key that is not the Authority's
                await client.snapshot(
                    w.group, ref["seq"], authority_public_key=w.coordinator.public_key
                )
    finally:
        await server.stop()
        w.authority.close()


async def test_client_in_process_over_asgi_transport(world: World) -> None:
    transport = httpx.ASGITransport(app=create_app(world.authority))
    async with AuthorityClient(
        "http://authority", transport=transport, signing_key=world.coordinator.key
    ) as client:
        r = await client.submit(mission_cmd(world, "m-asgi"))
        assert r.accepted
        events = await client.events(world.group, r.events[0].seq - 1)
        assert [e.event_id for e in events] == [r.events[0].event_id]
        snap_ref = world.authority.snapshot(world.group)
        snap = await client.snapshot(world.group, snap_ref["seq"])
        assert snap["hash"] == snap_ref["hash"]


async def test_client_unavailable_names_the_url() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with AuthorityClient(url, timeout=2) as client:
        with pytest.raises(AuthorityUnavailable) as err:
            await client.head("g1")
    assert url in str(err.value)


def test_public_surface_of_server_and_client() -> None:
    from missionweave.authority import client
    from missionweave.authority import http as server

    assert_surface(
        server,
        {
            "BatchWriter",
            "ConnectionLimits",
            "ErrorBody",
            "ReadGate",
            "WS_MAX_BYTES",
            "create_app",
            "serve",
            "server_limits",
        },
    )
    assert set(
        """AuthorityClient AuthorityClientError AuthorityUnavailable AuthorityRequestError
        Subscriber CursorStore SqliteCursorStore MemoryCursorStore GroupSequencer
        CursorTooOldError UnknownGroupError SnapshotVerificationError SubscriptionRefused
        EventVerificationError SubscriberError""".split()
    ) <= set(client.__all__)
    assert all(hasattr(client, n) for n in client.__all__)
    assert issubclass(client.AuthorityUnavailable, client.AuthorityClientError)
    assert isinstance(client.SqliteCursorStore, type) and issubclass(
        client.MemoryCursorStore, client.CursorStore
    )
