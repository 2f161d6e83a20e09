"""The Store boundary and its versioned schema, on both backends (SQLite, PostgreSQL).

- A database of the previous schema version (2) is migrated to the current one when an
  Authority opens it, and its log still verifies and takes appends.
- A database of a newer schema is refused, on either backend.
- No SQL outside the Store backends: the Authority's statements are named in ``_store_sql.py``
  and run only by ``_store_sqlite.py`` / ``_store_postgres.py``.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from missionweave.authority import Authority, StoreVersionError, verify_log
from missionweave.authority.core._store_sql import SCHEMA_VERSION, STATEMENTS
from tests.support.pg import raw
from tests.support.world import make_world

ROOT = Path(__file__).resolve().parents[2] / "missionweave"


def _has_index(db: str, name: str, backend: str) -> bool:
    if backend == "postgres":
        return bool(raw(db, "SELECT 1 FROM pg_indexes WHERE indexname=?", name))
    return bool(raw(db, "SELECT 1 FROM sqlite_master WHERE type='index' AND name=?", name))


def test_a_version_2_database_is_migrated_on_open(tmp_path: Path, store_backend: str) -> None:
    assert SCHEMA_VERSION == 3
    w = make_world(tmp_path / "a.db")
    db, key, config = w.authority.db_path, w.authority.key, w.authority.config
    head = w.authority.head(w.group)
    w.authority.close()
    assert _has_index(db, "events_type", store_backend)
    # as version 2 left it: no index of Events by type
    raw(db, "DROP INDEX events_type")
    raw(db, "UPDATE meta SET value='2' WHERE key='schema_version'")
    again = Authority(db, key, config, clock=w.clock)
    try:
        assert again.query("SELECT value FROM meta WHERE key='schema_version'") == [{"value": "3"}]
        assert _has_index(db, "events_type", store_backend)
        assert again.head(w.group) == head
        w.authority = again
        w.ok(w.coordinator, "mission.create", {"mission_id": "m-after", "title": "t"})
        assert verify_log(again.store, w.group, key.public_key).head_seq == head[0] + 1
        assert [a.agent_id for a in again.agents(w.group)][:1] == ["coordinator"]
    finally:
        again.close()


def test_a_database_of_a_newer_schema_is_refused_on_either_backend(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    db, key = w.authority.db_path, w.authority.key
    w.authority.close()
    raw(db, "UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises((sqlite3.DatabaseError, StoreVersionError), match="schema version 99"):
        Authority(db, key)


def test_sql_runs_only_inside_the_store_backends() -> None:
    """``grep -rn "execute(" missionweave`` finds SQL only in the Store backends — and in the
    local files of other components (an agent's state and projection, a subscriber's cursors),
    which are not the Authority's database (an agent's offline buffer among them)."""
    others = {
        "worker/_state.py",
        "worker/_projection.py",
        "worker/_offline.py",
        "authority/client/_cursors.py",
    }
    backends = {"authority/core/_store_sqlite.py", "authority/core/_store_postgres.py"}
    words = "SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|PRAGMA"
    sql = re.compile(rf"\.execute(?:many|script)?\(\s*f?[\"'](?:{words})", re.I)
    found = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if sql.search(path.read_text(encoding="utf-8")):
            found.add(rel)
    assert found - others == backends
    # and every statement a handler names exists
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "authority").rglob("*.py"))
    named = set(re.findall(r"\b(?:one|all|run)\(\s*\"([a-z_]+\.[a-z_0-9]+)\"", source))
    assert named and named <= set(STATEMENTS)


def test_events_verify_reads_either_backend(tmp_path: Path) -> None:
    """``missionweave events verify --db`` takes the SQLite file or the PostgreSQL URL."""
    from typer.testing import CliRunner

    from missionweave.cli import app

    w = make_world(tmp_path / "a.db")
    db = w.authority.db_path
    w.authority.close()
    r = CliRunner().invoke(app, ["events", "verify", "--db", db])
    assert r.exit_code == 0, r.output
    assert f"ok   group {w.group}:" in r.output
