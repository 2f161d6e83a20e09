"""The ``/v1/stream`` WebSocket session: SUBSCRIBE, EVENT, ACK, ERROR (protocol section 16).

Frames are JSON objects with a ``type``::

    client → server  SUBSCRIBE {group, afterSequence, agent, issuedAtMs, nonce, signature}
                     ACK       {cursors: {group: seq}}
    server → client  EVENT     {group, event}
                     ERROR     {code, reason, detail[, snapshot]}

``signature`` is the agent's Ed25519 signature (base64url) over the canonical bytes of the
SUBSCRIBE frame without ``signature``; the agent must be an active member of the Group and
``issuedAtMs`` within :data:`MAX_SKEW_MS` of the Authority's clock (checked by
:func:`~._frames.check_member_frame`, shared with presence reports); its ``nonce`` (16 to 64
characters) is never accepted twice within that window, so a captured frame cannot be replayed
on another socket. A subscription ends (``ERROR unauthorized``) right after it delivers the
subscriber's own ``member.removed``. One socket may hold several
subscriptions (one per Group); a new SUBSCRIBE for a Group replaces the previous one.

A socket that has not had a SUBSCRIBE accepted is unauthenticated (:mod:`._connections`): it is
closed (1008) at its connection's deadline, a few seconds after it connected, and holds a place
of the unauthenticated budget until then; its first accepted SUBSCRIBE takes it out of that
budget. Replays and live follow read the log in the read lane (:mod:`._read_lane`), never in
front of a Command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from fastapi import WebSocket

from ...protocol import EventType, RejectionCode
from ..core import StoreForkedError, StoreUnavailableError
from ..wire import CursorTooOldError, FrameError, ReadRefused, is_int
from ._connections import Connection
from ._frames import MAX_SKEW_MS, check_member_frame
from ._front import Front
from ._limits import MAX_FRAME_BYTES, JSONProblem, parse_json
from ._metrics import read_refused
from ._pages import EventReader

log = logging.getLogger(__name__)

#: Events a pump sends before it lets the event loop serve the others. A replay's chunk holds
#: up to READ_CHUNK_BYTES of Events, and a send the socket's buffer takes does not yield: sent
#: unbroken, 100 far-behind replays held ``/healthz`` back 190 ms at p99
#: (bench/hostile_reads.py). No bound on pumps at once: a subscriber that stops reading would
#: hold its place and starve the rest.
SEND_SLICE = 2

#: A ``SUBSCRIBE`` further than this many Events behind the head is answered
#: ``CURSOR_TOO_OLD`` with a recent signed snapshot (MW-16-e) instead of a replay (MW-16-d):
#: a replay from 0 of a long log costs the server more than restoring a snapshot costs the
#: client.
MAX_REPLAY_EVENTS = 10_000
#: Seconds a socket may hold no subscription before the server closes it (1008).
WS_IDLE_TIMEOUT_S = 60.0


@dataclass(slots=True)
class _Subscription:
    agent: str
    task: asyncio.Task[None]


@dataclass(slots=True, eq=False, weakref_slot=True)
class StreamSession:
    """One WebSocket connection of ``/v1/stream``.

    Args:
        ws: the accepted WebSocket.
        front: the app's shared parts: the Authority whose Group logs are streamed, the
            notifier that wakes the pumps after a commit, the fallback poll period
            (``poll_interval_s``), the nonce memory (a SUBSCRIBE's nonce is used once), the
            replay bound (``max_replay_events``: further behind, ``CURSOR_TOO_OLD`` with a
            recent snapshot reference), the idle bound (``ws_idle_timeout_s``: a socket holding
            no subscription this long is closed, 1008) and the read lane.
        connection: the socket's place in the connection budget; until its first SUBSCRIBE is
            accepted, the socket is closed (1008) at its deadline. ``None``: served without a
            budget (only the idle bound applies).
    """

    ws: WebSocket
    front: Front
    connection: Connection | None = None
    _subs: dict[str, _Subscription] = field(default_factory=dict, init=False)
    # Pumps and the frame loop send concurrently; whole frames must not interleave.
    _send_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    @property
    def subscriptions(self) -> int:
        """Groups this socket is subscribed to now."""
        return len(self._subs)

    async def run(self) -> None:
        """Serve frames until the client disconnects; then stop every pump."""
        try:
            while True:
                conn = self.connection
                unproven = conn is not None and not conn.authenticated
                try:  # a socket that subscribes to nothing holds a connection for nothing
                    async with asyncio.timeout(self._timeout_s()):
                        message = await self.ws.receive()
                except TimeoutError:
                    with contextlib.suppress(Exception):
                        await self.ws.close(
                            1008,
                            "unauthenticated: no SUBSCRIBE accepted in time"
                            if unproven
                            else "idle: no subscription",
                        )
                    return
                if message["type"] == "websocket.disconnect":
                    return
                raw = message.get("text") or message.get("bytes") or b""
                try:
                    await self._handle(raw)
                except FrameError as err:
                    if err.code == RejectionCode.UNAUTHORIZED:  # a SUBSCRIBE (a read) refused
                        read_refused(err.code)
                    await self._error(err.code, err.reason, err.detail)
        finally:
            tasks = {sub.task for sub in self._subs.values()}
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)

    def _timeout_s(self) -> float | None:
        """Seconds this socket may wait for its next frame: the idle bound while it holds no
        subscription, and no later than its connection's deadline while unauthenticated."""
        conn = self.connection
        idle = None if self._subs else self.front.ws_idle_timeout_s
        if conn is not None and not conn.authenticated:
            return conn.remaining_s() if idle is None else min(idle, conn.remaining_s())
        return idle

    async def _handle(self, raw: str | bytes) -> None:
        if len(raw) > MAX_FRAME_BYTES:
            raise FrameError(
                RejectionCode.INVALID_FRAME,
                f"a frame is at most {MAX_FRAME_BYTES} bytes",
                max_bytes=MAX_FRAME_BYTES,
            )
        try:
            frame = parse_json(raw)
        except JSONProblem as exc:
            raise FrameError(
                RejectionCode.INVALID_FRAME, f"a frame is one JSON object: {exc.reason}"
            ) from None
        if not isinstance(frame, dict):
            raise FrameError(RejectionCode.INVALID_FRAME, "a frame is one JSON object")
        kind = frame.get("type")
        if kind == "SUBSCRIBE":
            await self._subscribe(frame)
        elif kind == "ACK":
            await self._ack(frame)
        else:
            raise FrameError(
                RejectionCode.INVALID_FRAME,
                f"unknown frame type {kind!r}",
                allowed=["SUBSCRIBE", "ACK"],
            )

    async def _subscribe(self, frame: dict[str, Any]) -> None:
        group, agent = frame.get("group"), frame.get("agent")
        after, issued = frame.get("afterSequence"), frame.get("issuedAtMs")
        signature = frame.get("signature")
        if not (
            isinstance(group, str)
            and isinstance(agent, str)
            and isinstance(signature, str)
            and isinstance(after, int)
            and isinstance(issued, int)
            and is_int(after)
            and is_int(issued)
            and after >= 0
        ):
            raise FrameError(
                RejectionCode.INVALID_FRAME,
                "SUBSCRIBE needs group, agent, afterSequence >= 0, issuedAtMs and signature",
                fields=["group", "agent", "afterSequence", "issuedAtMs", "signature"],
            )
        front = self.front
        head_seq = await front.lane.run(
            check_member_frame, front.authority, frame, group, agent, "SUBSCRIBE"
        )
        try:
            front.reads.check_fresh(issued, frame.get("nonce"))
            front.reads.remember(f"agent:{agent}", str(frame["nonce"]), issued)
        except ReadRefused as exc:
            raise FrameError(
                RejectionCode.UNAUTHORIZED, exc.reason, group=group, agent=agent
            ) from None
        if self.connection is not None:  # a member signed it: out of the stranger's budget
            self.connection.authenticate()
        if after > head_seq:
            raise FrameError(
                RejectionCode.INVALID_FRAME,
                f"afterSequence {after} is beyond the group's head {head_seq}",
                group=group,
                head_seq=head_seq,
            )
        old = self._subs.pop(group, None)
        if old is not None:
            old.task.cancel()
            await asyncio.wait({old.task})
        most = front.max_replay_events
        if head_seq - after > most:
            # far behind: a recent snapshot, not a replay of the whole gap (MW-16-d/e)
            snap = await front.lane.run(front.authority.recent_snapshot, group, most)
            await self._send(
                {
                    "type": "ERROR",
                    "code": CursorTooOldError.code,
                    "reason": f"afterSequence {after} is {head_seq - after} Events behind the "
                    f"head; more than {most} are not replayed: restore the "
                    "snapshot and subscribe after its sequence",
                    "detail": {
                        "group": group,
                        "after_sequence": after,
                        "head_seq": head_seq,
                        "max_replay_events": most,
                    },
                    "snapshot": snap,
                }
            )
            return
        task = asyncio.create_task(self._pump(group, agent, after), name=f"stream-{group}")
        self._subs[group] = _Subscription(agent, task)

    async def _ack(self, frame: dict[str, Any]) -> None:
        """Record cursors (MW-16-c). Only ``cursors`` rows change: history is never deleted."""
        cursors = frame.get("cursors")
        if not isinstance(cursors, dict) or not all(is_int(v) for v in cursors.values()):
            raise FrameError(RejectionCode.INVALID_FRAME, "ACK needs cursors: {group: seq}")
        for group, seq in cursors.items():
            sub = self._subs.get(group)
            if sub is None:
                await self._error(
                    RejectionCode.INVALID_FRAME,
                    "ACK for a group this socket has not subscribed to",
                    {"group": group},
                )
                continue
            try:
                await asyncio.to_thread(self.front.authority.ack, group, sub.agent, seq)
            except ValueError as exc:
                await self._error(
                    RejectionCode.INVALID_FRAME, str(exc), {"group": group, "seq": seq}
                )

    async def _pump(self, group: str, agent: str, after: int) -> None:
        """Replay Events after ``after`` in order, then follow the log live (MW-16-d), until
        ``agent``'s own removal from the Group, which ends the subscription."""
        front = self.front
        reader = EventReader(front.authority, group, after, front.lane)
        # the frame around an Event's stored JSON, sent as stored: no parse, no re-dump
        head = '{"type":"EVENT","group":' + json.dumps(group) + ',"event":'
        try:
            while True:
                waiter = front.notifier.waiter(group)  # before the read: see _batch.Notifier
                try:
                    rows, _, more = await reader.chunk()
                except StoreForkedError as exc:  # never serve a forked log: the client alarms
                    await self._error(exc.code, exc.reason, {"group": group, "forks": exc.forks})
                    self._subs.pop(group, None)
                    return
                except StoreUnavailableError as exc:
                    # the database is away: keep the subscription, read again once it is back
                    # (a notification or the poll wakes this pump; it reads the log itself)
                    log.info("stream of %s waits for the store: %s", group, exc.reason)
                    await front.notifier.wait(waiter, max(front.poll_interval_s, 1.0))
                    continue
                except CursorTooOldError as exc:
                    await self._send(
                        {
                            "type": "ERROR",
                            "code": exc.code,
                            "reason": str(exc),
                            "detail": {
                                "group": group,
                                "after_sequence": exc.after_sequence,
                                "first_online_seq": exc.first_online_seq,
                            },
                            "snapshot": exc.snapshot,
                        }
                    )
                    return
                for i, row in enumerate(rows, 1):
                    async with self._send_lock:
                        await self.ws.send_text(head + row + "}")
                    if i % SEND_SLICE == 0:  # let the loop serve the others between slices
                        await asyncio.sleep(0)
                    if '"member.removed"' in row and _removes(row, agent):
                        ev = json.loads(row)
                        await self._error(
                            RejectionCode.UNAUTHORIZED,
                            "the subscriber was removed from the group",
                            {"group": group, "agent": agent, "seq": ev["seq"]},
                        )
                        self._subs.pop(group, None)
                        return
                if not more:
                    await front.notifier.wait(waiter, front.poll_interval_s)
        except asyncio.CancelledError:
            raise
        except Exception:  # the socket went away mid-send; run() sees the disconnect
            log.debug("stream pump for %s ended", group, exc_info=True)

    async def _error(self, code: str, reason: str, detail: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            await self._send({"type": "ERROR", "code": code, "reason": reason, "detail": detail})

    async def _send(self, frame: dict[str, Any]) -> None:
        text = json.dumps(frame, separators=(",", ":"))
        async with self._send_lock:
            await self.ws.send_text(text)


def _removes(row: str, agent: str) -> bool:
    """Whether the stored Event ``row`` is ``agent``'s own ``member.removed``."""
    ev = json.loads(row)
    body = ev.get("body") or {}
    return bool(ev.get("type") == EventType.MEMBER_REMOVED and body.get("agent_id") == agent)


__all__ = ["MAX_REPLAY_EVENTS", "MAX_SKEW_MS", "WS_IDLE_TIMEOUT_S", "StreamSession"]
