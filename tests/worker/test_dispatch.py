"""The start queue (:class:`~missionweave.worker._dispatch.Dispatcher`) without Temporal: which
waiter of a WorkItem is served when an activity for it runs twice on one agent (issue 24,
finding 1: a frozen agent's stale attempt and Temporal's retry of it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from missionweave.protocol import Actor
from missionweave.worker._dispatch import Dispatcher, NoSlot
from missionweave.worker._scheduler import QueuedItem, Scheduler
from missionweave.worker._slots import SlotBoard
from missionweave.worker._state import LocalState
from tests.support.waits import WAIT_S

T0 = 1_800_000_000_000


def _item(deadline_ms: int | None = None) -> QueuedItem:
    return QueuedItem("g", "w1", "m", 1, deadline_ms, T0, lease_ms=2_000)


async def test_a_stale_waiters_exit_never_unqueues_the_newer_attempt__MW_11_5_a(
    tmp_path: Path,
) -> None:
    """Two waiters for one (group, item) — the stale attempt of a frozen agent and its retry:
    the first is cancelled (Temporal gave up on it) and the second is still served a slot."""
    state = LocalState(tmp_path / "s.db", "ada")
    board = SlotBoard(1)
    board.reserve(("g", "busy"), hold_s=60)  # the only slot is taken: both must wait
    disp = Dispatcher(Actor.generate("ada"), state, ["g"], Scheduler(1), board, clock=lambda: T0)
    stale = asyncio.create_task(disp.wait_for_slot(_item()))
    await asyncio.sleep(0)
    retry = asyncio.create_task(disp.wait_for_slot(_item()))
    await asyncio.sleep(0)
    try:
        stale.cancel()
        results = await asyncio.gather(stale, return_exceptions=True)
        # the stale attempt ended: superseded, or cancelled if that came first
        assert isinstance(results[0], (asyncio.CancelledError, NoSlot))
        assert disp.depth("g") == 1  # the retry still waits in the queue
        board.release(("g", "busy"))
        disp.dispatch_once()
        await asyncio.wait_for(retry, WAIT_S)  # served: it has the slot
        assert ("g", "w1") in board.busy()
    finally:
        disp.close("test over")
        retry.cancel()  # on the code of 2026-12-03 nothing would ever end it
        await asyncio.gather(stale, retry, return_exceptions=True)
        state.close()


async def test_a_superseded_waiter_ends_and_its_deadline_still_fails_the_newer__MW_11_5_a(
    tmp_path: Path,
) -> None:
    """The newer attempt replaces the older one, which ends at once (it would otherwise wait
    for ever); the newer one meets its start deadline like any other (MW-11.5-a)."""
    now = [T0]
    state = LocalState(tmp_path / "s.db", "ada")
    board = SlotBoard(1)
    board.reserve(("g", "busy"), hold_s=60)
    disp = Dispatcher(
        Actor.generate("ada"), state, ["g"], Scheduler(1), board, clock=lambda: now[0]
    )
    first = asyncio.create_task(disp.wait_for_slot(_item(T0 + 1_000)))
    await asyncio.sleep(0)
    second = asyncio.create_task(disp.wait_for_slot(_item(T0 + 1_000)))
    try:
        with pytest.raises(NoSlot):
            await asyncio.wait_for(first, WAIT_S)
        now[0] = T0 + 1_000
        disp.dispatch_once()
        with pytest.raises(NoSlot, match="w1"):
            await asyncio.wait_for(second, WAIT_S)
        assert disp.depth() == 0
    finally:
        disp.close("test over")
        for t in (first, second):
            t.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        state.close()
