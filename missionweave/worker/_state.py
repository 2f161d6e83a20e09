"""The agent's durable local state: per Group a cursor and a projection of its own WorkItems.

One SQLite file (WAL, ``synchronous=NORMAL``) holds, per Group (MW-11.1-a):

* ``cursors`` — the Subscriber's durable cursor (:class:`SqliteCursorStore`, same file);
* ``work_items`` — the WorkItems this agent owns or owned, as the one reducer folds their
  Events (:mod:`._projection`): state, owner, ownership epoch, start deadline, approval, lease;
* ``groups`` / ``meta`` — this agent's Membership Epoch and roles per Group, its Session Epoch
  and published card version as the log records them, and each Group's scheduling weight
  (``group.priority_set``).

The inbox of offers is the agent's Temporal task queue: each offer is an ``execute_work_item``
activity (docs/design.md §4.3).

Everything is derived from Group Events only (no local clock), so deleting the file and
replaying the log rebuilds the same projection (MW-11.1-b); the log stays authoritative. That is
also why ``synchronous=NORMAL`` is enough: a power loss can undo the last commits, but the
projection and the cursor live in one file and go back together, and the Events after the
cursor are delivered again (an fsync per Event cost more than the rest of applying it). A file
of an older layout is rebuilt from the log (its tables are dropped, its cursors reset).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..authority.client import SqliteCursorStore
from ..protocol import Event
from ._projection import Projector, facts_of

#: The layout of the file (``PRAGMA user_version``); another one is rebuilt from the log.
LAYOUT = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS groups (
    group_id TEXT PRIMARY KEY, applied_seq INTEGER NOT NULL DEFAULT 0,
    membership_epoch INTEGER NOT NULL DEFAULT 0, roles TEXT NOT NULL DEFAULT '[]',
    active INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS work_items (
    group_id TEXT NOT NULL, work_item_id TEXT NOT NULL, owner TEXT, state TEXT,
    facts TEXT NOT NULL, updated_seq INTEGER NOT NULL, PRIMARY KEY (group_id, work_item_id));
CREATE INDEX IF NOT EXISTS work_items_owner ON work_items (group_id, owner, state);
"""


@dataclass(frozen=True, slots=True)
class Membership:
    """This agent's membership in one Group, as the log records it."""

    membership_epoch: int
    roles: frozenset[str]
    active: bool


@dataclass(frozen=True, slots=True)
class WorkItemView:
    """One WorkItem of the projection (metadata only, MW-13.3-e)."""

    group_id: str
    work_item_id: str
    mission_id: str | None
    revision: int
    state: str
    owner: str | None
    ownership_epoch: int
    start_deadline_ms: int | None
    approved: bool
    lease_id: str | None
    queued_at_ms: int | None
    updated_seq: int


