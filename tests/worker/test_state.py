"""The agent's local per-Group state (MW-11.1-a/b): fed by the verifying Subscriber from a real
Authority on loopback, and rebuilt identically by replay after the file is deleted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from missionweave.authority.client import Subscriber
from missionweave.protocol import Event
from missionweave.worker._state import LocalState
from tests.support.serving import LiveServer
from tests.support.waits import eventually
from tests.support.world import World, another_group


def populate(w: World) -> None:
    me, other = w.workers
    w.authorize("a")
    w.authorize("b")
    w.authorize("c")
    w.lease("a", me)
    w.ok(me, "work.checkpoint", w.leased("a", checkpoint={"done": 1}))  # → queued, resumable
    w.offer("b", me)  # an open offer to this agent, not answered yet
    w.run_to_verified("c", other)  # not ours
    g2 = another_group(w, mission="m1")
    g2.authorize("x")
    assert g2.accept(me, "x", g2.offer("x", me)).accepted


async def follow(live: LiveServer, w: World, state: LocalState) -> None:
    """Run a Subscriber into ``state`` until both Groups are at their heads."""

    async def on_event(event: Event) -> None:
        state.apply(event)

    sub = Subscriber(
        live.ws_url,
        w.workers[0],
        ["g1", "g2"],
        state.cursors,
        on_event,
        authority_public_key=w.authority.public_key,
    )
    task = asyncio.create_task(sub.run())
    heads = {g: w.authority.head(g)[0] for g in ("g1", "g2")}
    await eventually(lambda: all(sub.cursor(g) == h for g, h in heads.items()))
    await sub.stop()
    await task


async def test_per_group_state_rebuilt_by_replay__MW_11_1_b(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    populate(world)
    path = tmp_path / "agent" / "worker-0.db"
    state = LocalState(path, "worker-0")
    await follow(live, world, state)

    # MW-11.1-a: a separate cursor and work queue per Group (the offers' inbox is the agent's
    # Temporal task queue)
    assert state.cursors.get("g1") == world.authority.head("g1")[0]
    assert state.cursors.get("g2") == world.authority.head("g2")[0]
    assert [v.work_item_id for v in state.owned("g1", "queued")] == ["a"]
    assert [v.work_item_id for v in state.owned("g2", "queued")] == ["x"]
    a = state.item("g1", "a")
    assert a is not None and a.ownership_epoch == 1 and a.start_deadline_ms is not None
    # the one reducer's facts are the Authority's row
    row = world.authority.work_item("g1", "a")
    assert row is not None
    assert (a.state, a.owner, a.ownership_epoch, a.start_deadline_ms, a.revision) == (
        row["state"],
        row["owner"],
        row["ownership_epoch"],
        row["start_deadline_ms"],
        row["revision"],
    )
    # only its own WorkItems, metadata only (MW-13.3-e): no checkpoint, no contract
    assert state.item("g1", "b") is None and state.item("g1", "c") is None
    assert "done" not in str(state.projection())
    assert state.membership("g1").membership_epoch == 1 and "worker" in state.membership("g2").roles
    before = state.projection()
    state.close()

    for f in path.parent.glob("worker-0.db*"):  # the database and its WAL
        f.unlink()
    rebuilt = LocalState(path, "worker-0")
    assert rebuilt.projection()["work_items"] == []
    await follow(live, world, rebuilt)
    assert rebuilt.projection() == before  # MW-11.1-b: the log alone rebuilds it
    rebuilt.close()


async def test_redelivered_event_is_applied_once__MW_16_a(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    me = world.workers[0]
    world.authorize("a")
    assert world.accept(me, "a", world.offer("a", me)).accepted
    state = LocalState(tmp_path / "s.db", "worker-0")
    events = world.authority.all_events("g1")
    assert all(state.apply(e) for e in events)
    once = state.projection()
    assert not any(state.apply(e) for e in events)  # a crash between projection and cursor
    assert state.projection() == once
    view = state.item("g1", "a")
    assert view is not None and (view.state, view.ownership_epoch) == ("queued", 1)
    state.close()
