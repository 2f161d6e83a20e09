"""A served Authority cut off from every client judges leases by the renewals it *could* have
received (MW-11.5-c; issue 24, finding 2): the request that ends a silence of everyone has
the silence credited to the renewing owners' leases before it is judged."""

from __future__ import annotations

import httpx

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Command
from tests.support.serving import LiveServer
from tests.support.world import World


def _renewal(world: World) -> Command:
    return world.workers[0].command(
        "lease.renew", world.group, world.leased("a"), issued_at_ms=world.clock.now
    )


SHORT = {"start_deadline_ms": 60_000, "lease_ms": 2_000, "heartbeat_ms": 500}


async def test_a_renewal_after_a_silence_of_everyone_is_accepted__MW_11_5_c(
    world: World, live: LiveServer
) -> None:
    worker = world.workers[0]
    world.authorize("a", timeouts=SHORT)
    world.lease("a", worker)
    watch = world.authority.stall_watch
    assert watch is not None  # set when the server started serving
    async with AuthorityClient(live.url, signing_key=worker.key) as client:
        assert (await client.submit(_renewal(world))).accepted
        # nobody reaches the Authority for 3.5 s (every client cut off): the lease lapses on
        # its clock; a health check of a load balancer meanwhile is not a client
        watch._heard -= 3.5
        world.clock.advance(3_500)
        async with httpx.AsyncClient() as plain:
            assert (await plain.get(f"{live.url}/healthz")).status_code == 200
        r = await client.submit(_renewal(world))
    assert r.accepted, r.rejection
    row = world.authority.lease(world.leases["a"]["lease_id"])
    assert row is not None and row["valid"]
