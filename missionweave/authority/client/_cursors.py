"""Durable delivery cursors of a recipient (MW-16-c): one row per Group.

A cursor is the highest contiguous Group sequence the recipient has durably processed, with
that Event's hash so the chain can be checked across a restart.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..wire import now_ms


@runtime_checkable
class CursorStore(Protocol):
    """Where a :class:`Subscriber` keeps its cursors.

    ``set`` must be durable when it returns: the Subscriber calls it only after the Event's
    handler returned, and resumes from ``get`` after a restart (MW-16-c, MW-16-d).
    """

    def get(self, group_id: str) -> int:
        """The cursor of ``group_id`` (0 when none)."""
        ...

    def set(self, group_id: str, seq: int, last_hash: str) -> None:
        """Record that every Event of ``group_id`` up to ``seq`` (hash ``last_hash``) is done."""
        ...


class MemoryCursorStore:
    """A non-durable :class:`CursorStore` (tests, throwaway consumers)."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[int, str]] = {}

    def get(self, group_id: str) -> int:
        return self._rows.get(group_id, (0, ""))[0]

    def last_hash(self, group_id: str) -> str | None:
        """The hash recorded with the cursor, or ``None``."""
        row = self._rows.get(group_id)
        return row[1] if row else None

    def set(self, group_id: str, seq: int, last_hash: str) -> None:
        self._rows[group_id] = (seq, last_hash)


class SqliteCursorStore:
    """A durable :class:`CursorStore` in a SQLite file (WAL).

    Args:
        path: the database file (created with its parent directories if missing).
        fsync: ``True`` (``synchronous=FULL``): ``set`` has fsynced when it returns, and the
            cursor survives a power loss. ``False`` (``synchronous=NORMAL``): it survives a
            process crash, but a power loss may take it back a little, and the Events after
            it are then delivered again — right for a consumer whose own state shares the
            file and goes back with it (the agent runtime's local state).
    """

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS cursors (group_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, "
            "last_hash TEXT NOT NULL, updated_at_ms INTEGER NOT NULL) WITHOUT ROWID"
        )

    def get(self, group_id: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT seq FROM cursors WHERE group_id=?", (group_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    def last_hash(self, group_id: str) -> str | None:
        """The hash recorded with the cursor, or ``None``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT last_hash FROM cursors WHERE group_id=?", (group_id,)
            ).fetchone()
        return str(row[0]) if row else None

    def set(self, group_id: str, seq: int, last_hash: str) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO cursors (group_id, seq, last_hash, updated_at_ms) VALUES (?,?,?,?) "
                "ON CONFLICT (group_id) DO UPDATE SET seq=excluded.seq, "
                "last_hash=excluded.last_hash, updated_at_ms=excluded.updated_at_ms",
                (group_id, seq, last_hash, now_ms()),
            )

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()


__all__ = ["CursorStore", "MemoryCursorStore", "SqliteCursorStore"]
