"""Writes before reads (issue 37 item 4), over a real uvicorn server on loopback: during a storm
of concurrent page reads every lease renewal of the owner is accepted while reads are refused
429 with ``Retry-After``; while a Command waits for the writer, a new large read is shed (429
``read_shed``) and the Command is then accepted; a renewal queued behind another Command is
committed first. No timing is asserted (bench/hostile_reads.py measures a storm)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from missionweave.authority.http._read_lane import ReadLane
from missionweave.protocol import Actor, RejectionCode
from tests.support.serving import LiveServer, signed_http
from tests.support.waits import WAIT_S, until
from tests.support.world import World

#: Concurrent page reads of the storm.
STORM = 150
#: Renewals the owner sends, one after another, during the storm.
RENEWALS = 20


def _leased_and_padded(world: World, events: int, pad: int) -> None:
    """``a`` leased to worker 0, and ``events`` Events of about ``pad`` bytes in the log."""
    world.authorize("a")
    world.lease("a", world.workers[0])
    for i in range(events):
        world.ok(
            world.workers[0],
            "progress.report",
            world.leased("a", report={"phase": "padding"}, checkpoint={"pad": f"{i}" * pad}),
        )


async def _post(http: httpx.AsyncClient, world: World, actor: Actor, type: str, body: Any) -> Any:
    cmd = actor.command(type, world.group, body, issued_at_ms=world.clock.now)
    answer = await http.post("/v1/commands", json=cmd.model_dump(mode="json"))
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.both_backends
async def test_renewals_are_all_accepted_during_a_read_storm__MW_11_5_c(
    live: LiveServer, world: World
) -> None:
    _leased_and_padded(world, 200, 2000)
    url = f"/v1/groups/{world.group}/events?after_sequence=0&limit=1000"
    answers: list[httpx.Response] = []

    async def read(reader: Actor) -> None:
        async with signed_http(live.url, reader, timeout=WAIT_S) as http:
            answers.append(await http.get(url))

    async def renew(http: httpx.AsyncClient) -> list[str]:
        body = world.leased("a")
        return [
            (await _post(http, world, world.workers[0], "lease.renew", body))["status"]
            for _ in range(RENEWALS)
        ]

    readers = [world.workers[1], world.reviewer]
    async with httpx.AsyncClient(base_url=live.url, timeout=WAIT_S) as owner:
        storm = [read(readers[i % 2]) for i in range(STORM)]
        renewed, *_ = await asyncio.gather(renew(owner), *storm)
    assert renewed == ["accepted"] * RENEWALS
    refused = [a for a in answers if a.status_code == 429]
    assert refused, "the storm was never refused: raise STORM"
    for a in refused:
        assert a.json()["code"] in (RejectionCode.TOO_MANY_READS, RejectionCode.READ_SHED)
        assert int(a.headers["Retry-After"]) == a.json()["detail"]["retry_after_s"] >= 1
    assert all(a.status_code in (200, 429) for a in answers)
    assert all(a.json()["events"] for a in answers if a.status_code == 200)


async def test_a_read_is_shed_while_a_command_waits_and_renewals_go_first(
    live: LiveServer, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _leased_and_padded(world, 5, 100)
    release = threading.Event()
    submit_many = world.authority.submit_many

    def held(*args: Any, **kw: Any) -> Any:  # the writer's transaction waits for the test
        release.wait(WAIT_S)
        return submit_many(*args, **kw)

    monkeypatch.setattr(world.authority, "submit_many", held)
    lane: ReadLane = live.app.state.read_lane
    writer = live.app.state.writer
    body = world.leased("a")
    owner = world.workers[0]
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=WAIT_S) as http,
        signed_http(live.url, world.workers[1], timeout=WAIT_S) as reader,
    ):
        first = asyncio.create_task(_post(http, world, owner, "lease.renew", body))
        await until("the first renewal in the writer", lambda: writer.in_flight == 1)
        other = asyncio.create_task(
            _post(
                http, world, world.coordinator, "mission.create", {"mission_id": "m2", "title": "x"}
            )
        )
        await until("the Command queued", lambda: writer.queued == 1)
        second = asyncio.create_task(_post(http, world, owner, "lease.renew", body))
        await until("the renewal queued", lambda: writer.queued == 2)
        await until("a Command waited", lambda: writer.oldest_wait_ms() > lane.shed_after_ms)
        shed = await reader.get(f"/v1/groups/{world.group}/events")
        assert shed.status_code == 429 and shed.json()["code"] == RejectionCode.READ_SHED
        assert shed.json()["detail"]["scope"] == "writes"
        assert int(shed.headers["Retry-After"]) == shed.json()["detail"]["retry_after_s"]
        release.set()
        results = await asyncio.gather(first, other, second)
        assert [r["status"] for r in results] == ["accepted"] * 3
        # the renewal queued after the other Command was committed before it
        assert results[2]["events"][0]["seq"] < results[1]["events"][0]["seq"]
        assert (await reader.get(f"/v1/groups/{world.group}/events")).status_code == 200
