"""Signed snapshots: a Group's state image at a sequence (MW-16-e).

A snapshot holds the projection at the Group's head when taken: members, missions, WorkItems,
open offers and active leases, plus the head sequence and hash so a client can resume the chain
from it. ``hash`` is SHA-256 over the canonical snapshot body; ``signature`` is the Authority's
Ed25519 signature over the raw hash bytes.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...protocol import SigningKey, digest

_TABLES = {
    "members": "SELECT agent_id, public_key, roles, membership_epoch, active FROM members "
    "WHERE group_id=? ORDER BY agent_id",
    "missions": "SELECT mission_id, state, parent FROM missions WHERE group_id=? ORDER BY 1",
    "work_items": "SELECT work_item_id, mission_id, state, revision, contract, dependencies, "
    "owner, ownership_epoch, start_deadline_ms, lease_id, attempts FROM work_items "
    "WHERE group_id=? ORDER BY 1",
    "offers": "SELECT offer_id, work_item_id, candidates, expires_at_ms, status FROM offers "
    "WHERE group_id=? AND status='open' ORDER BY 1",
    "leases": "SELECT lease_id, kind, work_item_id, agent_id, ownership_epoch, expires_at_ms "
    "FROM leases WHERE group_id=? AND status='active' ORDER BY 1",
}


def take_snapshot(
    conn: sqlite3.Connection, key: SigningKey, group_id: str, now_ms: int
) -> dict[str, Any]:
    """Take, sign and store a snapshot at the Group's head; the caller holds a write txn."""
    seq, head_hash = conn.execute(
        "SELECT head_seq, head_hash FROM groups WHERE group_id=?", (group_id,)
    ).fetchone()
    state: dict[str, Any] = {}
    for name, sql in _TABLES.items():
        cur = conn.execute(sql, (group_id,))
        cols = [c[0] for c in cur.description]
        state[name] = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    body = {
        "group_id": group_id, "seq": seq, "head_hash": head_hash, "taken_at_ms": now_ms,
        "state": state,
    }  # fmt: skip
    h = digest(body)
    snap = {**body, "hash": h, "signature": key.sign(bytes.fromhex(h))}
    conn.execute(
        "INSERT OR REPLACE INTO snapshots (group_id, seq, data) VALUES (?,?,?)",
        (group_id, seq, json.dumps(snap, separators=(",", ":"))),
    )
    return snap


def _reference(snap: dict[str, Any]) -> dict[str, Any]:
    return {k: snap[k] for k in ("group_id", "seq", "head_hash", "hash", "signature")}


def latest_snapshot(conn: sqlite3.Connection, group_id: str) -> dict[str, Any] | None:
    """The reference (no state) of the newest snapshot of ``group_id``, or ``None``."""
    row = conn.execute(
        "SELECT data FROM snapshots WHERE group_id=? ORDER BY seq DESC LIMIT 1", (group_id,)
    ).fetchone()
    return _reference(json.loads(row[0])) if row else None


def load_snapshot(conn: sqlite3.Connection, group_id: str, seq: int) -> dict[str, Any] | None:
    """The whole snapshot of ``group_id`` at ``seq``, or ``None``."""
    row = conn.execute(
        "SELECT data FROM snapshots WHERE group_id=? AND seq=?", (group_id, seq)
    ).fetchone()
    return json.loads(row[0]) if row else None
