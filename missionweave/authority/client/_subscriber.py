"""The recipient side of section 16: verified, ordered, deduplicated delivery over ``/v1/stream``.

:class:`Subscriber` drives the ordering core (:class:`~._sequencer.GroupSequencer`, one per
Group: MW-16-a, MW-16-b) from a WebSocket that reconnects forever (MW-16-d), restores a
snapshot on ``CURSOR_TOO_OLD`` (MW-16-e), persists cursors after each handled Event and ACKs
them (MW-16-c).

Inside a Subscriber a reader task turns frames into queue items and a processor task applies
them, so the socket keeps being read (and a reconnect can happen) while a handler is slow;
duplicates from a replay simply meet the sequencer.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import ClientConnection, connect

from ...protocol import Actor, Event, RejectionCode, canonical_bytes, new_id
from ..wire import now_ms
from ._client import (
    AuthorityClient,
    AuthorityRequestError,
    AuthorityUnavailable,
    LogForkedError,
    SnapshotVerificationError,
    SubscriberError,
    SubscriptionRefused,
)
from ._cursors import CursorStore
from ._sequencer import GroupSequencer

log = logging.getLogger(__name__)


def subscribe_frame(
    actor: Actor, group_id: str, after_sequence: int, issued_at_ms: int
) -> dict[str, Any]:
    """A signed SUBSCRIBE frame: the actor's signature over the canonical frame without it,
    with a fresh ``nonce`` (the Authority refuses a replayed frame)."""
    frame: dict[str, Any] = {
        "type": "SUBSCRIBE",
        "group": group_id,
        "afterSequence": after_sequence,
        "agent": actor.agent_id,
        "issuedAtMs": issued_at_ms,
        "nonce": new_id("sub"),
    }
    frame["signature"] = actor.key.sign(canonical_bytes(frame))
    return frame


def _compression(ws_url: str) -> str | None:
    """``permessage-deflate`` except on loopback, where it only costs CPU on both ends."""
    host = (urlsplit(ws_url).hostname or "").lower()
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return None if loopback else "deflate"


class Subscriber:
    """Follows Groups over ``/v1/stream`` and hands each Event to ``on_event`` exactly once.

    Args:
        ws_url: e.g. ``"ws://127.0.0.1:8787/v1/stream"``.
        actor: the agent that signs SUBSCRIBE frames (an active member of every Group).
        groups: the Group ids to follow.
        cursor_store: durable cursors; ``set`` is called after ``on_event`` returns.
        on_event: ``async (Event) -> None``; called in sequence order per Group, once per
            Event while this Subscriber lives (a crash before the cursor is stored redelivers).
        authority_public_key: the Authority's key; Events and snapshots must verify under it.
        client: used to fetch snapshots; by default one is made from ``ws_url``.
        on_snapshot: ``async (snapshot dict) -> None``, called with a verified snapshot before
            the cursor jumps to its sequence.
        reconnect_delay_s: seconds between connection attempts.
        clock: epoch-millisecond clock for ``issuedAtMs``.
        max_buffer: most out-of-order Events held per Group.

    Attributes:
        delivered: Events handed to ``on_event``.
        duplicates: Events dropped as already seen.
        received: EVENT frames read from the socket.
        connections: WebSocket connections opened.

    Implements MW-16-a, MW-16-b, MW-16-c, MW-16-d and MW-16-e.
    """

    def __init__(
        self,
        ws_url: str,
        actor: Actor,
        groups: list[str],
        cursor_store: CursorStore,
        on_event: Callable[[Event], Awaitable[None]],
        *,
        authority_public_key: str,
        client: AuthorityClient | None = None,
        on_snapshot: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
        reconnect_delay_s: float = 0.2,
        clock: Callable[[], int] = now_ms,
        max_buffer: int = 10_000,
    ) -> None:
        self.ws_url = ws_url
        self._actor = actor
        self._groups = list(groups)
        self._store = cursor_store
        self._on_event = on_event
        self._key = authority_public_key
        self._client = client
        self._on_snapshot = on_snapshot
        self._delay_s = reconnect_delay_s
        self._clock = clock
        last_hash: Callable[[str], str | None] = getattr(cursor_store, "last_hash", lambda g: None)
        self._seq = {
            g: GroupSequencer(
                g,
                authority_public_key,
                cursor=cursor_store.get(g),
                last_hash=last_hash(g),
                max_buffer=max_buffer,
            )
            for g in self._groups
        }
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=max_buffer)
        self._ws: ClientConnection | None = None
        self._send_lock = asyncio.Lock()
        self._unacked: set[str] = set()
        self._stopped = asyncio.Event()
        self.delivered = self.duplicates = self.received = self.connections = 0

    def cursor(self, group_id: str) -> int:
        """The durable cursor of ``group_id`` (highest contiguous processed sequence)."""
        return self._seq[group_id].cursor

    async def stop(self) -> None:
        """Make :meth:`run` return, now or as soon as it starts; a stopped Subscriber stays
        stopped. A handler in progress is cancelled: its cursor was not stored, so its Event
        is delivered again to the next Subscriber on the same store."""
        self._stopped.set()

    async def run(self) -> None:
        """Connect, subscribe and deliver until :meth:`stop`, reconnecting after any drop.

        Raises:
            SubscriptionRefused: the server answered ``unauthorized`` or ``unknown_group``.
            SnapshotVerificationError: a CURSOR_TOO_OLD snapshot does not verify.
            EventVerificationError: the Authority's chain forks (:class:`LogForkedError`: the log
                no longer holds the Event at this subscriber's cursor; logged as an ALARM).
            Exception: whatever ``on_event`` or ``on_snapshot`` raised (the cursor stays before
                that Event).
        """
        owns_client = self._client is None
        if self._client is None:
            self._client = AuthorityClient(
                _http_base(self.ws_url),
                authority_public_key=self._key,
                signing_key=self._actor.key,
                clock=self._clock,
            )
        tasks = {
            asyncio.create_task(self._process(), name="subscriber-process"),
            asyncio.create_task(self._connect_forever(), name="subscriber-connect"),
        }
        stopper = asyncio.create_task(self._stopped.wait())
        try:
            done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (*tasks, stopper):
                t.cancel()
            await asyncio.wait({*tasks, stopper})
            if owns_client:
                await self._client.aclose()
                self._client = None
        if stopper in done:
            return
        for t in done:
            exc = t.exception()
            if exc is not None:
                raise exc

    # -------------------------------------------------------------------- connection side

    async def _connect_forever(self) -> None:
        while True:
            try:
                await self._connect_once()
            except (OSError, TimeoutError, websockets.WebSocketException) as exc:
                log.info("stream %s dropped: %r; reconnecting", self.ws_url, exc)
            await asyncio.sleep(self._delay_s)

    async def _connect_once(self) -> None:
        async with connect(
            self.ws_url, max_size=64 * 2**20, open_timeout=10, compression=_compression(self.ws_url)
        ) as ws:
            self.connections += 1
            for g in self._groups:  # resume from the durable cursor (MW-16-d)
                cursor = self._seq[g].cursor
                await ws.send(json.dumps(subscribe_frame(self._actor, g, cursor, self._clock())))
            # Only now may the processor send on it: an ACK must follow the SUBSCRIBEs.
            self._ws = ws
            try:
                async for raw in ws:
                    await self._on_frame(raw)
            finally:
                self._ws = None

    async def _on_frame(self, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
            kind = frame["type"]
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable frame dropped")
            return
        if kind == "EVENT":
            self.received += 1
            try:
                event = Event.model_validate(frame["event"])
            except (ValueError, KeyError):
                log.warning("malformed EVENT frame dropped")
                return
            await self._queue.put(("event", event))
        elif kind == "ERROR":
            code = frame.get("code")
            detail = frame.get("detail") if isinstance(frame.get("detail"), dict) else {}
            if code == RejectionCode.CURSOR_TOO_OLD:
                await self._queue.put(("too_old", frame))
            elif code in (RejectionCode.UNAUTHORIZED, RejectionCode.UNKNOWN_GROUP):
                raise SubscriptionRefused(str(code), str(frame.get("reason", "")), detail)
            elif (fork := self._fork_in(str(code), detail)) is not None:
                raise fork
            else:
                log.error("stream error %s: %s %s", code, frame.get("reason"), detail)

    def _fork_in(self, code: str, detail: dict[str, Any]) -> LogForkedError | None:
        """The alarm an ERROR frame raises: the Authority's head is below this subscriber's
        cursor (its log lost Events already delivered: ``afterSequence`` beyond the head), or
        the Authority found its own store forked (``log_forked``); else ``None``."""
        seq = self._seq.get(str(detail.get("group")))
        if seq is None:
            return None
        head = detail.get("head_seq")
        if code == RejectionCode.INVALID_FRAME and isinstance(head, int) and head < seq.cursor:
            return seq.forked(seq.cursor, None, head_seq=head)
        if code == RejectionCode.LOG_FORKED:
            return seq.forked(seq.cursor, None)
        return None

    async def _send(self, frame: dict[str, Any]) -> bool:
        ws = self._ws
        if ws is None:
            return False
        try:
            async with self._send_lock:
                await ws.send(json.dumps(frame, separators=(",", ":")))
        except websockets.ConnectionClosed:
            return False
        return True

    async def _subscribe(self, group_id: str) -> None:
        cursor = self._seq[group_id].cursor
        await self._send(subscribe_frame(self._actor, group_id, cursor, self._clock()))

    async def _ack(self) -> None:
        """Report the cursors that moved since the last ACK (MW-16-c)."""
        if not self._unacked:
            return
        cursors = {g: self._seq[g].cursor for g in sorted(self._unacked)}
        if await self._send({"type": "ACK", "cursors": cursors}):
            self._unacked.clear()

    async def _reconnect(self) -> None:
        ws = self._ws
        if ws is not None:
            await ws.close()

    # --------------------------------------------------------------------- processing side

    async def _process(self) -> None:
        since_ack = 0
        while True:
            got = [await self._queue.get()]
            while not self._queue.empty() and len(got) < 1024:
                got.append(self._queue.get_nowait())
            events: list[Event] = []
            for kind, item in got:
                if kind == "event":
                    events.append(item)
                    continue
                since_ack += await self._deliver(events)
                events = []
                await self._restore(item)
                since_ack += 1  # the cursor may have jumped to the snapshot
            since_ack += await self._deliver(events)
            # ACK when caught up, or now and then under a steady stream.
            if since_ack and (self._queue.empty() or since_ack >= 256):
                await self._ack()
                since_ack = 0

    async def _deliver(self, events: list[Event]) -> int:
        """Verify, order and hand on a batch of arriving Events. Each Event's hash and link is
        checked; of each linked run, the Authority's signature is checked on the newest
        Event only — the hash chain makes it vouch for every Event before it (an Event that
        fails goes back to one check per Event, and the run stops before it)."""
        touched: dict[str, GroupSequencer] = {}
        for event in events:
            seq = self._seq.get(event.group_id)
            if seq is None:
                continue
            outcome = seq.offer(event, signature=False)
            if outcome == "duplicate":
                self.duplicates += 1
            elif outcome in ("invalid", "overflow"):
                # The stream will not send this Event again on this connection: reconnect,
                # which resubscribes from the durable cursor and fills the gap (MW-16-b/d).
                await self._reconnect()
            else:
                touched[event.group_id] = seq
        count = 0
        for seq in touched.values():
            refused = seq.refused
            run = seq.ready_run()
            if seq.refused != refused:
                await self._reconnect()  # the replay brings the genuine Event
            if run and not seq.signed(run[-1]):
                good = []
                for ev in run:
                    if not seq.signed(ev):
                        log.error("group %s event %d refused: bad signature", seq.group_id, ev.seq)
                        seq.drop(ev)
                        await self._reconnect()
                        break
                    good.append(ev)
                run = good
            for ready in run:
                await self._on_event(ready)
                self._store.set(ready.group_id, ready.seq, ready.hash)  # only after the handler
                seq.commit(ready)
                self._unacked.add(ready.group_id)
                self.delivered += 1
                count += 1
        return count

    async def _restore(self, frame: dict[str, Any]) -> None:
        """Restore the snapshot of a CURSOR_TOO_OLD answer and resume after it (MW-16-e)."""
        ref = frame.get("snapshot") or {}
        detail = frame.get("detail") or {}
        group_id = ref.get("group_id") or detail.get("group")
        seq = self._seq.get(str(group_id))
        if seq is None:
            return
        if not ref or not isinstance(ref.get("seq"), int):
            raise SubscriberError(f"group {group_id!r}: CURSOR_TOO_OLD without a snapshot")
        if ref["seq"] > seq.cursor:
            assert self._client is not None
            try:
                snap = await self._client.snapshot(
                    seq.group_id, ref["seq"], authority_public_key=self._key
                )
            except (AuthorityUnavailable, AuthorityRequestError) as exc:
                # Transient (server restarting, snapshot replaced): the next SUBSCRIBE after a
                # reconnect answers CURSOR_TOO_OLD again with a current reference.
                log.warning("snapshot of %s at %s unavailable: %s", group_id, ref["seq"], exc)
                await self._reconnect()
                return
            if snap["hash"] != ref.get("hash"):
                raise SnapshotVerificationError(
                    f"group {group_id!r}: the snapshot at {ref['seq']} is not the one referenced"
                )
            if self._on_snapshot is not None:
                await self._on_snapshot(snap)
            self._store.set(seq.group_id, snap["seq"], snap["head_hash"])
            seq.reset(snap["seq"], snap["head_hash"])
            self._unacked.add(seq.group_id)
        await self._subscribe(seq.group_id)


def _http_base(ws_url: str) -> str:
    """``ws://host:port/v1/stream`` → ``http://host:port``."""
    scheme, rest = ws_url.split("://", 1)
    host = rest.split("/", 1)[0]
    return f"{'https' if scheme == 'wss' else 'http'}://{host}"


__all__ = ["Subscriber", "subscribe_frame"]
