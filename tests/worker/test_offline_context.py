"""A handler's view of an Authority it cannot reach (MW-11.5-c/d/e), against a real Authority
on loopback behind a proxy that drops every connection: progress is buffered durably and
reconciled first, the grace deadline stops the work, and the fence is mandatory for
irreversible actions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from missionweave.authority.client import AuthorityClient
from missionweave.authority.wire import SubmitResult
from missionweave.protocol import RESOURCE_USAGE_RECORDED, Command
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput
from missionweave.worker import LeaseLost, WorkContext
from missionweave.worker._lease import LeaseSession
from missionweave.worker._offline import OfflineBuffer
from tests.support.executor_harness import grant
from tests.support.loopback_proxy import DroppingProxy
from tests.support.serving import LiveServer
from tests.support.waits import WAIT_S
from tests.support.world import World

GRACE_MS = 60_000


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
        key = await asyncio.wait_for(effect, WAIT_S)
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
            await asyncio.wait_for(effect, WAIT_S)
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
        # a local, undoable step: only the risk class can make it wait
        call = asyncio.create_task(ctx.tool_call("search", reversible=True, external=False))
        if goes_on:  # it ends while the Authority is still unreachable
            await asyncio.wait_for(call, WAIT_S)
        else:  # it waits for the Authority: a while later it has not ended
            await asyncio.sleep(1.2)
            assert not call.done()
        proxy.restore()
        await asyncio.wait_for(call, WAIT_S)
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
    ctx = WorkContext(work, session)
    async with client:
        ref = await asyncio.wait_for(ctx.publish(b'{"ok": true}', "application/json"), WAIT_S)
    assert len(fenced) == 1
    assert ctx.published == [ref.hash]
    published = [e for e in world.authority.events(world.group) if e.type == "artifact.published"]
    assert [e.body["artifact_hash"] for e in published] == [ref.hash]


@contextlib.asynccontextmanager
async def _offline_past_the_lease(world: World, proxy: DroppingProxy) -> AsyncIterator[WorkContext]:
    """WorkItem ``a`` of a low-risk contract at work with ``worker-0``: its context cut off
    from the Authority (which it has learnt), the lease and its token expired, still within
    the grace."""
    work = grant(world, "a", world.workers[0], risk_class="low")
    ctx, client = await _context(world, proxy, work, OfflineBuffer())
    lease = work.lease
    assert lease is not None
    async with client:
        proxy.cut()
        await ctx.report("working")  # learns that the Authority is unreachable
        world.clock.advance(lease.expires_at_ms - world.clock.now + 1)  # lease and token expired
        yield ctx


@pytest.mark.parametrize("action", ["reversible_effect", "default_tool_call"])
async def test_nothing_externally_visible_on_an_expired_lease_offline__MW_11_5_d(
    world: World, proxy: DroppingProxy, action: str
) -> None:
    """A reversible effect and a tool call (reversible by default) of a low-risk contract leave
    the process: offline, with the lease and its token expired (still within the grace), they
    wait for a lease the Authority confirms, and past the grace they are refused, uncounted."""
    async with _offline_past_the_lease(world, proxy) as ctx:
        call = asyncio.create_task(
            ctx.effect("ledger", reversible=True)
            if action == "reversible_effect"
            else ctx.tool_call("search")
        )
        await asyncio.sleep(0.3)
        world.clock.advance(GRACE_MS)  # the grace ends while it waits
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(call, WAIT_S)
    assert ctx.usage.side_effects == 0 and ctx.usage.tool_calls == 0


async def test_local_reversible_computation_goes_on_offline__MW_11_5_c(
    world: World, proxy: DroppingProxy
) -> None:
    """What stays in the process and can be undone there (``external=False``) goes on offline
    within the grace, even with the lease expired; past the grace it stops too."""
    async with _offline_past_the_lease(world, proxy) as ctx:
        key = await asyncio.wait_for(ctx.tool_call("scratch", external=False), WAIT_S)
        assert key == ctx.idempotency_key("tool:scratch:1")
        world.clock.advance(GRACE_MS)
        with pytest.raises(LeaseLost):
            await ctx.tool_call("scratch", external=False)
    assert ctx.usage.tool_calls == 1


async def test_each_tool_call_has_its_own_key_stable_across_a_resume(
    world: World, live: LiveServer
) -> None:
    """Every call of a tool gets its own operation id (``tool:<name>:<n>``, or the caller's
    ``op_id``); the per-tool counter travels in the checkpoint, so a resumed attempt derives
    the same keys for the calls after it."""
    work = grant(world, "a", world.workers[0], risk_class="low")
    worker = world.workers[0]
    async with AuthorityClient(live.url, signing_key=worker.key) as client:
        ctx = WorkContext(work, LeaseSession(worker, client, work, world.clock, OfflineBuffer()))
        first = [await ctx.tool_call("search"), await ctx.tool_call("search")]
        assert len(set(first)) == 2
        assert await ctx.tool_call("search", op_id="q-7") == ctx.idempotency_key("tool:search:q-7")
        await ctx.save({"step": 1})
        after = await ctx.tool_call("search")
        assert ctx.checkpoint == {"step": 1}  # the handler's own state, as it gave it
        stored = json.loads(world.item("a")["checkpoint"])  # what a resumed attempt is given
        resumed_work = work.model_copy(update={"checkpoint": stored})
        again = WorkContext(
            resumed_work, LeaseSession(worker, client, resumed_work, world.clock, OfflineBuffer())
        )
        assert again.checkpoint == {"step": 1}
        assert await again.tool_call("search") == after
        assert after not in first


async def test_a_publish_is_fenced_by_its_write_grant__MW_11_5_d(
    world: World, proxy: DroppingProxy, tmp_path: Path
) -> None:
    """While nothing is buffered and the Authority answers, the write grant is the publish's
    fence (one round trip less than a separate confirmation): a lease the Authority closed
    behind the agent's back — here the WorkItem cancelled — makes the publish ``LeaseLost``
    with the grant's code, and no byte reaches the store."""
    work = grant(world, "a", world.workers[0], risk_class="low")
    ctx, client = await _context(world, proxy, work, OfflineBuffer())
    async with client:
        ref = await ctx.publish(b"while the lease stands", "text/plain", deliverable=False)
        assert ref.size == 22
        world.ok(world.coordinator, "work.cancel", {"work_item_id": "a", "reason": "test"})
        with pytest.raises(LeaseLost) as lost:
            await ctx.publish(b"after the lease closed", "text/plain", deliverable=False)
    assert lost.value.code == "stale_lease"
    blobs = [p.read_bytes() for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert b"while the lease stands" in blobs
    assert b"after the lease closed" not in blobs


@pytest.mark.parametrize("action", ["effect", "tool_call"])
async def test_no_slot_acts_before_anothers_buffer_is_reconciled__MW_11_5_e(
    world: World, proxy: DroppingProxy, action: str
) -> None:
    """Slot ``a`` buffers a checkpoint while the Authority is cut off; the Authority comes back
    (the proxy lets connections through again) before anything reconciled it. Slot ``b``,
    which never saw the outage and holds an unexpired lease and token, takes a reversible
    external side effect: the runtime reconciles ``a``'s buffer first, so the progress is in
    the log (and the buffer empty) before ``b``'s action is let through."""
    buffer = OfflineBuffer()
    ctx_a, client_a = await _context(world, proxy, grant(world, "a", world.workers[0]), buffer)
    ctx_b, client_b = await _context(world, proxy, grant(world, "b", world.workers[0]), buffer)
    async with client_a, client_b:
        proxy.cut()
        await ctx_a.save({"step": 1})
        assert len(buffer) == 1
        proxy.restore()
        if action == "effect":
            await ctx_b.effect("ledger", reversible=True)
        else:
            await ctx_b.tool_call("search")
        assert len(buffer) == 0  # reconciled before the action was allowed
    reconciled = [
        e
        for e in world.authority.events(world.group)
        if e.type == "work.progress_reported" and e.work_item_id == "a" and "reconciled" in e.body
    ]
    assert [e.body["checkpoint"] for e in reconciled] == [{"step": 1}]
