"""``GET /v1/groups/{g}/agents`` and presence (``PUT``/``GET /v1/groups/{g}/presence``) over a
real loopback server, through AuthorityClient and raw HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from missionweave.authority import UnknownGroupError
from missionweave.authority.client import (
    AgentInfo,
    AuthorityClient,
    AuthorityRequestError,
    PresenceInfo,
    Reliability,
    presence_frame,
)
from missionweave.protocol import Actor, AgentCard, canonical_bytes
from tests.support.contracts import contract
from tests.support.serving import LiveServer, signed_http
from tests.support.world import World, evidence

CAP = "dist.verify@1.0"


def by_id(agents: list[AgentInfo]) -> dict[str, AgentInfo]:
    return {a.agent_id: a for a in agents}


def publish_card(w: World, actor: Actor, *caps: str, version: int = 1) -> AgentCard:
    card = AgentCard(
        agent_id=actor.agent_id,
        version=version,
        public_key=actor.public_key,
        capabilities=list(caps),
        max_concurrency=2,
    )
    w.ok(actor, "agent.publish_card", {"card": card.model_dump(mode="json")})
    return card


def fail_by_owner(w: World, wid: str, worker: Actor, **over: Any) -> None:
    w.authorize(wid, **over)
    offer_id = w.offer(wid, worker)
    assert w.accept(worker, wid, offer_id).accepted
    w.start(worker, wid)
    failed = evidence(worker.agent_id, wid, ("hashes",), "fail")
    w.ok(worker, "work.fail", w.leased(wid, evidence=failed, retryable=True))


def hand_signed(actor: Actor, group: str, **fields: Any) -> dict[str, Any]:
    """A presence frame built and signed by hand (independent of ``presence_frame``)."""
    frame: dict[str, Any] = {
        "agent": actor.agent_id,
        "group": group,
        "free_slots": 1,
        "queue_depth": 0,
        **fields,
    }
    frame["signature"] = actor.key.sign(canonical_bytes(frame))
    return frame


async def test_agents_list_roles_epochs_cards_and_sessions__MW_10_3_f(
    live: LiveServer, world: World
) -> None:
    w0, w1 = world.workers
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        agents = by_id(await client.agents(world.group))
        assert list(agents) == sorted(["coordinator", "reviewer", w0.agent_id, w1.agent_id])
        coord = agents["coordinator"]
        assert coord.roles == ["coordinator", "mission_owner", "owner"]
        assert (coord.membership_epoch, coord.session_epoch, coord.card) == (1, 0, None)
        assert agents[w0.agent_id].roles == ["worker"]
        assert agents[w0.agent_id].session_epoch == w0.session_epoch == 1
        assert agents["reviewer"].session_epoch == 0

        card = publish_card(world, w0, CAP)
        newer = publish_card(world, w0, CAP, "sbom@2.0", version=2)
        world.ok(
            world.coordinator,
            "member.update",
            {"agent_id": w1.agent_id, "roles": ["worker", "reviewer"]},
        )
        world.ok(world.coordinator, "member.remove", {"agent_id": "reviewer"})
        agents = by_id(await client.agents(world.group))
        assert card != newer and agents[w0.agent_id].card == newer  # the latest card
        assert agents[w1.agent_id].card is None
        assert agents[w1.agent_id].roles == ["reviewer", "worker"]
        assert agents[w1.agent_id].membership_epoch == 2
        assert "reviewer" not in agents  # removed members take no work

        # Raw JSON: the documented shape.
        raw = (
            await signed_http(live.url, world.coordinator).get(f"/v1/groups/{world.group}/agents")
        ).json()
        row = next(a for a in raw["agents"] if a["agent_id"] == w0.agent_id)
        assert set(row) == {
            "agent_id",
            "public_key",
            "roles",
            "membership_epoch",
            "card",
            "session_epoch",
            "reliability",
        }
        assert row["public_key"] == w0.public_key  # the key the Group records for it
        assert row["card"]["capabilities"] == [CAP, "sbom@2.0"]


async def test_reliability_counts_accepted_and_failed_per_capability__MW_10_3_f(
    live: LiveServer, world: World
) -> None:
    w0, w1 = world.workers
    world.authorize("a")
    world.run_to_verified("a", w0)  # CAP ok for w0
    fail_by_owner(world, "b", w1)  # CAP fail for w1
    fail_by_owner(world, "c", w0, required_capabilities=[CAP, "sbom@2.0"])
    # The coordinator fails an item nobody owns: it says nothing about any agent.
    world.authorize("d")
    world.ok(
        world.coordinator,
        "work.fail",
        {
            "work_item_id": "d",
            "evidence": evidence("coordinator", "d", ("hashes",), "fail"),
            "retryable": False,
        },
    )

    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        agents = by_id(await client.agents(world.group))
    assert agents[w0.agent_id].reliability == {
        CAP: Reliability(ok=1, fail=1),
        "sbom@2.0": Reliability(ok=0, fail=1),
    }
    assert agents[w1.agent_id].reliability == {CAP: Reliability(ok=0, fail=1)}
    assert agents["coordinator"].reliability == {}
    assert contract().required_capabilities == [CAP]


async def test_agents_of_unknown_group_is_404(live: LiveServer, world: World) -> None:
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        with pytest.raises(UnknownGroupError):
            await client.agents("nope")
        with pytest.raises(UnknownGroupError):
            await client.presence("nope")
        # a presence report is a member's signed frame: for a Group that does not exist it
        # gets the stranger's answer (no hint that the Group is missing)
        with pytest.raises(AuthorityRequestError) as refused:
            await client.put_presence(Actor.generate("x"), "nope", 1, 0)
        assert (refused.value.status, refused.value.code) == (403, "unauthorized")
    async with signed_http(live.url, world.coordinator) as http:
        resp = await http.get("/v1/groups/nope/agents")
    assert resp.status_code == 404 and resp.json()["code"] == "unknown_group"


async def test_presence_is_kept_in_memory_with_a_ttl(live: LiveServer, world: World) -> None:
    w0, w1 = world.workers
    head = world.authority.head(world.group)
    clock = world.clock
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        assert await client.presence(world.group) == {}
        assert await client.put_presence(w0, world.group, 2, 1, issued_at_ms=clock.now)
        assert await client.presence(world.group) == {
            w0.agent_id: PresenceInfo(free_slots=2, queue_depth=1, age_ms=0)
        }
        clock.advance(10_000)
        assert (await client.presence(world.group))[w0.agent_id].age_ms == 10_000

        old = presence_frame(w1, world.group, 3, 0, clock.now)
        newer = presence_frame(w1, world.group, 0, 4, clock.now + 1)
        async with signed_http(live.url, world.coordinator) as http:
            url = f"/v1/groups/{world.group}/presence"
            assert (await http.put(url, json=newer)).json() == {"stored": True}
            # Out of order or replayed: an older report never overwrites a newer one.
            assert (await http.put(url, json=old)).json() == {"stored": False}
        assert (await client.presence(world.group))[w1.agent_id] == PresenceInfo(
            free_slots=0, queue_depth=4, age_ms=0
        )

        clock.advance(20_001)  # w0's report is now 30,001 ms old: stale
        assert list(await client.presence(world.group)) == [w1.agent_id]
        clock.advance(10_000)
        assert await client.presence(world.group) == {}
    # Presence is ephemeral: nothing was written to the log.
    assert world.authority.head(world.group) == head


async def test_presence_refusals(live: LiveServer, world: World) -> None:
    w0, w1 = world.workers
    now = world.clock.now
    url = f"/v1/groups/{world.group}/presence"

    async def put(frame: Any, path: str = url) -> tuple[int, str]:
        async with signed_http(live.url, world.coordinator) as http:
            resp = await http.put(path, json=frame)
        return resp.status_code, str(resp.json()["code"] if resp.status_code != 200 else "ok")

    assert await put(hand_signed(w0, world.group, issuedAtMs=now)) == (200, "ok")
    forged = hand_signed(w1, world.group, issuedAtMs=now + 1) | {"agent": w0.agent_id}
    assert await put(forged) == (403, "unauthorized")
    stranger = Actor.generate("stranger")
    assert await put(hand_signed(stranger, world.group, issuedAtMs=now)) == (403, "unauthorized")
    skewed = hand_signed(w0, world.group, issuedAtMs=now - 6 * 60_000)
    assert await put(skewed) == (403, "unauthorized")
    assert await put(hand_signed(w0, "other", issuedAtMs=now)) == (422, "invalid_frame")
    assert await put(hand_signed(w0, world.group, issuedAtMs=now, free_slots=-1)) == (
        422,
        "invalid_frame",
    )
    assert await put(hand_signed(w0, world.group, issuedAtMs=now, extra=1)) == (
        422,
        "invalid_frame",
    )
    assert await put(hand_signed(w0, world.group, issuedAtMs=now) | {"free_slots": 1.5}) == (
        422,
        "invalid_frame",
    )
    assert await put([1, 2]) == (422, "invalid_request")

    world.ok(world.coordinator, "member.remove", {"agent_id": w1.agent_id})
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as client:
        with pytest.raises(AuthorityRequestError) as err:
            await client.put_presence(w1, world.group, 1, 0, issued_at_ms=now)
        assert (err.value.status, err.value.code) == (403, "unauthorized")
        assert list(await client.presence(world.group)) == [w0.agent_id]
