"""A subscriber meets a forked log and stops with an alarm (issue 37, item 6).

A failover to a standby that lacked the last Events the Authority had signed and delivered
leaves a log that is shorter than the subscriber's cursor, or that holds other Events at those
sequences. The subscriber must not go on silently: it raises
:class:`~missionweave.authority.client.LogForkedError` (logged as an ALARM) and delivers
nothing past its cursor. The "failover" here rewrites the stored log behind a real server
(both Store backends); the Authority itself is not told.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from missionweave.authority import now_ms
from missionweave.authority.client import LogForkedError, MemoryCursorStore
from tests.authority.subscribing import Recorder, subscriber
from tests.support.serving import LiveServer, tamper
from tests.support.waits import WAIT_S, eventually
from tests.support.world import World, make_world

pytestmark = pytest.mark.both_backends


def _lose_the_last(w: World, n: int) -> tuple[int, str]:
    """Rewrite the stored log as a new primary without its last ``n`` Events would hold it:
    the head moves back; the kept head ``(seq, hash)``."""
    head, _ = w.authority.head(w.group)
    kept = w.authority.all_events(w.group)[head - n - 1]
    tamper(w, "DELETE FROM events WHERE group_id=? AND seq>?", w.group, kept.seq)
    tamper(w, "UPDATE groups SET head_seq=?, head_hash=? WHERE group_id=?", kept.seq, kept.hash,
           w.group)  # fmt: skip
    return kept.seq, kept.hash


@pytest.mark.parametrize("fork", ["different", "shorter"])
async def test_a_subscriber_meeting_a_forked_log_stops_with_an_alarm__MW_16_d(
    tmp_path: Path, fork: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``different``: other Events now follow at the lost sequences, and the next one links to
    another hash than the one the subscriber holds at its cursor. ``shorter``: the log ends
    below the cursor, which the subscriber finds when it resubscribes from it (MW-16-d)."""
    w = make_world(tmp_path / "a.db")
    w.clock.now = now_ms()
    server = LiveServer(w.authority, poll_interval_s=0.05)
    await server.start()
    rec = Recorder()
    sub = subscriber(server.ws_url, w, MemoryCursorStore(), rec)
    task = asyncio.create_task(sub.run())
    try:
        head, held_hash = w.authority.head(w.group)
        await eventually(lambda: sub.cursor(w.group) == head)
        _lose_the_last(w, 2)
        if fork == "different":  # the new primary takes Commands: other Events, past the cursor
            for i in range(3):
                w.ok(w.coordinator, "mission.create", {"mission_id": f"new-{i}", "title": "t"})
        else:  # the subscriber reconnects (the server restarts) and resubscribes at its cursor
            await server.stop()
            await server.start()
        with caplog.at_level(logging.CRITICAL), pytest.raises(LogForkedError) as raised:
            await asyncio.wait_for(task, WAIT_S)
        err = raised.value
        assert (err.group_id, err.seq, err.held_hash) == (w.group, head, held_hash)
        if fork == "different":
            assert err.found_hash is not None and err.found_hash != held_hash
            assert err.found_hash == w.authority.all_events(w.group)[head - 1].hash
        else:
            assert err.found_hash is None and err.head_seq == head - 2
        assert max(e.seq for e in rec.events) == head  # nothing past the fork was delivered
        assert sub.cursor(w.group) == head
        assert any("ALARM" in r.getMessage() and w.group in r.getMessage() for r in caplog.records)
    finally:
        await sub.stop()
        await asyncio.gather(task, return_exceptions=True)
        await server.stop()
        w.authority.close()
