"""The Authority's read side and log maintenance: Events, projections, cursors, archive and
snapshots. Mixed into :class:`~missionweave.authority.Authority`; every method takes the
Authority's lock, and every write here is its own ``BEGIN IMMEDIATE`` transaction that rolls back
on failure.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...protocol import Event, SigningKey
from ..wire import CursorTooOldError, UnknownGroupError
from ._snapshots import latest_snapshot, load_snapshot, take_snapshot


def require_group(conn: sqlite3.Connection, group_id: str) -> None:
    """Raise :class:`UnknownGroupError` unless ``group_id`` exists (the caller holds the lock)."""
    if conn.execute("SELECT 1 FROM groups WHERE group_id=?", (group_id,)).fetchone() is None:
        raise UnknownGroupError(group_id)


class LogReader:
    """Read and maintenance methods of the Authority (see the module docstring)."""

    conn: sqlite3.Connection
    key: SigningKey
    clock: Callable[[], int]
    config: Any
    _lock: threading.Lock

    @contextmanager
    def _write(self, *, fsync: bool = True) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction under the lock: COMMIT, or ROLLBACK on error.
        ``fsync=False`` commits with ``synchronous=NORMAL`` (durable at the next fsync)."""
        with self._lock:
            if not fsync:
                self.conn.execute("PRAGMA synchronous=NORMAL")
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
                self.conn.execute("COMMIT")
            finally:
                if not fsync:
                    self.conn.execute("PRAGMA synchronous=FULL")

    def _load_event(self, group_id: str, seq: int) -> Event:
        row = self.conn.execute(
            "SELECT data FROM events WHERE group_id=? AND seq=? UNION ALL "
            "SELECT data FROM archived_events WHERE group_id=? AND seq=?",
            (group_id, seq, group_id, seq),
        ).fetchone()
        return Event.model_validate_json(row[0])

    def head(self, group_id: str) -> tuple[int, str]:
        """The Group's last sequence and hash (``(0, GENESIS_HASH)`` when empty).

        Raises:
            UnknownGroupError: no such Group.
        """
        with self._lock:
            row = self.conn.execute(
                "SELECT head_seq, head_hash FROM groups WHERE group_id=?", (group_id,)
            ).fetchone()
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
        if not 1 <= limit <= 10_000 or after_sequence < 0:
            raise ValueError("limit must be 1..10000 and after_sequence >= 0")
        with self._lock:
            row = self.conn.execute(
                "SELECT archived_through FROM groups WHERE group_id=?", (group_id,)
            ).fetchone()
            if row is None:
                raise UnknownGroupError(group_id)
            if after_sequence < row[0]:
                snap = latest_snapshot(self.conn, group_id)
                raise CursorTooOldError(group_id, after_sequence, row[0] + 1, snap or {})
            cursor = self.conn.execute(
                "SELECT data FROM events WHERE group_id=? AND seq>? ORDER BY seq LIMIT ?",
                (group_id, after_sequence, limit),
            )
            rows: list[str] = []
            size, cut = 0, False
            for (data,) in cursor:
                if rows and max_bytes is not None and size + len(data) > max_bytes:
                    cut = True
                    break
                rows.append(data)
                size += len(data)
            cursor.close()
        return [Event.model_validate_json(r) for r in rows], cut

    def all_events(self, group_id: str) -> list[Event]:
        """The whole log, archive included, in order (for verification and tests)."""
        with self._lock:
            rows = self.conn.execute(
                "SELECT seq, data FROM archived_events WHERE group_id=? UNION ALL "
                "SELECT seq, data FROM events WHERE group_id=? ORDER BY 1",
                (group_id, group_id),
            ).fetchall()
        return [Event.model_validate_json(r[1]) for r in rows]

    def member_groups(self, public_key: str) -> list[str]:
        """The Groups in which ``public_key`` is an active member's key, in order."""
        with self._lock:
            return [
                r[0]
                for r in self.conn.execute(
                    "SELECT DISTINCT group_id FROM members WHERE public_key=? AND active=1 "
                    "ORDER BY 1",
                    (public_key,),
                )
            ]

    def may_read(self, group_id: str, public_key: str) -> bool:
        """Whether ``public_key`` is an active member's key in ``group_id`` (spec 13.3-b: a
        member reads its Group's log; nobody else does).

        Raises:
            UnknownGroupError: no such Group.
        """
        with self._lock:
            require_group(self.conn, group_id)
            return (
                self.conn.execute(
                    "SELECT 1 FROM members WHERE group_id=? AND public_key=? AND active=1",
                    (group_id, public_key),
                ).fetchone()
                is not None
            )

    def groups(self) -> list[str]:
        """Every Group id."""
        with self._lock:
            return [r[0] for r in self.conn.execute("SELECT group_id FROM groups ORDER BY 1")]

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """Run a read-only ``SELECT`` over the projections; rows as dicts.

        Raises:
            ValueError: ``sql`` is not a single ``SELECT`` / ``WITH`` statement.
        """
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head not in ("SELECT", "WITH") or ";" in sql.strip().rstrip(";"):
            raise ValueError("query() runs one SELECT statement")
        with self._lock:
            cur = self.conn.execute(sql, args)
            cols = [c[0] for c in cur.description or ()]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def work_item(self, group_id: str, work_item_id: str) -> dict[str, Any] | None:
        """The WorkItem projection row, or ``None``."""
        rows = self.query(
            "SELECT * FROM work_items WHERE group_id=? AND work_item_id=?", group_id, work_item_id
        )
        return rows[0] if rows else None

    def lease(self, lease_id: str) -> dict[str, Any] | None:
        """The lease row plus ``valid`` (active and unexpired now), or ``None``."""
        rows = self.query("SELECT * FROM leases WHERE lease_id=?", lease_id)
        if not rows:
            return None
        row = rows[0]
        row["valid"] = row["status"] == "active" and row["expires_at_ms"] > self.clock()
        return row

    def ack(self, group_id: str, agent_id: str, seq: int) -> int:
        """Record ``agent_id``'s durable cursor in ``group_id`` (MW-16-c); never deletes history.

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
            self.conn.execute(
                "INSERT INTO cursors (group_id, agent_id, seq, updated_at_ms) VALUES (?,?,?,?) "
                "ON CONFLICT (group_id, agent_id) DO UPDATE SET "
                "seq=max(seq, excluded.seq), updated_at_ms=excluded.updated_at_ms",
                (group_id, agent_id, seq, self.clock()),
            )
            row = self.conn.execute(
                "SELECT seq FROM cursors WHERE group_id=? AND agent_id=?", (group_id, agent_id)
            ).fetchone()
        return int(row[0])

    def maybe_archive(self, group_id: str, *, force: bool = False) -> int:
        """Move Events older than the online window to the archive, after a signed snapshot.

        Runs when the online log exceeds one and a half ``online_window`` (or when ``force``).
        The archive keeps every Event, so the whole chain still verifies (MW-16-c). Safe with
        several Authority processes on one file: it reads and writes in one transaction and the
        boundary never moves backwards.

        Returns:
            The ``archived_through`` sequence after the call (0 when nothing is archived).

        Raises:
            UnknownGroupError: no such Group.
        """
        window = self.config.online_window
        if window is None:
            return 0
        with self._write():
            row = self.conn.execute(
                "SELECT head_seq, archived_through FROM groups WHERE group_id=?", (group_id,)
            ).fetchone()
            if row is None:
                raise UnknownGroupError(group_id)
            head_seq, through = int(row[0]), int(row[1])
            if not force and head_seq - through <= window + window // 2:
                return through
            new_through = max(through, head_seq - int(window))
            if new_through == through:
                return through
            take_snapshot(self.conn, self.key, group_id, self.clock())
            self.conn.execute(
                "INSERT INTO archived_events SELECT * FROM events WHERE group_id=? AND seq<=?",
                (group_id, new_through),
            )
            self.conn.execute(
                "DELETE FROM events WHERE group_id=? AND seq<=?", (group_id, new_through)
            )
            self.conn.execute(
                "UPDATE groups SET archived_through=max(archived_through, ?) WHERE group_id=?",
                (new_through, group_id),
            )
        return new_through

    def snapshot(self, group_id: str) -> dict[str, Any]:
        """The reference of the latest signed snapshot (taking one at the head if none exists).

        Raises:
            UnknownGroupError: no such Group.
        """
        self.head(group_id)
        with self._lock:
            snap = latest_snapshot(self.conn, group_id)
        if snap is None:
            with self._write():
                take_snapshot(self.conn, self.key, group_id, self.clock())
            with self._lock:
                snap = latest_snapshot(self.conn, group_id)
        assert snap is not None
        return snap

    def load_snapshot(self, group_id: str, seq: int) -> dict[str, Any] | None:
        """The whole signed snapshot of ``group_id`` at ``seq``, or ``None``."""
        with self._lock:
            return load_snapshot(self.conn, group_id, seq)
