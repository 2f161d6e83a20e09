"""A Subscriber (:class:`missionweave.authority.client.Subscriber`) of a World's Group over a
real server, for the Authority's delivery tests: :class:`Recorder` keeps what it is handed,
:func:`subscriber` builds one, :func:`restore_then_follow` runs one from a snapshot on."""

from __future__ import annotations

import asyncio
from typing import Any

from missionweave.authority.client import MemoryCursorStore, Subscriber
from missionweave.protocol import Actor, Event
from tests.support.waits import eventually
from tests.support.world import World


class Recorder:
    """The Events and snapshots a Subscriber handed over, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.snapshots: list[dict[str, Any]] = []

    async def on_event(self, ev: Event) -> None:
        self.events.append(ev)

    async def on_snapshot(self, snap: dict[str, Any]) -> None:
        self.snapshots.append(snap)


def subscriber(
    url: str, w: World, store: Any, rec: Recorder, actor: Actor | None = None
) -> Subscriber:
    """A Subscriber of ``w``'s Group at the stream ``url`` as ``actor`` (``w``'s first
    worker), its cursors in ``store``, recording into ``rec``; reconnects after 50 ms."""
    return Subscriber(
        url,
        actor or w.workers[0],
        [w.group],
        store,
        rec.on_event,
        authority_public_key=w.authority.public_key,
        on_snapshot=rec.on_snapshot,
        reconnect_delay_s=0.05,
    )


async def restore_then_follow(
    url: str, w: World, store: MemoryCursorStore | None = None
) -> Recorder:
    """Subscribe from the log's start where that start is past the replay bound (MW-16-e):
    wait until the Subscriber restored one snapshot, append a Mission, and wait until its
    cursor reached that Event; stopped at the end. What it recorded."""
    rec = Recorder()
    sub = subscriber(url, w, store or MemoryCursorStore(), rec)
    task = asyncio.create_task(sub.run())
    try:
        await eventually(lambda: len(rec.snapshots) == 1)
        w.ok(w.coordinator, "mission.create", {"mission_id": "after", "title": "t"})
        head, _ = w.authority.head(w.group)
        await eventually(lambda: sub.cursor(w.group) == head)
    finally:
        await sub.stop()
        await task
    return rec


__all__ = ["Recorder", "restore_then_follow", "subscriber"]
