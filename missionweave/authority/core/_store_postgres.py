"""The PostgreSQL Store (psycopg 3): one database that several Authority replicas share.

- Appends of one Group are serialized by the database: each write transaction takes a
  transaction-scoped advisory lock per Group it touches (:meth:`PostgresStore.lock_groups`,
  sorted, before the Group's rows are read), so any replica may take any Command, sequences stay
  contiguous and the chain intact. Statements then run at ``READ COMMITTED`` and see what the
  previous holder committed.
- A commit announces its Groups with ``NOTIFY missionweave_events`` (payload: the Group id);
  :class:`~._store_pg_listen.EventListener` wakes the WebSocket pumps of every replica, which
  read the log itself.
- Connections come from a :class:`psycopg_pool.ConnectionPool`, which re-establishes them after
  a restart or failover of the server (with backoff; :data:`RECONNECT_TIMEOUT_S`). The Store
  holds one connection for the Authority's serialized statements and swaps it for a fresh one
  between transactions when it broke; a statement outside a transaction is tried once more on
  the fresh one (nothing was done), one inside a transaction is not (the transaction is lost).
  Either way the failure is a :class:`~._store.StoreUnavailableError` (HTTP 503
  ``store_unavailable``), never an internal error. A new connection after a lost one runs the
  Authority's reconnect check first (:meth:`PostgresStore.watch_reconnects`: the log must still
  hold what this Authority signed or served).
- Versioned schema (:data:`._store_sql.SCHEMA_VERSION`), created or migrated on open under an
  advisory lock, so replicas starting together do not race.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ...metrics import add, series
from ._store import (
    Row,
    SqlStore,
    StoreForkedError,
    StoreUnavailableError,
    StoreVersionError,
    redact,
)
from ._store_pg_listen import CHANNEL, EventListener, connection_options
from ._store_sql import DDL, POSTGRES_OVERRIDES, SCHEMA_VERSION, STATEMENTS

log = logging.getLogger(__name__)

#: Advisory lock key held while the schema is created or migrated.
_MIGRATION_LOCK = 0x4D57_0001
#: Seconds a statement waits for a connection (the pool reconnecting) before it is answered
#: :class:`StoreUnavailableError`: an outage costs a Command this long, then a 503.
CONNECT_WAIT_S = 2.0
#: Seconds the pool keeps retrying a lost connection in the background (backoff 1, 2, 4 … s)
#: before it waits for the next demand, which starts a fresh attempt at once: the lag between
#: the server's return and the first reconnect stays a few seconds, however long the outage.
RECONNECT_TIMEOUT_S = 10.0
#: Seconds :meth:`PostgresStore.probe` waits for an answer.
PROBE_WAIT_S = 1.0


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
        connect_wait_s: seconds a statement waits for a connection while the server is away
            before it raises :class:`StoreUnavailableError`.

    Raises:
        psycopg.Error: the server cannot be reached or refuses the login (at the start).
        StoreVersionError: the database has a newer schema than this code reads.

    Thread safety: the Authority's statements are serialized by its lock (one held
    connection); :meth:`probe` may run from any thread (its own pooled connection).
    """

    backend = "postgres"

    def __init__(self, url: str, *, connect_wait_s: float = CONNECT_WAIT_S) -> None:
        self.url = url
        self.location = redact(url)
        self.connect_wait_s = connect_wait_s
        options = connection_options()
        # a plain first connection: a wrong password or host is reported as such
        with psycopg.connect(url, autocommit=True, **options) as first:
            _migrate(first)
        self.sql = {
            name: translate(POSTGRES_OVERRIDES.get(name, s)) for name, s in STATEMENTS.items()
        }
        # two: the one held for the Authority's statements, and one for probes of other threads
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=2,
            max_size=2,
            kwargs={"autocommit": True, "row_factory": _row_factory, **options},
            check=ConnectionPool.check_connection,
            reconnect_timeout=RECONNECT_TIMEOUT_S,
            name="missionweave-store",
            open=False,
        )
        self._pool.open(wait=True, timeout=30)
        self._held: psycopg.Connection[Any] | None = None
        self._in_tx = False
        self._lost = False  # the held connection broke: the next one is a reconnect
        self._unverified = False  # a reconnect whose check has not passed yet
        self._check: Callable[[], None] | None = None
        self._checking = False
        self._refused: StoreUnavailableError | None = None
        self.conn = _Session(self)

    # ------------------------------------------------------------------ connections
    def _connection(self) -> psycopg.Connection[Any]:
        """The held connection; a fresh one from the pool when it broke (between
        transactions only), checked by the reconnect check before anything else runs on it.

        Raises:
            StoreUnavailableError: no connection within :attr:`connect_wait_s`, the connection
                broke inside a transaction, or the reconnect check refused the store.
        """
        if self._refused is not None:
            raise self._refused
        conn = self._held
        if conn is None or conn.broken or conn.closed:
            if conn is not None:
                self._drop()
            if self._in_tx:
                self._in_tx = False
                raise _failed("lost", "the connection to PostgreSQL broke during a transaction")
            try:
                conn = self._pool.getconn(timeout=self.connect_wait_s)
            except PoolTimeout as exc:
                raise _failed(
                    "unreachable", f"PostgreSQL at {self.location} does not answer: {exc}"
                ) from exc
            self._held = conn
            if self._lost:
                self._lost = False
                self._unverified = True
                add(series.AUTHORITY_STORE_RECONNECTS, role="session")
                log.warning("reconnected to PostgreSQL at %s", self.location)
        if self._unverified and not self._checking:
            self._verify()
        return conn

    def _verify(self) -> None:
        """Run the reconnect check on a new connection (its statements run on it, unchecked);
        a fork refuses the store for good, any other failure leaves the check pending."""
        self._checking = True
        try:
            if self._check is not None:
                self._check()
        except StoreForkedError as exc:
            add(series.AUTHORITY_STORE_ERRORS, kind="forked")
            log.error("%s: %s", exc.reason, exc.forks)
            self._refused = exc
            raise
        finally:
            self._checking = False
        self._unverified = False

    def _drop(self) -> None:
        """Give the held connection back to the pool (which discards a broken one and
        reconnects in the background)."""
        conn, self._held = self._held, None
        if conn is not None:
            self._lost = self._lost or conn.broken or conn.closed
            try:
                self._pool.putconn(conn)
            except Exception:  # a pool closing meanwhile: nothing to keep
                log.debug("connection not returned to the pool", exc_info=True)

    def execute(self, sql: str, args: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        """Run ``sql`` on the held connection (see :class:`_Session`).

        Raises:
            StoreUnavailableError: the connection is lost or the server failed the statement
                for itself (its disk, its shutdown).
            psycopg.Error: any other error (a conflict, a constraint): the caller's to handle.
        """
        for attempt in range(2):
            conn = self._connection()
            try:
                return conn.execute(sql, args)
            except pg_errors.TransactionRollback:
                raise  # a deadlock or serialization failure: the engine runs it again
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if not (conn.broken or conn.closed):  # the server failed it, and lives on
                    raise _failed("failed", f"PostgreSQL failed a statement: {exc}") from exc
                self._drop()
                if self._in_tx or attempt:
                    self._in_tx = False
                    what = "a commit (its outcome is unknown)" if sql == "COMMIT" else "a statement"
                    raise _failed(
                        "lost", f"the connection to PostgreSQL broke during {what}: {exc}"
                    ) from exc
                # outside a transaction nothing was done: once more on a fresh connection
        raise AssertionError("unreachable")

    def watch_reconnects(self, check: Callable[[], None]) -> None:
        self._check = check

    def probe(self) -> str | None:
        if self._refused is not None:
            return self._refused.reason
        try:
            with self._pool.connection(timeout=PROBE_WAIT_S) as conn:
                conn.execute("SELECT 1")
        except (psycopg.Error, PoolTimeout) as exc:
            return f"PostgreSQL at {self.location} does not answer: {exc}"
        return None

    def close(self) -> None:
        self._drop()
        self._pool.close()

    # ------------------------------------------------------------------ statements
    def dialect(self, sql: str) -> str:
        return translate(sql)

    def insert_events(self, rows: Sequence[tuple[str, int, str, str, str | None, str]]) -> None:
        if not rows:
            return
        values = ",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows))
        flat = [v for r in rows for v in r]
        self.execute(
            "INSERT INTO events (group_id, seq, event_id, type, work_item_id, data) "
            f"VALUES {values}",
            flat,
        )

    def insert_commands(self, rows: Sequence[tuple[str, str, str, str, str, str]]) -> None:
        if not rows:
            return
        values = ",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows))
        self.execute(
            "INSERT INTO commands (group_id, actor, command_id, signature, status, refs) "
            f"VALUES {values}",
            [v for r in rows for v in r],
        )

    def work_item_states(self, group_id: str, ids: Sequence[str]) -> list[Row]:
        return list(
            self.execute(
                "SELECT work_item_id, state FROM work_items WHERE group_id=%s AND "
                "work_item_id = ANY(%s)",
                (group_id, list(ids)),
            ).fetchall()
        )

    # ------------------------------------------------------------------ transactions
    def begin(self, *, durable: bool = True) -> None:
        self.execute("BEGIN")
        self._in_tx = True
        if not durable:
            self.execute("SET LOCAL synchronous_commit = off")

    def commit(self) -> None:
        self.execute("COMMIT")
        self._in_tx = False

    def rollback(self) -> None:
        """Roll back; nothing to do when the connection was lost (the server dropped the
        transaction with it)."""
        conn = self._held
        self._in_tx = False
        if conn is None or conn.broken or conn.closed:
            return
        try:
            conn.execute("ROLLBACK")
        except (psycopg.OperationalError, psycopg.InterfaceError):
            self._drop()  # lost just now: the transaction is gone with it

    def lock_groups(self, group_ids: Iterable[str]) -> None:
        for gid in sorted(set(group_ids)):
            self.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (gid,))

    def notify(self, group_ids: Iterable[str]) -> None:
        for gid in sorted(set(group_ids)):
            self.execute("SELECT pg_notify(%s, %s)", (CHANNEL, gid))

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure)

    def listen(
        self, on_group: Callable[[str], object], on_resume: Callable[[], object] | None = None
    ) -> EventListener:
        return EventListener(self.url, on_group, on_resume)


class _Session:
    """What :class:`~._store.SqlStore` and the tests call ``conn``: ``execute`` on the
    Store's held connection, with its reconnect and its errors
    (:meth:`PostgresStore.execute`)."""

    def __init__(self, store: PostgresStore) -> None:
        self.execute = store.execute

    def close(self) -> None:
        """Nothing: the Store closes its pool."""


def _failed(kind: str, reason: str) -> StoreUnavailableError:
    """Count a store error of ``kind`` (``unreachable``, ``lost``, ``failed``) and make it."""
    add(series.AUTHORITY_STORE_ERRORS, kind=kind)
    log.warning("store unavailable (%s): %s", kind, reason)
    return StoreUnavailableError(reason)


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
