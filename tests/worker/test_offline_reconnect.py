"""An agent runtime that stays up through an outage reconciles on reconnection (MW-11.5-e):
the progress an execution buffered before it ended, cut off, reaches the Authority before the
runtime takes or submits anything else — not only at the runtime's next start.

A real Authority on loopback behind a proxy that drops every connection, the runtime in
process, the Temporal time-skipping server with ``StandInMissionWorkflow`` offering each item
as an ``execute_work_item`` activity on the agent's task queue."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from missionweave.protocol.temporal_contract import OfferTerms, OutcomeKind, mission_workflow_id
from missionweave.worker import AgentRuntime
from tests.support import offline_handlers
from tests.support.contracts import contract
from tests.support.loopback_proxy import DroppingProxy
from tests.support.offline_handlers import TIMEOUTS
from tests.support.waits import WAIT_S, until
from tests.support.world import World
from tests.worker.stand_in import (
    StandInItem,
    StandInSpec,
    agent_runtime,
    stand_in_worker,
    start_stand_in,
)

GRACE_MS = 1_000


def _runtime(
    w: World, proxy: DroppingProxy, client: object, state: Path, tick: timedelta
) -> AgentRuntime:
    return agent_runtime(
        w,
        proxy.url,
        client,
        state,
        capabilities=["dist.verify@1.2", "offline.ended@1.0"],
        handlers=["tests.support.worker_handlers", "tests.support.offline_handlers"],
        tick=tick,
        clock=w.clock,
    )


def _spec(w: World, wid: str, item: StandInItem) -> StandInSpec:
    return StandInSpec(
        group_id=w.group, mission_id=w.mission, agent_id=w.workers[0].agent_id, items={wid: item}
    )


@pytest.mark.parametrize(
    "tick",
    [timedelta(milliseconds=200), timedelta(minutes=10)],
    ids=["reconnection-noticed", "next-offer-first"],
)
async def test_progress_of_an_execution_ended_offline_reconciled_on_reconnection__MW_11_5_e(
    world: World,
    proxy: DroppingProxy,
    tmp_path: Path,
    tick: timedelta,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a short tick the runtime notices the reconnection by itself; with a ten-minute
    tick it does not try again in time, and the next offer's answer reconciles first.
    Either way the ended execution's two buffered checkpoints are in the log before the
    acceptance of the next WorkItem, and the buffer is empty."""
    ended = contract(["offline.ended@1.0"], timeouts={**TIMEOUTS, "offline_grace_ms": GRACE_MS})
    world.authorize(
        "a",
        required_capabilities=["offline.ended@1.0"],
        timeouts={**TIMEOUTS, "offline_grace_ms": GRACE_MS},
    )
    w0 = world.workers[0]
    outage = asyncio.Event()  # this test's event loop's
    monkeypatch.setattr(offline_handlers, "OUTAGE", outage)
    log = world.authority.all_events
    async with stand_in_worker() as env:
        rt = _runtime(world, proxy, env.client, tmp_path / "agent" / "worker-0.db", tick)
        async with rt:
            terms = OfferTerms(
                offer_id=world.offer("a", w0), revision=1, expires_at_ms=world.clock.now + 30_000
            )
            with env.auto_time_skipping_disabled():
                first = await start_stand_in(
                    env,
                    _spec(world, "a", StandInItem(contract=ended, offer=terms)),
                    mission_workflow_id(world.mission),
                )
                await until(
                    "a's first checkpoint",
                    lambda: any(e.type == "work.progress_reported" for e in log(world.group)),
                )
                proxy.cut()
                outage.set()

                def offline_saves() -> int:
                    """The two checkpoints saved after the cut, buffered. (The first one is
                    buffered too when the cut fell between its commit and its answer: applied
                    once, it is then refused as already applied, never recorded twice.)"""
                    return sum(
                        c.body.get("report", {}).get("phase") == "offline"
                        for c in rt.offline_buffer.pending()
                    )

                await until("two buffered", lambda: offline_saves() == 2)
                lease = world.item("a")
                world.clock.advance(TIMEOUTS["lease_ms"] + GRACE_MS)  # the grace runs out
                outcome = (await asyncio.wait_for(first.result(), WAIT_S))["a"]
                assert outcome.kind is OutcomeKind.LEASE_LOST  # it ended, cut off
                assert offline_saves() == 2  # nothing reached the Authority meanwhile
                assert lease["state"] == "active"

                proxy.restore()
                world.authorize("b", required_capabilities=["dist.verify@1.2"])
                terms_b = OfferTerms(
                    offer_id=world.offer("b", w0),
                    revision=1,
                    expires_at_ms=world.clock.now + 30_000,
                )
                second = await start_stand_in(
                    env,
                    _spec(
                        world,
                        "b",
                        StandInItem(
                            contract=contract(required_capabilities=["dist.verify@1.2"]),
                            input={"files": ["x.tar"]},
                            offer=terms_b,
                        ),
                    ),
                    "stand-in-after-the-outage",
                )
                done = (await asyncio.wait_for(second.result(), WAIT_S))["b"]
            assert len(rt.offline_buffer) == 0
    assert done.kind is OutcomeKind.SUBMITTED
    events = list(log(world.group))
    reconciled = [
        e.seq for e in events if e.type == "work.progress_reported" and "reconciled" in e.body
    ]
    (accepted_b,) = [
        e.seq for e in events if e.type == "work.offer_accepted" and e.work_item_id == "b"
    ]
    assert len(reconciled) == 2, "the buffered progress of the ended execution was reconciled"
    assert max(reconciled) < accepted_b  # before the runtime took anything else
