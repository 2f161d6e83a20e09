"""The SQLite Store: one file, the embedded default.

WAL mode, ``synchronous=FULL`` (an acknowledged append survives power loss) and ``BEGIN
IMMEDIATE`` for writes, so two Authority processes on one file serialize their appends instead of
failing on upgrade deadlocks. Versioned schema: :data:`._store_sql.SCHEMA_VERSION`, migrated on
open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ._store import Row, SqlStore
from ._store_sql import DDL, SCHEMA_VERSION, STATEMENTS


class SQLiteStore(SqlStore):
    """A :class:`~._store.Store` over one SQLite file (see the module docstring).

    Args:
        path: the file (created with its directory if missing), or ``":memory:"``.
        read_only: open an existing file read only (offline tools); no migration.

    Raises:
        sqlite3.Error: the file cannot be opened or is not a database.
        sqlite3.DatabaseError: the file has a newer schema than this code reads.
    """

    backend = "sqlite"

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.location = str(path)
        self.sql = STATEMENTS
        if read_only:
            self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            self.conn.row_factory = sqlite3.Row
            return
        if self.location != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(
            self.location, isolation_level=None, check_same_thread=False, timeout=30
        )
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            _migrate(self.conn)
        except BaseException:
            self.conn.execute("ROLLBACK")
            self.conn.close()
            raise
        self._durable = True

    # ------------------------------------------------------------------ statements
    def insert_events(self, rows: Sequence[tuple[str, int, str, str, str | None, str]]) -> None:
        if rows:
            self.conn.executemany(STATEMENTS["events.insert"], rows)

    def insert_commands(self, rows: Sequence[tuple[str, str, str, str, str, str]]) -> None:
        if rows:
            self.conn.executemany(STATEMENTS["commands.insert"], rows)

    def work_item_states(self, group_id: str, ids: Sequence[str]) -> list[Row]:
        marks = ",".join("?" * len(ids))
        return list(
            self.conn.execute(
                "SELECT work_item_id, state FROM work_items WHERE group_id=? AND "
                f"work_item_id IN ({marks})",
                (group_id, *ids),
            ).fetchall()
        )

    # ------------------------------------------------------------------ transactions
    def begin(self, *, durable: bool = True) -> None:
        if not durable:
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._durable = False
        self.conn.execute("BEGIN IMMEDIATE")

    def _restore_sync(self) -> None:
        if not self._durable:
            self.conn.execute("PRAGMA synchronous=FULL")
            self._durable = True

    def commit(self) -> None:
        try:
            self.conn.execute("COMMIT")
        finally:
            self._restore_sync()

    def rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        finally:
            self._restore_sync()

    def lock_groups(self, group_ids: Iterable[str]) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` holds the file's one write lock."""

    def notify(self, group_ids: Iterable[str]) -> None:
        """Nothing to do: a subscriber of this process is woken by its writer."""

    def retryable(self, exc: BaseException) -> bool:
        return False

    def listen(
        self, on_group: Callable[[str], object], on_resume: Callable[[], object] | None = None
    ) -> None:
        """No channel: one process writes the file; others are picked up by polling."""
        return None

    def watch_reconnects(self, check: Callable[[], None]) -> None:
        """Nothing to watch: the file's connection is never lost."""

    def probe(self) -> str | None:
        """``None``: the file is local (a full disk is its own readiness probe)."""
        return None


def _migrate(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring an older one to :data:`SCHEMA_VERSION`, in the caller's
    transaction (committed here).

    Raises:
        sqlite3.DatabaseError: the file was written by a newer MissionWeave (its
            ``schema_version`` is above this code's).
    """
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    row = conn.execute(STATEMENTS["meta.schema_version"]).fetchone() if has_meta else None
    version = int(row[0]) if row else None
    if version is not None and version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"the database has schema version {version}; this MissionWeave reads up to "
            f"{SCHEMA_VERSION}: upgrade MissionWeave"
        )
    if version == 1:
        _v1_to_v2(conn)
    if version is not None and version < 3:
        _v2_to_v3(conn)
    for statement in DDL.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(STATEMENTS["meta.set_schema_version"], (str(SCHEMA_VERSION),))
    conn.execute("COMMIT")


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Scope each remembered Command id to its Group and actor, read from the first Event
    it wrote (every remembered Command wrote one; its ``command`` carries both)."""
    conn.execute("ALTER TABLE commands RENAME TO commands_v1")
    conn.execute(
        """CREATE TABLE commands (
            group_id TEXT NOT NULL, actor TEXT NOT NULL, command_id TEXT NOT NULL,
            signature TEXT NOT NULL, status TEXT NOT NULL, refs TEXT NOT NULL,
            PRIMARY KEY (group_id, actor, command_id)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """INSERT INTO commands
           SELECT coalesce(json_extract(e.data, '$.command.group_id'), ''),
                  json_extract(e.data, '$.command.actor'), c.command_id, c.signature,
                  c.status, c.refs
           FROM commands_v1 c
           JOIN (SELECT group_id, seq, data FROM events
                 UNION ALL SELECT group_id, seq, data FROM archived_events) e
             ON e.group_id = json_extract(c.refs, '$.events[0][0]')
            AND e.seq = json_extract(c.refs, '$.events[0][1]')"""
    )
    conn.execute("DROP TABLE commands_v1")


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Give each capability token a ``status``; every token issued before is in force (the new
    index and ``mission_usage`` table come with the DDL)."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(capability_tokens)")}
    if columns and "status" not in columns:
        conn.execute(
            "ALTER TABLE capability_tokens ADD COLUMN status TEXT NOT NULL DEFAULT 'active'"
        )
