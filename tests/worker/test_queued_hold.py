"""The agent renews the queued ownership lease of an accepted WorkItem while it waits for a
slot (MW-11.3-a): a real Authority on loopback, the runtime in process, the Temporal
time-skipping server with ``StandInMissionWorkflow`` offering each item as an activity."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from missionweave.protocol.temporal_contract import OfferTerms, mission_workflow_id
from tests.support.contracts import contract
from tests.support.serving import LiveServer
from tests.support.waits import WAIT_S, until
from tests.support.world import World
from tests.worker.stand_in import (
    StandInItem,
    StandInSpec,
    agent_runtime,
    stand_in_worker,
    start_stand_in,
)

# a start deadline far enough for admission control to accept a wait behind a holder
TIMEOUTS = {"start_deadline_ms": 3_600_000, "lease_ms": 10_000, "heartbeat_ms": 500}


async def test_a_waiting_item_s_hold_is_renewed_by_the_agent__MW_11_3_a(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    """One slot: ``busy`` holds it, ``waiting`` is accepted and waits. While it waits the agent
    renews its queued ownership lease (``lease.renewed`` of kind ``queued``, under the
    hold the acceptance granted); once the runtime stops, ``busy`` pauses."""
    w0 = world.workers[0]
    items = {}
    for wid, cap in (("busy", "test.hold@1.0"), ("waiting", "test.wait@1.0")):
        world.authorize(wid, required_capabilities=[cap], timeouts=TIMEOUTS)
        items[wid] = (cap, world.offer(wid, w0))
    log = world.authority.all_events

    def of(wid: str, type: str) -> list[dict[str, object]]:
        return [e.body for e in log(world.group) if e.type == type and e.work_item_id == wid]

    async with stand_in_worker() as env:
        rt = agent_runtime(
            world,
            live.url,
            env.client,
            tmp_path / "agent" / "worker-0.db",
            capabilities=["test.hold@1.0", "test.wait@1.0"],
            max_concurrency=1,
            handlers=["tests.support.hold_handlers"],
            clock=world.clock,
            graceful_shutdown=timedelta(seconds=5),
        )
        with env.auto_time_skipping_disabled():
            async with rt:
                handles = []
                for wid, (cap, offer_id) in items.items():
                    spec = StandInSpec(
                        group_id=world.group,
                        mission_id=world.mission,
                        agent_id=w0.agent_id,
                        items={
                            wid: StandInItem(
                                contract=contract([cap], timeouts=TIMEOUTS),
                                offer=OfferTerms(
                                    offer_id=offer_id,
                                    revision=1,
                                    expires_at_ms=world.clock.now + 30_000,
                                ),
                            )
                        },
                    )
                    handles.append(
                        await start_stand_in(
                            env, spec, f"{mission_workflow_id(world.mission)}-{wid}"
                        )
                    )
                    if wid == "busy":
                        await until("busy started", lambda: of("busy", "work.started"), 30)
                await until(
                    "the waiting item's hold renewed twice",
                    lambda: (
                        len(
                            [b for b in of("waiting", "lease.renewed") if b.get("kind") == "queued"]
                        )
                        >= 2
                    ),
                )
                (accepted,) = of("waiting", "work.offer_accepted")
                assert not of("waiting", "work.started")  # still waiting for the slot
            for h in handles:
                await asyncio.wait_for(h.result(), WAIT_S)
    hold = accepted["hold"]
    assert isinstance(hold, dict)
    renewed = [b for b in of("waiting", "lease.renewed") if b.get("kind") == "queued"]
    assert {b["lease_id"] for b in renewed} == {hold["lease_id"]}
    row = world.authority.lease(str(hold["lease_id"]))
    assert row is not None and row["kind"] == "queued"
