"""The Store: the one boundary between the Authority and its database.

Every SQL statement lives behind it (named in :mod:`._store_sql`, run by a backend); the
Authority, its handlers and the tools outside it call :class:`Store` methods only. Two backends:

- :class:`~._store_sqlite.SQLiteStore` — one file, the embedded default (``db`` is a path);
- :class:`~._store_postgres.PostgresStore` — PostgreSQL through psycopg 3 (``db`` is a
  ``postgresql://`` URL), which several Authority replicas may share.

:func:`open_store` picks the backend from ``db``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ...protocol import RejectionCode
from ._store_sql import COMMAND_PRIORS, SET_WORK_ITEM


class Row(Protocol):
    """A result row: by position (``row[0]``) or by column name (``row["state"]``)."""

    def __getitem__(self, key: int | str) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Store(Protocol):
    """What the Authority needs from a database.

    Statements are named (see :data:`._store_sql.STATEMENTS`); arguments are positional.
    Writes happen between :meth:`begin` and :meth:`commit` / :meth:`rollback`; one Command's
    changes between :meth:`savepoint` and :meth:`release` / :meth:`rollback_to`.

    Attributes:
        backend: ``"sqlite"`` or ``"postgres"``.
        location: the file path or the URL without its password, for messages.
    """

    backend: str
    location: str

    def one(self, name: str, *args: Any) -> Row | None:
        """The first row of statement ``name``, or ``None``."""
        ...

    def all(self, name: str, *args: Any) -> list[Row]:
        """Every row of statement ``name``."""
        ...

    def run(self, name: str, *args: Any) -> int:
        """Run statement ``name``; the number of rows it changed."""
        ...

    def select(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """An ad hoc read-only ``SELECT`` (``?`` placeholders) over the projections."""
        ...

    def insert_events(self, rows: Sequence[tuple[str, int, str, str, str | None, str]]) -> None:
        """Insert Events ``(group_id, seq, event_id, type, work_item_id, data)`` in one
        statement."""
        ...

    def insert_commands(self, rows: Sequence[tuple[str, str, str, str, str, str]]) -> None:
        """Remember Commands ``(group_id, actor, command_id, signature, status, refs)`` in one
        statement."""
        ...

    def command_priors(
        self, keys: Sequence[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], tuple[str, str, str]]:
        """Of ``keys`` (``(group_id, actor, command_id)``), those remembered:
        key → ``(signature, status, refs)``."""
        ...

    def set_work_item(self, group_id: str, work_item_id: str, cols: dict[str, Any]) -> None:
        """Update columns ``cols`` (names from the code, never from input) of one WorkItem."""
        ...

    def work_item_states(self, group_id: str, ids: Sequence[str]) -> list[Row]:
        """``(work_item_id, state)`` of those of ``ids`` that exist."""
        ...

    def begin(self, *, durable: bool = True) -> None:
        """Open a write transaction (SQLite: ``BEGIN IMMEDIATE``). ``durable=False`` lets the
        commit skip its fsync (advisory data, e.g. cursors)."""
        ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def savepoint(self) -> None: ...

    def release(self) -> None: ...

    def rollback_to(self) -> None:
        """Undo the current savepoint's changes and release it."""
        ...

    def lock_groups(self, group_ids: Iterable[str]) -> None:
        """Serialize this transaction's appends to ``group_ids`` with every other writer's
        (PostgreSQL: transaction-scoped advisory locks, taken in sorted order; SQLite: the
        file's write lock already does). Held until commit or rollback."""
        ...

    def notify(self, group_ids: Iterable[str]) -> None:
        """Announce, on commit, that ``group_ids`` have new Events (PostgreSQL ``NOTIFY``;
        nothing on SQLite, where one process writes)."""
        ...

    def retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a transient conflict (deadlock, serialization failure) after
        which the whole transaction may simply run again."""
        ...

    def listen(
        self, on_group: Callable[[str], object], on_resume: Callable[[], object] | None = None
    ) -> Closeable | None:
        """Call ``on_group(group_id)`` (from another thread) whenever any process commits
        Events of a Group, and ``on_resume()`` each time the channel is re-established after
        it was lost (notifications may have been missed meanwhile: wake every reader);
        ``None`` when the backend has no such channel (SQLite: the server polls). Close the
        returned object to stop."""
        ...

    def watch_reconnects(self, check: Callable[[], None]) -> None:
        """Run ``check()`` on each new connection after a lost one, before any other statement
        runs on it (PostgreSQL; nothing on SQLite, whose file is never disconnected). What
        ``check`` raises is raised by every later statement too: a refused store stays refused
        until the process restarts (:class:`StoreForkedError`)."""
        ...

    def probe(self) -> str | None:
        """Whether the database answers now, without waiting for the Authority's own
        connection (which a long transaction may hold): ``None``, or why not (readiness)."""
        ...

    def close(self) -> None: ...


class Closeable(Protocol):
    def close(self) -> None: ...


class SqlStore:
    """What both backends do the same way over their DB-API connection: run the named
    statements (one Command's savepoint among them), close.

    Attributes:
        conn: the connection (``sqlite3`` or ``psycopg``), in autocommit mode: transactions
            are explicit.
        sql: statement name → this backend's SQL text (:data:`._store_sql.STATEMENTS`,
            translated for the backend).
    """

    conn: Any
    sql: Mapping[str, str]

    def dialect(self, sql: str) -> str:
        """``sql`` (SQLite's dialect, ``?`` placeholders) as this backend runs it."""
        return sql

    def one(self, name: str, *args: Any) -> Row | None:
        row: Row | None = self.conn.execute(self.sql[name], args).fetchone()
        return row

    def all(self, name: str, *args: Any) -> list[Row]:
        return list(self.conn.execute(self.sql[name], args).fetchall())

    def run(self, name: str, *args: Any) -> int:
        rowcount: int = self.conn.execute(self.sql[name], args).rowcount
        return rowcount

    def select(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        cur = self.conn.execute(self.dialect(sql), args)
        cols = [c[0] for c in cur.description or ()]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def command_priors(
        self, keys: Sequence[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], tuple[str, str, str]]:
        out: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        for i in range(0, len(keys), 300):  # within SQLite's bound on variables
            part = keys[i : i + 300]
            sql = COMMAND_PRIORS.format(keys=",".join(["(?,?,?)"] * len(part)))
            for r in self.conn.execute(self.dialect(sql), [v for k in part for v in k]):
                out[(r[0], r[1], r[2])] = (r[3], r[4], r[5])
        return out

    def set_work_item(self, group_id: str, work_item_id: str, cols: dict[str, Any]) -> None:
        assigns = ", ".join(f"{k}=?" for k in cols)
        self.conn.execute(
            self.dialect(SET_WORK_ITEM.format(assigns=assigns)),
            (*cols.values(), group_id, work_item_id),
        )

    def savepoint(self) -> None:
        self.run("tx.savepoint")

    def release(self) -> None:
        self.run("tx.release")

    def rollback_to(self) -> None:
        self.run("tx.rollback_to")
        self.run("tx.release")

    def close(self) -> None:
        self.conn.close()


def open_store(db: str | Path) -> Store:
    """The Store for ``db``: PostgreSQL for a ``postgresql://`` (or ``postgres://``) URL,
    otherwise the SQLite file at that path (``":memory:"`` for an in-memory one).

    Raises:
        sqlite3.Error / psycopg.Error: the database cannot be opened.
        StoreVersionError: the database has a newer schema than this code reads.
    """
    if is_url(db):
        from ._store_postgres import PostgresStore

        return PostgresStore(str(db))
    from ._store_sqlite import SQLiteStore

    return SQLiteStore(str(db))


def open_reader(db: str | Path) -> Store:
    """A Store for offline reading (``events verify``): the SQLite file opened read only (never
    created or migrated), or the PostgreSQL database at a URL.

    Raises:
        sqlite3.Error / psycopg.Error: the database cannot be opened.
    """
    if is_url(db):
        return open_store(db)
    from ._store_sqlite import SQLiteStore

    return SQLiteStore(db, read_only=True)


class StoreVersionError(RuntimeError):
    """The database was written by a newer MissionWeave (its schema version is higher)."""


class StoreUnavailableError(RuntimeError):
    """The database cannot be reached, or its connection broke mid-transaction: the
    transaction was not committed, or — when the connection broke during ``COMMIT`` — its
    outcome is unknown. Nothing else is wrong: the HTTP front answers 503
    ``store_unavailable`` with ``Retry-After``, and the same Command sent again (the same
    Command id) after the store is back is answered by its id if it did commit (MW-16-f).

    Args:
        reason: what failed, for the operator.
        retry_after_s: when a retry may succeed, seconds.
    """

    code: str = RejectionCode.STORE_UNAVAILABLE

    def __init__(self, reason: str, retry_after_s: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


class StoreForkedError(StoreUnavailableError):
    """The store's log of a Group is shorter than, or differs from, what this Authority already
    signed or served (a failover to a standby that lacked committed Events). The Authority
    refuses to serve from it: every statement raises this until an operator restores the
    lost Events or consciously starts over (docs/authority.md, "PostgreSQL restart or
    failover").

    Args:
        forks: per Group, what was held and what the store has:
            ``{"group_id", "seq", "held_hash", "store_hash"}`` (``store_hash`` ``None``: the
            store's log is shorter).
    """

    code: str = RejectionCode.LOG_FORKED

    def __init__(self, forks: list[dict[str, Any]]) -> None:
        groups = ", ".join(f"{f['group_id']}@{f['seq']}" for f in forks[:5])
        super().__init__(
            f"the store's log differs from Events this Authority signed or served ({groups}): "
            "refusing to serve a forked log",
            retry_after_s=60,
        )
        self.forks = forks


def redact(db: str | Path) -> str:
    """``db`` for messages: a URL without its password."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", str(db))


def is_url(db: str | Path) -> bool:
    """Whether ``db`` names a server database rather than a file."""
    return str(db).startswith(("postgresql://", "postgres://"))


def dumps(value: Any) -> str:
    """Compact JSON text for a stored column."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
