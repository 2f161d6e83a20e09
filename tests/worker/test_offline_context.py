"""A handler's view of an Authority it cannot reach (MW-11.5-c/d/e), against a real Authority
on loopback behind a proxy that drops every connection: progress is buffered durably and
reconciled first, the grace deadline stops the work, and the fence is mandatory for
irreversible actions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from missionweave.artifacts import FilesystemStore
from missionweave.authority.client import AuthorityClient
from missionweave.authority.wire import SubmitResult
from missionweave.protocol import RESOURCE_USAGE_RECORDED, Command
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput
from missionweave.worker import LeaseLost, WorkContext
from missionweave.worker._lease import LeaseSession
from missionweave.worker._offline import OfflineBuffer
from tests.executor_harness import grant
from tests.loopback_proxy import DroppingProxy
from tests.serving import LiveServer
from tests.world import World

GRACE_MS = 60_000


@pytest_asyncio.fixture
async def proxy(live: LiveServer) -> AsyncIterator[DroppingProxy]:
    p = DroppingProxy(live.port)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


async def _context(
    w: World, proxy: DroppingProxy, work: ExecuteWorkItemInput, buffer: OfflineBuffer
) -> tuple[WorkContext, AuthorityClient]:
    worker = w.workers[0]
    client = AuthorityClient(proxy.url, signing_key=worker.key)
    session = LeaseSession(worker, client, work, w.clock, buffer)
    return WorkContext(work, session), client


async def test_mw_11_5_c_progress_buffered_durably_and_reconciled_first(
    world: World, proxy: DroppingProxy, tmp_path: Path
) -> None:
    path = tmp_path / "ada.offline.sqlite3"
    ctx, client = await _context(
        world, proxy, grant(world, "a", world.workers[0]), OfflineBuffer(path)
    )
    async with client:
        proxy.cut()
        ctx.usage.add(tokens=5)
        await ctx.save({"step": 1})  # no exception: the handler goes on
        reopened = OfflineBuffer(path)  # another connection: it is on disk
        (held,) = reopened.pending()
        reopened.close()
        assert held.body["checkpoint"] == {"step": 1} and "usage" not in held.body
        proxy.restore()
        await ctx.report("after the outage")
    log = [e for e in world.authority.events(world.group) if e.work_item_id == "a"]
    types = [e.type for e in log]
    i = types.index(RESOURCE_USAGE_RECORDED)
    assert types[i:] == [
        RESOURCE_USAGE_RECORDED,
        "work.progress_reported",
        "work.progress_reported",
    ]
    assert log[i].body["delta"]["tokens"] == 5
    assert log[i + 1].body["checkpoint"] == {"step": 1} and "reconciled" in log[i + 1].body
    assert log[i + 2].body["report"]["phase"] == "after the outage"
    assert log[i + 1].command_id == held.command_id  # the same Command, rebased


async def test_mw_11_5_c_past_the_grace_deadline_work_stops(
    world: World, proxy: DroppingProxy
) -> None:
    work = grant(world, "a", world.workers[0])
    buffer = OfflineBuffer()
    ctx, client = await _context(world, proxy, work, buffer)
    async with client:
        proxy.cut()
        world.clock.advance(work.lease.expires_at_ms - world.clock.now + GRACE_MS)  # type: ignore[union-attr]
        with pytest.raises(LeaseLost) as lost:
            await ctx.save({"step": 1})
    assert lost.value.code == "grace_expired"
    assert len(buffer) == 0


async def test_mw_11_5_d_an_irreversible_effect_waits_for_a_confirmed_lease(
    world: World, proxy: DroppingProxy
) -> None:
    ctx, client = await _context(world, proxy, grant(world, "a", world.workers[0]), OfflineBuffer())
    async with client:
        proxy.cut()
        effect = asyncio.create_task(ctx.effect("ledger"))
        await asyncio.sleep(1.2)
        assert not effect.done() and ctx.usage.side_effects == 0
        proxy.restore()
        key = await asyncio.wait_for(effect, 10)
    assert key == ctx.idempotency_key("ledger") and ctx.usage.side_effects == 1


async def test_mw_11_5_d_no_irreversible_effect_once_the_grace_has_passed(
    world: World, proxy: DroppingProxy
) -> None:
    work = grant(world, "a", world.workers[0])
    ctx, client = await _context(world, proxy, work, OfflineBuffer())
    async with client:
        proxy.cut()
        effect = asyncio.create_task(ctx.effect("ledger"))
        await asyncio.sleep(0.8)
        world.clock.advance(work.lease.expires_at_ms - world.clock.now + GRACE_MS)  # type: ignore[union-attr]
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(effect, 10)
    assert ctx.usage.side_effects == 0


@pytest.mark.parametrize(("risk", "goes_on"), [("low", True), ("high", False)])
async def test_mw_11_5_d_risk_class_decides_what_is_irreversible(
    world: World, proxy: DroppingProxy, risk: str, goes_on: bool
) -> None:
    ctx, client = await _context(
        world, proxy, grant(world, "a", world.workers[0], risk_class=risk), OfflineBuffer()
    )
    async with client:
        proxy.cut()
        await ctx.report("working")  # learns that the Authority is unreachable
        call = asyncio.create_task(ctx.tool_call("search", reversible=True))
        await asyncio.sleep(1.2)
        assert call.done() is goes_on
        proxy.restore()
        await asyncio.wait_for(call, 10)
    assert ctx.usage.tool_calls == 1


async def test_mw_11_5_c_a_publication_the_authority_missed_is_sent_again_within_the_grace(
    world: World, proxy: DroppingProxy, tmp_path: Path
) -> None:
    """The Authority goes away between ``publish``'s fence and its registration (a `dev up`
    killed mid-handler, issue 24 finding 3): ``publish`` waits for it within the lease's grace
    period and registers the Artifact then, as ``report``/``save`` buffer, instead of failing
    the handler with ``AuthorityUnavailable``."""
    worker = world.workers[0]
    work = grant(world, "a", worker)
    fenced: list[str] = []

    class OutageAfterTheFence(AuthorityClient):
        async def submit(self, command: Command) -> SubmitResult:
            if command.type == "artifact.publish" and not fenced:
                fenced.append(command.command_id)  # the fence passed; now the outage begins
                proxy.cut()
                asyncio.get_running_loop().call_later(0.8, proxy.restore)
            return await super().submit(command)

    client = OutageAfterTheFence(proxy.url, signing_key=worker.key)
    session = LeaseSession(worker, client, work, world.clock, OfflineBuffer())
    ctx = WorkContext(work, session, artifact_store=FilesystemStore(tmp_path / "artifacts"))
    async with client:
        ref = await asyncio.wait_for(ctx.publish(b'{"ok": true}', "application/json"), 15)
    assert len(fenced) == 1
    assert ctx.published == [ref.hash]
    published = [e for e in world.authority.events(world.group) if e.type == "artifact.published"]
    assert [e.body["artifact_hash"] for e in published] == [ref.hash]
