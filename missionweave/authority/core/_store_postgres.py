"""The PostgreSQL Store (psycopg 3): one database that several Authority replicas share.

- Appends of one Group are serialized by the database: each write transaction takes a
  transaction-scoped advisory lock per Group it touches (:meth:`PostgresStore.lock_groups`,
  sorted, before the Group's rows are read), so any replica may take any Command, sequences stay
  contiguous and the chain intact. Statements then run at ``READ COMMITTED`` and see what the
  previous holder committed.
- A commit announces its Groups with ``NOTIFY missionweave_events`` (payload: the Group id);
  :class:`EventListener` wakes the WebSocket pumps of every replica, which read the log itself.
- Versioned schema (:data:`._store_sql.SCHEMA_VERSION`), created or migrated on open under an
  advisory lock, so replicas starting together do not race.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ._store import Row, SqlStore, StoreVersionError, redact
from ._store_sql import DDL, POSTGRES_OVERRIDES, SCHEMA_VERSION, STATEMENTS

#: The NOTIFY channel of new Events; the payload is the Group id.
CHANNEL = "missionweave_events"
#: Advisory lock key held while the schema is created or migrated.
_MIGRATION_LOCK = 0x4D57_0001


class PgRow(tuple[Any, ...]):
    """A row readable by position and by column name, like :class:`sqlite3.Row`."""

    _names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    names = {c.name: i for i, c in enumerate(cursor.description or ())}
    cls = type("Row", (PgRow,), {"_names": names})

    def make(values: Sequence[Any]) -> PgRow:
        row: PgRow = cls(values)
        return row

    return make


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """SQLite-dialect text with ``?`` placeholders → psycopg text with ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


def _pg_ddl() -> list[str]:
    """The schema in PostgreSQL's types: 64-bit integers, byte-order ("C") text collation so
    orderings match SQLite's, no ``WITHOUT ROWID``."""
    out = []
    for statement in DDL.split(";"):
        if not statement.strip():
            continue
        s = statement.replace(" WITHOUT ROWID", "")
        s = re.sub(r"\bINTEGER\b", "BIGINT", s)
        s = re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', s)
        out.append(s)
    return out


class PostgresStore(SqlStore):
    """A :class:`~._store.Store` over one PostgreSQL database (see the module docstring).

    Args:
        url: a libpq URL, e.g. ``postgresql://mw:secret@db:5432/missionweave``.

    Raises:
        psycopg.Error: the server cannot be reached or refuses the login.
        StoreVersionError: the database has a newer schema than this code reads.
    """

    backend = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url
        self.location = redact(url)
        self.conn: psycopg.Connection[Any] = psycopg.connect(
            url, autocommit=True, row_factory=_row_factory
        )
        try:
            _migrate(self.conn)
        except BaseException:
            self.conn.close()
            raise
        self.sql = {
            name: translate(POSTGRES_OVERRIDES.get(name, s)) for name, s in STATEMENTS.items()
        }

    # ------------------------------------------------------------------ statements
    def dialect(self, sql: str) -> str:
        return translate(sql)

    def insert_events(self, rows: Sequence[tuple[str, int, str, str, str | None, str]]) -> None:
        if not rows:
            return
        values = ",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows))
        flat = [v for r in rows for v in r]
        self.conn.execute(
            "INSERT INTO events (group_id, seq, event_id, type, work_item_id, data) "
            f"VALUES {values}",
            flat,
        )

    def insert_commands(self, rows: Sequence[tuple[str, str, str, str, str, str]]) -> None:
        if not rows:
            return
        values = ",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows))
        self.conn.execute(
            "INSERT INTO commands (group_id, actor, command_id, signature, status, refs) "
            f"VALUES {values}",
            [v for r in rows for v in r],
        )

    def work_item_states(self, group_id: str, ids: Sequence[str]) -> list[Row]:
        return list(
            self.conn.execute(
                "SELECT work_item_id, state FROM work_items WHERE group_id=%s AND "
                "work_item_id = ANY(%s)",
                (group_id, list(ids)),
            ).fetchall()
        )

    # ------------------------------------------------------------------ transactions
    def begin(self, *, durable: bool = True) -> None:
        self.conn.execute("BEGIN")
        if not durable:
            self.conn.execute("SET LOCAL synchronous_commit = off")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def lock_groups(self, group_ids: Iterable[str]) -> None:
        for gid in sorted(set(group_ids)):
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (gid,))

    def notify(self, group_ids: Iterable[str]) -> None:
        for gid in sorted(set(group_ids)):
            self.conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, gid))

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure)

    def listen(self, on_group: Callable[[str], object]) -> EventListener:
        return EventListener(self.url, on_group)


def _migrate(conn: psycopg.Connection[Any]) -> None:
    """Create the schema or bring an older one to :data:`SCHEMA_VERSION`, in one transaction
    under an advisory lock (several replicas may start at once).

    Raises:
        StoreVersionError: the database has a newer schema than this code reads.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        has_meta = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
        row = None
        if has_meta and has_meta[0]:
            row = conn.execute(STATEMENTS["meta.schema_version"]).fetchone()
        version = int(row[0]) if row else None
        if version is not None and version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"the database has schema version {version}; this MissionWeave reads up to "
                f"{SCHEMA_VERSION}: upgrade MissionWeave"
            )
        if version is not None and version < 3:  # a capability token's status (MW-11.3-d)
            conn.execute(
                "ALTER TABLE capability_tokens ADD COLUMN IF NOT EXISTS "
                "status TEXT NOT NULL DEFAULT 'active'"
            )
        for statement in _pg_ddl():
            conn.execute(statement)
        conn.execute(translate(STATEMENTS["meta.set_schema_version"]), (str(SCHEMA_VERSION),))


class EventListener:
    """Calls ``on_group(group_id)`` from a thread of its own each time any replica commits
    Events of a Group (``LISTEN missionweave_events``).

    Args:
        url: the database URL.
        on_group: called with the Group id; must be thread-safe (e.g. hand over to a loop with
            ``call_soon_threadsafe``).
    """

    def __init__(self, url: str, on_group: Callable[[str], object]) -> None:
        self._conn: psycopg.Connection[Any] = psycopg.connect(url, autocommit=True)
        self._conn.execute(f"LISTEN {CHANNEL}")
        self._on_group = on_group
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mw-pg-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for n in self._conn.notifies(timeout=0.5):
                    self._on_group(n.payload)
            except psycopg.Error:
                if self._stop.is_set():
                    return
                raise

    def close(self) -> None:
        """Stop listening and close the connection."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._conn.close()
