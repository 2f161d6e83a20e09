"""Several Authority replicas over one PostgreSQL database.

Any replica takes any Command: appends of one Group are serialized by the database (advisory
locks), so sequences stay contiguous, every chain verifies, and a Command id repeated through
another replica gets the original verdict. A WebSocket subscriber on one replica receives the
Events appended through another (LISTEN/NOTIFY wakes it; it reads the log).
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from missionweave.authority import Authority, SubmitResult, now_ms, verify_log
from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Command, Event
from tests.support.serving import LiveServer, signed_subscribe
from tests.support.waits import WAIT_S
from tests.support.world import World, make_world

pytestmark = pytest.mark.postgres_only

GROUPS = 8


def _groups(tmp_path: Path) -> tuple[list[Authority], list[str], World]:
    w = make_world(tmp_path / "a.db")
    groups = [w.group] + [f"g{i}" for i in range(2, GROUPS + 1)]
    for gid in groups[1:]:
        r = w.authority.submit(
            w.coordinator.command(
                "group.create",
                gid,
                {"public_key": w.coordinator.public_key, "roles": ["owner", "coordinator"]},
                issued_at_ms=w.clock.now,
            )
        )
        assert r.accepted, r.rejection
        w.coordinator.membership_epochs[gid] = 1
    return [w.authority], groups, w


@pytest.mark.parametrize("replicas", [2, 4])
def test_replicas_append_contiguously_and_commands_stay_idempotent(
    tmp_path: Path, replicas: int
) -> None:
    """R replicas × 8 Groups × 2R concurrent submitters; each Command is sent twice, through
    two different replicas, at the same time as the others."""
    (first,), groups, w = _groups(tmp_path)
    coord = w.coordinator
    auths = [first] + [
        Authority(first.db_path, first.key, first.config, clock=first.clock)
        for _ in range(replicas - 1)
    ]
    per_group = 12
    cmds: list[Command] = [
        coord.command(
            "mission.create",
            gid,
            {"mission_id": f"m-{gid}-{i}", "title": "t"},
            issued_at_ms=w.clock.now,
        )
        for gid in groups
        for i in range(per_group)
    ]
    random.Random(replicas).shuffle(cmds)
    results: dict[str, list[SubmitResult]] = {c.command_id: [] for c in cmds}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def submitter(k: int) -> None:
        rng = random.Random(k)
        mine = cmds[k :: 2 * replicas] + cmds[(k + replicas) % (2 * replicas) :: 2 * replicas]
        rng.shuffle(mine)
        try:
            for i in range(0, len(mine), 3):
                batch = mine[i : i + 3]
                got = auths[rng.randrange(replicas)].submit_many(batch)
                with lock:
                    for c, r in zip(batch, got, strict=True):
                        results[c.command_id].append(r)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=submitter, args=(k,)) for k in range(2 * replicas)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        for cid, rs in results.items():
            assert len(rs) == 2, cid
            assert all(r.accepted for r in rs), [r.rejection for r in rs]
            # exactly one of the two sends appended; the other got the same Events back
            assert sorted(r.duplicate for r in rs) == [False, True]
            assert [e.event_id for e in rs[0].events] == [e.event_id for e in rs[1].events]
        for gid in groups:
            events = auths[-1].all_events(gid)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            created = [
                e.body["mission_id"]
                for e in events
                if e.type == "mission.created" and e.body["mission_id"].startswith("m-")
            ]
            assert sorted(created) == sorted(f"m-{gid}-{i}" for i in range(per_group))
            assert verify_log(auths[0].store, gid, first.public_key).events == len(events)
            assert auths[0].head(gid) == (events[-1].seq, events[-1].hash)
    finally:
        for a in auths:
            a.close()


async def test_a_subscriber_on_one_replica_sees_events_written_through_another(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    w.clock.now = now_ms()
    a = w.authority
    b = Authority(a.db_path, a.key, a.config, clock=a.clock)
    # A's fallback poll is far off: only B's NOTIFY can wake A's stream within the test
    server_a = LiveServer(a, poll_interval_s=60)
    server_b = LiveServer(b)
    await server_a.start()
    await server_b.start()
    try:
        head, _ = a.head(w.group)
        worker = w.workers[0]
        async with connect(server_a.ws_url) as ws:
            await ws.send(json.dumps(signed_subscribe(worker, w.group, head, w.clock.now)))
            async with AuthorityClient(server_b.url, signing_key=w.coordinator.key) as client:
                sent = []
                for i in range(5):
                    body = {"mission_id": f"m-b-{i}", "title": "t"}
                    cmd = w.coordinator.command(
                        "mission.create", w.group, body, issued_at_ms=w.clock.now
                    )
                    r = await client.submit(cmd)
                    assert r.accepted
                    sent.extend(r.events)
            got: list[Event] = []
            while len(got) < len(sent):
                frame = json.loads(await _recv(ws))
                assert frame["type"] == "EVENT", frame
                got.append(Event.model_validate(frame["event"]))
        assert [e.event_id for e in got] == [e.event_id for e in sent]
        assert [e.seq for e in got] == list(range(head + 1, head + 1 + len(sent)))
    finally:
        await server_b.stop()
        await server_a.stop()
        b.close()
        a.close()


async def _recv(ws: object) -> str:
    import asyncio

    return str(await asyncio.wait_for(ws.recv(), WAIT_S))  # type: ignore[attr-defined]


def test_two_replicas_racing_session_open_for_one_agent_open_one_session_each_in_turn(
    tmp_path: Path,
) -> None:
    """Issue 27: ``session.*`` of one agent is serialized across replicas. Rounds of two
    ``session.open`` of ``worker-0``, each sent through its own replica at the same instant (a
    restarted worker and the process it replaces, each reaching a different replica): every
    open gets its own epoch, one above the other — never two sessions at one epoch — the
    agent's row holds the last, the log names each once in order and verifies (MW-11.3-f)."""
    w = make_world(tmp_path / "a.db", n_workers=1)
    first = w.authority
    second = Authority(first.db_path, first.key, first.config, clock=first.clock)
    (worker,) = w.workers
    start = worker.session_epoch
    rounds = 12
    replies: list[int] = []
    errors: list[BaseException] = []
    try:
        for _ in range(rounds):
            pair = [
                worker.command("session.open", None, {}, issued_at_ms=w.clock.now) for _ in "ab"
            ]
            barrier = threading.Barrier(2)

            def open_through(auth: Authority, cmd: Command, barrier: threading.Barrier) -> None:
                try:
                    barrier.wait()
                    r = auth.submit(cmd)
                    assert r.accepted, r.rejection
                    replies.append(r.reply["session_epoch"])
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [
                threading.Thread(target=open_through, args=(a, c, barrier))
                for a, c in zip((first, second), pair, strict=True)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert not errors, errors
        expected = list(range(start + 1, start + 2 * rounds + 1))
        assert sorted(replies) == expected  # each open its own epoch
        opened = [
            e.body["session_epoch"]
            for e in second.all_events(w.group)
            if e.type == "agent.session_opened" and e.body["agent_id"] == worker.agent_id
        ]
        assert opened[-2 * rounds :] == expected  # in order, each once
        row = first.store.one("agents.session_epoch_by_agent_id", worker.agent_id)
        assert row is not None and row["session_epoch"] == expected[-1]
        events = first.all_events(w.group)
        assert verify_log(first.store, w.group, first.public_key).events == len(events)
    finally:
        second.close()
