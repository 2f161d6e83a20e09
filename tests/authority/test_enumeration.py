"""A stranger learns nothing about which Groups exist (issue 24, finding 7): over a real
loopback server, every answer a non-member gets about an existing Group is the answer it gets
about a Group that does not exist — reads, presence reports, WebSocket SUBSCRIBE, Commands."""

from __future__ import annotations

import json
from typing import Any

from websockets.asyncio.client import connect

from missionweave.authority.client import AuthorityClient, AuthorityRequestError
from missionweave.protocol import Actor
from tests.support.serving import LiveServer, signed_http, signed_subscribe
from tests.support.world import World

READS = (
    "/v1/groups/{g}/events",
    "/v1/groups/{g}/head",
    "/v1/groups/{g}/agents",
    "/v1/groups/{g}/presence",
    "/v1/groups/{g}/snapshots/1",
)
NOWHERE = "no-such-group"


def _anonymous(body: dict[str, Any], group: str) -> str:
    """The answer with the Group's id blanked out (it echoes what the caller sent)."""
    return json.dumps(body, sort_keys=True).replace(group, "G")


async def test_a_stranger_reads_the_same_refusal_for_any_group__MW_13_3_b(
    live: LiveServer, world: World
) -> None:
    stranger = Actor.generate("stranger")
    async with signed_http(live.url, stranger) as http:
        for path in READS:
            there = await http.get(path.format(g=world.group))
            nowhere = await http.get(path.format(g=NOWHERE))
            assert there.status_code == nowhere.status_code == 403, path
            assert _anonymous(there.json(), world.group) == _anonymous(nowhere.json(), NOWHERE)
    # the operator may read every Group: it still learns that one does not exist
    async with signed_http(live.url, world.coordinator) as http:
        r = await http.get(f"/v1/groups/{NOWHERE}/events")
        assert r.status_code == 404 and r.json()["code"] == "unknown_group"


async def test_a_strangers_presence_report_is_refused_alike_for_any_group(
    live: LiveServer, world: World
) -> None:
    stranger = Actor.generate(world.workers[0].agent_id)  # a member's id, another key
    answers = []
    async with AuthorityClient(live.url, signing_key=stranger.key) as client:
        for group in (world.group, NOWHERE):
            try:
                await client.put_presence(stranger, group, 1, 0, issued_at_ms=world.clock.now)
            except AuthorityRequestError as exc:
                answers.append((exc.status, exc.code))
    assert answers == [(403, "unauthorized"), (403, "unauthorized")]


async def test_subscribe_checks_the_signature_before_naming_the_group(
    live: LiveServer, world: World
) -> None:
    now = world.clock.now
    member = world.workers[0]
    forged = signed_subscribe(member, NOWHERE, 0, now)
    forged["signature"] = Actor.generate(member.agent_id).key.sign(b"something else")
    stranger = Actor.generate("stranger")
    frames = {
        "stranger, existing": signed_subscribe(stranger, world.group, 0, now),
        "stranger, unknown": signed_subscribe(stranger, NOWHERE, 0, now),
        "member, unknown": signed_subscribe(member, NOWHERE, 0, now),
        "forged, unknown": forged,
    }
    async with connect(live.ws_url) as ws:
        for name, frame in frames.items():
            await ws.send(json.dumps(frame))
            err = json.loads(await ws.recv())
            assert err["type"] == "ERROR" and err["code"] == "unauthorized", (name, err)
            assert "head_seq" not in err["detail"], name


async def test_a_strangers_command_is_rejected_alike_for_any_group(world: World) -> None:
    stranger = Actor.generate("stranger")
    now = world.clock.now
    there = world.authority.submit(
        stranger.command("work.start", world.group, {}, issued_at_ms=now)
    )
    nowhere = world.authority.submit(stranger.command("work.start", NOWHERE, {}, issued_at_ms=now))
    assert there.status == nowhere.status == "rejected"
    assert there.rejection is not None and nowhere.rejection is not None
    assert there.rejection.code == nowhere.rejection.code == "not_a_member"
    assert there.rejection.reason == nowhere.rejection.reason
