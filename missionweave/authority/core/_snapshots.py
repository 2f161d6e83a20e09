"""Signed snapshots: a Group's state image at a sequence (MW-16-e).

A snapshot holds the projection at the Group's head when taken: members, missions, WorkItems,
open offers and active leases, plus the head sequence and hash so a client can resume the chain
from it. ``hash`` is SHA-256 over the canonical snapshot body; ``signature`` is the Authority's
Ed25519 signature over the raw hash bytes.
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol import SigningKey, digest
from ._store import Store

_TABLES = ("members", "missions", "work_items", "offers", "leases")


def take_snapshot(store: Store, key: SigningKey, group_id: str, now_ms: int) -> dict[str, Any]:
    """Take, sign and store a snapshot at the Group's head; the caller holds a write txn."""
    head = store.one("groups.head", group_id)
    assert head is not None
    seq, head_hash = head[0], head[1]
    state: dict[str, Any] = {
        name: [{k: r[k] for k in r.keys()} for r in store.all(f"snapshot.{name}", group_id)]
        for name in _TABLES
    }
    body = {
        "group_id": group_id,
        "seq": seq,
        "head_hash": head_hash,
        "taken_at_ms": now_ms,
        "state": state,
    }
    h = digest(body)
    snap = {**body, "hash": h, "signature": key.sign(bytes.fromhex(h))}
    store.run("snapshots.put", group_id, seq, json.dumps(snap, separators=(",", ":")))
    return snap


def _reference(snap: dict[str, Any]) -> dict[str, Any]:
    return {k: snap[k] for k in ("group_id", "seq", "head_hash", "hash", "signature")}


def latest_snapshot(store: Store, group_id: str) -> dict[str, Any] | None:
    """The reference (no state) of the newest snapshot of ``group_id``, or ``None``."""
    row = store.one("snapshots.latest", group_id)
    return _reference(json.loads(row[0])) if row else None


def load_snapshot(store: Store, group_id: str, seq: int) -> dict[str, Any] | None:
    """The whole snapshot of ``group_id`` at ``seq``, or ``None``."""
    row = store.one("snapshots.at", group_id, seq)
    return json.loads(row[0]) if row else None