class LocalState:
    """The durable local projection of one agent (see the module docstring).

    Args:
        path: the SQLite file (created with its directory if missing).
        agent_id: this agent.

    Use from one thread (the runtime's event loop).
    """

    def __init__(self, path: str | Path, agent_id: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.agent_id = agent_id
        self._conn = sqlite3.connect(str(self.path), isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        if self._conn.execute("PRAGMA user_version").fetchone()[0] != LAYOUT:
            self._conn.executescript(
                "DROP TABLE IF EXISTS inbox; DROP TABLE IF EXISTS work_items; "
                "DROP TABLE IF EXISTS groups; DROP TABLE IF EXISTS meta; "
                "DROP TABLE IF EXISTS cursors;"
            )
            self._conn.execute(f"PRAGMA user_version={LAYOUT}")
        self._conn.executescript(_SCHEMA)
        self._projector = Projector(self._conn, agent_id)
        #: The Subscriber's durable cursors, in the same file (MW-16-c).
        self.cursors = SqliteCursorStore(self.path, fsync=False)

    def close(self) -> None:
        """Close both connections."""
        self.cursors.close()
        self._conn.close()

    # ------------------------------------------------------------------------ applying

    def apply(self, event: Event) -> bool:
        """Apply one Event (in Group order) in one transaction; ``False`` if it was already
        applied (a redelivery after a crash between this commit and the cursor's).
        Implements MW-11.1-b and MW-16-a."""
        g = event.group_id
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR IGNORE INTO groups (group_id) VALUES (?)", (g,))
            applied = conn.execute(
                "SELECT applied_seq FROM groups WHERE group_id=?", (g,)
            ).fetchone()[0]
            if event.seq <= applied:
                conn.execute("COMMIT")
                return False
            self._projector.project(event)
            conn.execute("UPDATE groups SET applied_seq=? WHERE group_id=?", (event.seq, g))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return True

    def restore_snapshot(self, snap: dict[str, Any]) -> None:
        """Reset a Group's projection to a verified Authority snapshot, in one transaction
        (MW-16-e; see :meth:`Projector.restore`)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._projector.restore(snap)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # --------------------------------------------------------------------------- reads

    def applied_seq(self, group_id: str) -> int:
        """The last Group sequence applied to the projection (0 when none)."""
        row = self._conn.execute(
            "SELECT applied_seq FROM groups WHERE group_id=?", (group_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def membership(self, group_id: str) -> Membership:
        """This agent's Membership Epoch and roles in ``group_id`` (epoch 0: not a member)."""
        row = self._conn.execute(
            "SELECT membership_epoch, roles, active FROM groups WHERE group_id=?", (group_id,)
        ).fetchone()
        if row is None:
            return Membership(0, frozenset(), False)
        return Membership(int(row[0]), frozenset(json.loads(row[1])), bool(row[2]))

    def meta(self, key: str) -> int:
        """``session_epoch`` or ``card_version`` as last recorded in the log (0 when none)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return int(row[0]) if row else 0

    def group_weight(self, group_id: str) -> float | None:
        """The Group's effective scheduling weight as its log last set it
        (``group.priority_set``: priority class factor × weight), or ``None`` when never set."""
        row = self._conn.execute(
            "SELECT value FROM meta WHERE key=?", (f"weight_milli:{group_id}",)
        ).fetchone()
        return None if row is None else int(row[0]) / 1000

    def item(self, group_id: str, work_item_id: str) -> WorkItemView | None:
        """One WorkItem of the projection, or ``None``."""
        row = self._conn.execute(
            "SELECT * FROM work_items WHERE group_id=? AND work_item_id=?", (group_id, work_item_id)
        ).fetchone()
        return None if row is None else _view(row)

    def owned(self, group_id: str, *states: str) -> list[WorkItemView]:
        """This agent's WorkItems in ``group_id`` (in ``states`` when given), oldest first."""
        sql = "SELECT * FROM work_items WHERE group_id=? AND owner=?"
        args: list[Any] = [group_id, self.agent_id]
        if states:
            sql += f" AND state IN ({','.join('?' * len(states))})"
            args.extend(states)
        rows = self._conn.execute(sql + " ORDER BY updated_seq, work_item_id", args).fetchall()
        return [_view(r) for r in rows]

    def projection(self) -> dict[str, Any]:
        """The whole projection as plain data (memberships, meta, WorkItems), for comparison
        and debugging."""

        def dump(sql: str) -> list[dict[str, Any]]:
            return [dict(r) for r in self._conn.execute(sql).fetchall()]

        return {
            "groups": dump("SELECT * FROM groups ORDER BY group_id"),
            "meta": dump("SELECT * FROM meta ORDER BY key"),
            "work_items": dump("SELECT * FROM work_items ORDER BY group_id, work_item_id"),
        }


def _view(r: sqlite3.Row) -> WorkItemView:
    f = facts_of(r["facts"])
    return WorkItemView(
        group_id=r["group_id"],
        work_item_id=r["work_item_id"],
        mission_id=f.mission_id,
        revision=f.revision,
        state=r["state"],
        owner=f.owner,
        ownership_epoch=f.ownership_epoch,
        start_deadline_ms=f.start_deadline_ms,
        approved=f.approved,
        lease_id=f.lease_id,
        queued_at_ms=f.queued_at_ms,
        updated_seq=r["updated_seq"],
    )


__all__ = ["LocalState", "Membership", "WorkItemView"]
