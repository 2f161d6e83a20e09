"""One charge in flight at a time (MW-11.5-j): a Command that carries the slot's usage delta is
answered before the next one takes the delta.

Issue 36: under load, an agent's third model response was metered, then the heartbeat's
``lease.renew`` took its 150 tokens while the handler published its conversation; the
handler's checkpoint went out with no usage and was **accepted** while the renewal that carried
its charge was **refused** ``budget_exceeded``. An accepted checkpoint said nothing of the
spending before it, and the run could send the next model request before the renewal's verdict
came. Against a real Authority on loopback, with the renewal held at the door.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from missionweave.authority.client import AuthorityClient
from missionweave.worker import WorkContext
from missionweave.worker._lease import LeaseSession
from tests.support.executor_harness import grant
from tests.support.serving import LiveServer
from tests.support.world import World

#: 400 tokens; 300 charged first, then 150 more: past the budget.
BUDGET = {"tokens": 400, "tool_calls": 100, "wall_clock_ms": 600_000}


class RenewalAtTheDoor(httpx.AsyncBaseTransport):
    """The network, except that a ``lease.renew`` Command waits before it is sent until
    :attr:`release` is set; the Commands sent meanwhile are noted in :attr:`sent_while_held`."""

    def __init__(self) -> None:
        self._net = httpx.AsyncHTTPTransport()
        self.renewal_waiting = asyncio.Event()
        self.release = asyncio.Event()
        self.sent_while_held: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        kind = json.loads(request.content).get("type") if request.method == "POST" else None
        if kind == "lease.renew":
            self.renewal_waiting.set()
            await self.release.wait()
        elif self.renewal_waiting.is_set() and not self.release.is_set():
            self.sent_while_held.append(str(kind or request.url.path))
        return await self._net.handle_async_request(request)

    async def aclose(self) -> None:
        await self._net.aclose()


async def test_a_checkpoint_waits_for_the_verdict_on_the_charge_in_flight__MW_11_5_j(
    world: World, live: LiveServer
) -> None:
    """300 of 400 tokens charged; 150 more metered; the renewal takes them and waits at the
    door while the handler saves a checkpoint. The checkpoint is not sent until the renewal
    is answered (refused ``budget_exceeded``, its 150 tokens given back); it then carries the
    150 itself and is refused the same way: no checkpoint kept, 300 tokens charged."""
    worker = world.workers[0]
    work = grant(world, "a", worker, budget=BUDGET)
    door = RenewalAtTheDoor()
    async with AuthorityClient(live.url, signing_key=worker.key, transport=door) as client:
        session = LeaseSession(worker, client, work, world.clock)
        ctx = WorkContext(work, session)
        ctx.usage.add(tokens=300)
        first = await ctx.save({"response": 2}, phase="model_response")
        assert first is not None and first.accepted, first
        ctx.usage.add(tokens=150)
        renewal = asyncio.create_task(session.renew())
        await door.renewal_waiting.wait()
        save = asyncio.create_task(ctx.save({"response": 3}, phase="model_response"))
        # The wait is the assertion: nothing the checkpoint sends may pass while the charge is
        # in flight (a save that went out would be answered within it on any machine; one
        # that waits, as it must, is never done before the release).
        done, _ = await asyncio.wait({save}, timeout=1.0)
        assert not done and door.sent_while_held == [], door.sent_while_held
        door.release.set()
        renewed, saved = await renewal, await save
    assert renewed.rejection is not None and renewed.rejection.code == "budget_exceeded"
    assert saved is not None and saved.rejection is not None, saved
    assert saved.rejection.code == "budget_exceeded"
    assert json.loads(world.item("a")["usage"])["tokens"] == 300
    checkpoints = [
        e.body["checkpoint"]
        for e in world.authority.events(world.group)
        if e.type == "work.progress_reported" and e.work_item_id == "a"
    ]
    assert checkpoints == [{"response": 2}]
