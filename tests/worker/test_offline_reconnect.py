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
from missionweave.worker import _offline as offline_module
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
    """With a short tick the runtime notices the reconnection by itself (its reconnection
    poll empties the buffer before anything else is offered); with a ten-minute tick it does
    not try again in time, and the next offer's answer reconciles first. Either way the ended
    execution's two buffered checkpoints reach the Authority before the acceptance of the next
    WorkItem, and the buffer is empty. They arrive past the lease's expiry plus its offline
    grace (the execution ended because the grace ran out; the Authority itself never stopped:
    nothing was credited), so the Authority refuses them ``lease_expired``, as it refuses the
    same report online (MW-11.5-h), writing nothing."""
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
    answered: list[tuple[str, int]] = []  # (outcome, the Group's head when it was answered)

    def answer(outcome: str) -> None:
        answered.append((outcome, world.authority.head(world.group)[0]))

    monkeypatch.setattr(offline_module, "record_reconciliation", answer)
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
                if tick < timedelta(seconds=1):  # the reconnection poll, nothing else
                    await until("reconciled by the poll", lambda: len(rt.offline_buffer) == 0)
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
    assert not [e for e in events if e.type == "work.progress_reported" and "reconciled" in e.body]
    (accepted_b,) = [
        e.seq for e in events if e.type == "work.offer_accepted" and e.work_item_id == "b"
    ]
    # (the online checkpoint is buffered too when the cut fell between its commit and its
    # answer: then answered as already applied)
    assert [o for o, _ in answered if o != "already_applied"] == ["refused", "refused"]
    assert max(head for _, head in answered) < accepted_b  # before the runtime took anything
