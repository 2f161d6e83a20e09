"""The Authority's read side and log maintenance: Events, projections, cursors, archive and
snapshots. Mixed into :class:`~missionweave.authority.Authority`; every method takes the
Authority's lock, and every write here is its own Store transaction that rolls back on failure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...protocol import Event, SigningKey
from ..wire import CursorTooOldError, UnknownGroupError
from ._forks import HeadWatch
from ._snapshots import latest_snapshot, load_snapshot, take_snapshot
from ._store import Store


def require_group(store: Store, group_id: str) -> None:
    """Raise :class:`UnknownGroupError` unless ``group_id`` exists (the caller holds the lock)."""
    if store.one("groups.exists_by_group_id", group_id) is None:
        raise UnknownGroupError(group_id)


class LogReader:
    """Read and maintenance methods of the Authority (see the module docstring)."""

    store: Store
    key: SigningKey
    clock: Callable[[], int]
    config: Any
    heads: HeadWatch
    _lock: threading.Lock

    @contextmanager
    def _write(self, *, fsync: bool = True) -> Iterator[None]:
        """One write transaction under the lock: COMMIT, or ROLLBACK on error.
        ``fsync=False`` commits without waiting for the fsync (durable at the next one)."""
        with self._lock:
            self.store.begin(durable=fsync)
            try:
                yield
            except BaseException:
                self.store.rollback()
                raise
            self.store.commit()

    def _load_event(self, group_id: str, seq: int) -> Event:
        row = self.store.one("events.one", group_id, seq, group_id, seq)
        assert row is not None
        return Event.model_validate_json(row[0])

    def head(self, group_id: str) -> tuple[int, str]:
        """The Group's last sequence and hash (``(0, GENESIS_HASH)`` when empty).

        Raises:
            UnknownGroupError: no such Group.
        """
        with self._lock:
            row = self.store.one("groups.head", group_id)
        if row is None:
            raise UnknownGroupError(group_id)
        return int(row[0]), str(row[1])

    def events(self, group_id: str, after_sequence: int = 0, limit: int = 1000) -> list[Event]:
        """Events with ``seq > after_sequence`` in order, at most ``limit`` (1 to 10,000).

        Raises:
            UnknownGroupError: no such Group.
            CursorTooOldError: ``after_sequence`` is below the online window (MW-16-e).
            ValueError: ``limit`` or ``after_sequence`` out of range.
        """
        return self.events_page(group_id, after_sequence, limit)[0]

    def _page(self, group_id: str, after_sequence: int, limit: int) -> list[str]:
        """The stored JSON texts of the Events with ``seq > after_sequence``, in order, at most
        ``limit`` (1 to 10,000): the one read behind every page of the online log.

        Raises:
            UnknownGroupError: no such Group.
            CursorTooOldError: ``after_sequence`` is below the online window, which begins after
                the archived prefix; the error names the oldest readable sequence and the latest
                snapshot to resume from (MW-16-e).
            ValueError: ``limit`` or ``after_sequence`` out of range.
        """
        if not 1 <= limit <= 10_000 or after_sequence < 0:
            raise ValueError("limit must be 1..10000 and after_sequence >= 0")
        with self._lock:
            row = self.store.one("groups.archived_through", group_id)
            if row is None:
                raise UnknownGroupError(group_id)
            if after_sequence < row[0]:
                snap = latest_snapshot(self.store, group_id)
                raise CursorTooOldError(group_id, after_sequence, row[0] + 1, snap or {})
            page = self.store.all("events.page", group_id, after_sequence, limit)
        rows = [data for (data,) in page]
        self.heads.note_rows(group_id, after_sequence, rows)  # served: a failover keeps it
        return rows

    def events_page(
        self,
        group_id: str,
        after_sequence: int = 0,
        limit: int = 1000,
        max_bytes: int | None = None,
    ) -> tuple[list[Event], bool]:
        """Like :meth:`events`, with the page also cut once its Events' stored JSON passes
        ``max_bytes`` (always at least one Event): what a server answers one reader at a time.

        Returns:
            ``(events, cut)``: ``cut`` when the byte bound, not ``limit`` or the head, ended
            the page (read on from the last Event's ``seq``).

        Raises:
            UnknownGroupError, CursorTooOldError, ValueError: as :meth:`events`.
        """
        rows: list[str] = []
        size, cut = 0, False
        for data in self._page(group_id, after_sequence, limit):
            if rows and max_bytes is not None and size + len(data) > max_bytes:
                cut = True
                break
            rows.append(data)
            size += len(data)
        return [Event.model_validate_json(r) for r in rows], cut

    def event_chunk(
        self,
        group_id: str,
        after_sequence: int,
        limit: int,
        chunk_bytes: int,
        page_bytes: int | None = None,
        *,
        first_free: bool = True,
    ) -> tuple[list[str], bool, bool]:
        """The next Events of a streamed page, as their stored JSON texts (unparsed): those
        with ``seq > after_sequence``, in order, at most ``limit`` (1 to 10,000). Row ``i`` is
        the Event of sequence ``after_sequence + 1 + i`` (the online log is contiguous).

        Args:
            group_id: the Group.
            after_sequence: the last sequence already sent.
            limit: most rows.
            chunk_bytes: stop once the rows pass this many bytes (at least one row is taken):
                what a server holds in memory per read.
            page_bytes: never pass this many bytes (what is left of the page's bound); the
                first row is exempt when ``first_free`` (a page holds at least one Event).
            first_free: see ``page_bytes``.

        Returns:
            ``(rows, page_full, more)``: ``page_full`` when ``page_bytes`` ended the rows (the
            page ends there; the reader pages on from the last row's sequence); ``more`` when
            more Events may follow at once (``False``: the rows reach the head).

        Raises:
            UnknownGroupError, CursorTooOldError, ValueError: as :meth:`events`.
        """
        page = self._page(group_id, after_sequence, limit)
        rows: list[str] = []
        size = 0
        for data in page:
            n = len(data)
            if page_bytes is not None and size + n > page_bytes and (rows or not first_free):
                return rows, True, True
            if rows and size + n > chunk_bytes:
                return rows, False, True
            rows.append(data)
            size += n
        return rows, False, len(page) == limit

    def all_events(self, group_id: str) -> list[Event]:
        """The whole log, archive included, in order (for verification and tests)."""
        with self._lock:
            rows = self.store.all("events.all", group_id, group_id)
        return [Event.model_validate_json(r[1]) for r in rows]

    def member_groups(self, public_key: str) -> list[str]:
        """The Groups in which ``public_key`` is an active member's key, in order."""
        with self._lock:
            return [r[0] for r in self.store.all("members.groups_of_key", public_key)]

    def may_read(self, group_id: str, public_key: str) -> bool:
        """Whether ``public_key`` is an active member's key in ``group_id`` (spec 13.3-b: a
        member reads its Group's log; nobody else does).

        Raises:
            UnknownGroupError: no such Group.
        """
        with self._lock:
            require_group(self.store, group_id)
            return self.store.one("members.key_may_read", group_id, public_key) is not None

    def member_key(self, group_id: str, agent_id: str) -> str | None:
        """The public key of ``agent_id`` if it is an active member of ``group_id``, else
        ``None``."""
        with self._lock:
            row = self.store.one("members.active_key", group_id, agent_id)
        return None if row is None else str(row[0])

    def events_between(self, group_id: str, from_seq: int, to_seq: int) -> list[Event]:
        """The stored Events ``from_seq..to_seq`` (archive included), in order; a gap in the
        stored log shows as a missing sequence (the caller checks)."""
        with self._lock:
            rows = self.store.all(
                "events.range", group_id, from_seq, to_seq, group_id, from_seq, to_seq
            )
        return [Event.model_validate_json(r[1]) for r in rows]

    def groups(self) -> list[str]:
        """Every Group id."""
        with self._lock:
            return [r[0] for r in self.store.all("groups.ids")]

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """Run a read-only ``SELECT`` over the projections (``?`` placeholders, the common
        dialect of SQLite and PostgreSQL); rows as dicts. For tests and diagnostics.

        Raises:
            ValueError: ``sql`` is not a single ``SELECT`` / ``WITH`` statement.
        """
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head not in ("SELECT", "WITH") or ";" in sql.strip().rstrip(";"):
            raise ValueError("query() runs one SELECT statement")
        with self._lock:
            return self.store.select(sql, *args)

    def work_item(self, group_id: str, work_item_id: str) -> dict[str, Any] | None:
        """The WorkItem projection row, or ``None``."""
        with self._lock:
            row = self.store.one("work_items.row", group_id, work_item_id)
        return {k: row[k] for k in row.keys()} if row is not None else None

    def lease(self, lease_id: str) -> dict[str, Any] | None:
        """The lease row plus ``valid`` (active and unexpired now), or ``None``."""
        with self._lock:
            found = self.store.one("leases.row", lease_id)
        if found is None:
            return None
        row = {k: found[k] for k in found.keys()}
        row["valid"] = row["status"] == "active" and row["expires_at_ms"] > self.clock()
        return row

    def ack(self, group_id: str, agent_id: str, seq: int) -> int:
        """Record ``agent_id``'s durable cursor in ``group_id`` (MW-16-c); never deletes history.
        Implements MW-16-c.

        The stored cursor never moves backwards. Returns the stored cursor.

        Raises:
            UnknownGroupError: no such Group.
            ValueError: ``seq`` is negative or beyond the Group's head.
        """
        head, _ = self.head(group_id)
        if not 0 <= seq <= head:
            raise ValueError(f"cursor {seq} outside 0..{head}")
        # A cursor is advisory (history is never deleted for it), so its commit skips the
        # fsync: the next append's fsync makes it durable too (WAL), and a power loss before
        # that only takes it back. One fsync per ack cost the writer more than the ack itself.
        with self._write(fsync=False):
            self.store.run("cursors.advance", group_id, agent_id, seq, self.clock())
            row = self.store.one("cursors.seq", group_id, agent_id)
        assert row is not None
        return int(row[0])

    def maybe_archive(self, group_id: str, *, force: bool = False) -> int:
        """Move Events older than the online window to the archive, after a signed snapshot.

        Runs when the online log exceeds one and a half ``online_window`` (or when ``force``).
        The archive keeps every Event, so the whole chain still verifies (MW-16-c). Safe with
        several Authority processes on one file or one PostgreSQL database (it takes the Group's
        lock): it reads and writes in one transaction and the boundary never moves backwards.

        Returns:
            The ``archived_through`` sequence after the call (0 when nothing is archived).

        Raises:
            UnknownGroupError: no such Group.
        """
        window = self.config.online_window
        if window is None:
            return 0
        with self._write():
            self.store.lock_groups([group_id])  # one replica archives a Group at a time
            row = self.store.one("groups.head_and_archived", group_id)
            if row is None:
                raise UnknownGroupError(group_id)
            head_seq, through = int(row[0]), int(row[1])
            if not force and head_seq - through <= window + window // 2:
                return through
            new_through = max(through, head_seq - int(window))
            if new_through == through:
                return through
            take_snapshot(self.store, self.key, group_id, self.clock())
            self.store.run("events.archive", group_id, new_through)
            self.store.run("events.delete_archived", group_id, new_through)
            self.store.run("groups.set_archived_through", new_through, group_id)
        return new_through

    def snapshot(self, group_id: str) -> dict[str, Any]:
        """The reference of the latest signed snapshot (taking one at the head if none exists).

        Raises:
            UnknownGroupError: no such Group.
        """
        self.head(group_id)
        with self._lock:
            snap = latest_snapshot(self.store, group_id)
        if snap is None:
            with self._write():
                take_snapshot(self.store, self.key, group_id, self.clock())
            with self._lock:
                snap = latest_snapshot(self.store, group_id)
        assert snap is not None
        return snap

    def recent_snapshot(self, group_id: str, within: int) -> dict[str, Any]:
        """The reference of a signed snapshot at most ``within`` Events behind the head: the
        latest one, or a new one taken at the head when the latest is older (what a
        far-behind subscriber restores instead of replaying, MW-16-e).

        Raises:
            UnknownGroupError: no such Group.
        """
        head_seq, _ = self.head(group_id)
        with self._lock:
            snap = latest_snapshot(self.store, group_id)
        if snap is not None and snap["seq"] >= head_seq - within:
            return snap
        with self._write():
            self.store.lock_groups([group_id])  # one replica snapshots a Group at a time
            snap = latest_snapshot(self.store, group_id)  # another reader may have taken one
            head = self.store.one("groups.head", group_id)
            assert head is not None
            if snap is None or snap["seq"] < int(head[0]) - within:
                take_snapshot(self.store, self.key, group_id, self.clock())
                snap = latest_snapshot(self.store, group_id)
        assert snap is not None
        return snap

    def load_snapshot(self, group_id: str, seq: int) -> dict[str, Any] | None:
        """The whole signed snapshot of ``group_id`` at ``seq``, or ``None``."""
        with self._lock:
            return load_snapshot(self.store, group_id, seq)
