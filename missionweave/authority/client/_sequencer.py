"""The pure ordering core of a recipient (MW-16-a, MW-16-b): verify, deduplicate, order.

No I/O: :class:`Subscriber` feeds it from the WebSocket, and tests feed it directly.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Literal

from ...protocol import GENESIS_HASH, Event, check_event
from ._client import EventVerificationError, LogForkedError

log = logging.getLogger(__name__)

Offer = Literal["buffered", "duplicate", "invalid", "overflow"]


class GroupSequencer:
    """Orders, deduplicates and verifies the Events of one Group (MW-16-a, MW-16-b).

    Args:
        group_id: the Group.
        authority_public_key: the Authority's base64url key; every Event's hash and signature
            is checked before it is buffered.
        cursor: the durable cursor to start from (highest contiguous processed sequence).
        last_hash: the hash of Event ``cursor`` (``GENESIS_HASH`` when ``cursor`` is 0; a
            snapshot's ``head_hash`` after a restore); ``None`` skips one link check.
        max_buffer: most out-of-order Events held.

    Use: :meth:`offer` each arriving Event, then while :meth:`ready` returns an Event handle
    it and :meth:`commit` it. The cursor moves only by :meth:`commit` of ``cursor + 1``, so it
    never crosses a gap.
    """

    def __init__(
        self,
        group_id: str,
        authority_public_key: str,
        *,
        cursor: int = 0,
        last_hash: str | None = None,
        max_buffer: int = 10_000,
        remember: int = 4096,
    ) -> None:
        self.group_id = group_id
        self.cursor = cursor
        self.last_hash = GENESIS_HASH if cursor == 0 and last_hash is None else last_hash
        self._key = authority_public_key
        self._max_buffer = max_buffer
        self._remember = remember
        self._pending: dict[int, Event] = {}
        self._done_ids: OrderedDict[str, None] = OrderedDict()
        #: Held Events dropped as forgeries by :meth:`ready_run` (the caller reconnects).
        self.refused = 0

    @property
    def buffered(self) -> list[int]:
        """Sequences held out of order, ascending."""
        return sorted(self._pending)

    def offer(self, event: Event, *, signature: bool = True) -> Offer:
        """Take one arriving Event. Implements MW-16-a.

        ``signature=False`` checks its hash but not the Authority's signature: the caller then
        checks the signature of the newest Event of the run it takes (:meth:`ready_run`),
        which authenticates every Event before it through the hash links.

        Returns:
            ``buffered`` (kept until its turn), ``duplicate`` (already processed or held: dropped
            by event id or position), ``invalid`` (wrong Group, bad hash or signature: dropped)
            or ``overflow`` (buffer full: dropped, a replay will bring it again).

        Raises:
            EventVerificationError: a different validly signed Event already holds this
                sequence (the Authority forked the log).
            LogForkedError: a validly signed Event at the cursor has another hash than the
                one processed there (the log forked under this subscriber).
        """
        if event.group_id != self.group_id:
            return "invalid"
        if event.seq == self.cursor and self.last_hash is not None and event.hash != self.last_hash:
            # the Event at the cursor, again, with another hash: a fork if the Authority signed
            # it (a forgery is only dropped)
            if check_event(event, self._key, None) is None:
                raise self.forked(event.seq, event.hash)
            return "invalid"
        if event.seq <= self.cursor or event.event_id in self._done_ids:
            return "duplicate"
        held = self._pending.get(event.seq)
        if held is not None and held.event_id == event.event_id and held.hash == event.hash:
            return "duplicate"
        reason = check_event(event, self._key, None, signature=signature)
        if reason is not None:
            log.error("group %s event %d refused: %s", self.group_id, event.seq, reason)
            return "invalid"
        if held is not None:
            # Events taken without their signature checked (``signature=False``) may be
            # forgeries: only two validly signed Events at one sequence are a fork
            if not self.signed(event):
                log.error("group %s event %d refused: bad signature", self.group_id, event.seq)
                return "invalid"
            if not self.signed(held):
                log.error("group %s event %d refused: bad signature", self.group_id, held.seq)
                self._pending[event.seq] = event
                return "buffered"
            raise EventVerificationError(self.group_id, event.seq, "conflicting event")
        if len(self._pending) >= self._max_buffer and event.seq != self.cursor + 1:
            return "overflow"
        self._pending[event.seq] = event
        return "buffered"

    def ready(self) -> Event | None:
        """The next Event to process (``cursor + 1``), or ``None`` at a gap. Implements MW-16-b.

        Raises:
            LogForkedError: it does not link to the previous Event's hash (an
                :class:`EventVerificationError`).
        """
        ev = self._pending.get(self.cursor + 1)
        if ev is None:
            return None
        if self.last_hash is not None and ev.prev_hash != self.last_hash:
            raise self.forked(self.cursor, ev.prev_hash)
        return ev

    def forked(
        self, seq: int, found_hash: str | None, head_seq: int | None = None
    ) -> LogForkedError:
        """The alarm for a fork at ``seq`` (the cursor) where the Authority's log has
        ``found_hash`` (``None``: nothing), logged at CRITICAL: raise what it returns."""
        err = LogForkedError(
            self.group_id,
            seq,
            self.last_hash if seq == self.cursor else None,
            found_hash,
            head_seq=head_seq,
            reason=None if found_hash is None else f"broken link: log forked at {seq}",
        )
        log.critical(
            "ALARM group %s: the Authority's log forked at sequence %d: this subscriber holds "
            "%s there, the Authority %s (head %s); delivery stopped",
            self.group_id,
            seq,
            err.held_hash,
            found_hash or "nothing",
            head_seq,
        )
        return err

    def ready_run(self) -> list[Event]:
        """The Events from ``cursor + 1`` on that are held and linked, in order (empty at a
        gap). Nothing is committed. Implements MW-16-b.

        Raises:
            LogForkedError: the first one, validly signed, does not link to the previous
                Event's hash (an unsigned one is dropped and counted in :attr:`refused`).
        """
        first = self._pending.get(self.cursor + 1)
        if first is None:
            return []
        if self.last_hash is not None and first.prev_hash != self.last_hash:
            if not self.signed(first):  # a forgery, not a fork: drop it, a replay heals
                log.error("group %s event %d refused: bad signature", self.group_id, first.seq)
                self.drop(first)
                self.refused += 1
                return []
            raise self.forked(self.cursor, first.prev_hash)
        run = [first]
        while (nxt := self._pending.get(run[-1].seq + 1)) is not None:
            if nxt.prev_hash != run[-1].hash:
                break  # a broken link: it is checked when its turn comes (ready raises)
            run.append(nxt)
        return run

    def signed(self, event: Event) -> bool:
        """Whether the Authority's signature on ``event`` verifies."""
        return check_event(event, self._key, None) is None

    def drop(self, event: Event) -> None:
        """Forget a held Event that turned out invalid (a replay brings the right one)."""
        if self._pending.get(event.seq) is event:
            del self._pending[event.seq]

    def commit(self, event: Event) -> None:
        """Mark :meth:`ready`'s Event processed: the cursor moves to its sequence."""
        if event.seq != self.cursor + 1:
            raise ValueError(f"commit of {event.seq} with cursor {self.cursor}")
        self._pending.pop(event.seq, None)
        self.cursor, self.last_hash = event.seq, event.hash
        self._done_ids[event.event_id] = None
        if len(self._done_ids) > self._remember:
            self._done_ids.popitem(last=False)

    def reset(self, seq: int, head_hash: str) -> None:
        """Jump to a restored snapshot at ``seq`` whose head hash is ``head_hash`` (MW-16-e)."""
        self.cursor, self.last_hash = seq, head_hash
        for s in [s for s in self._pending if s <= seq]:
            del self._pending[s]


__all__ = ["GroupSequencer", "Offer"]
