"""How each Group Event changes the agent's local projection (MW-11.1-b).

The rules read only the Event (its body, sequence and ``recorded_at_ms``), never a local
clock, so replaying a Group's log from the start always rebuilds the same projection. Every
WorkItem of the Group is tracked (offers arrive for items authorized long before), this agent's
own ones carrying ownership, start deadline, approval, lease and last checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..protocol import Event


class Projector:
    """Applies Events to the projection tables; the caller owns the transaction.

    Args:
        conn: the local state's connection.
        agent_id: this agent (offers to it need an answer; its membership is tracked).
    """

    def __init__(self, conn: sqlite3.Connection, agent_id: str) -> None:
        self._conn = conn
        self.agent_id = agent_id

    def _item(self, g: str, wid: str | None) -> sqlite3.Row | None:
        if wid is None:
            return None
        row: sqlite3.Row | None = self._conn.execute(
            "SELECT * FROM work_items WHERE group_id=? AND work_item_id=?", (g, wid)
        ).fetchone()
        return row

    def _set(self, e: Event, **cols: Any) -> None:
        cols["updated_seq"] = e.seq
        assigns = ", ".join(f"{k}=?" for k in cols)
        self._conn.execute(
            f"UPDATE work_items SET {assigns} WHERE group_id=? AND work_item_id=?",
            (*cols.values(), e.group_id, e.work_item_id),
        )

    def _meta_max(self, key: str, value: int) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?,?) "
            "ON CONFLICT (key) DO UPDATE SET value=max(value, excluded.value)",
            (key, value),
        )

    def project(self, e: Event) -> bool:
        """Update the projection for ``e``; whether ``e`` needs an answer from this agent."""
        b, me = e.body, self.agent_id
        if e.type.startswith("member.") and b.get("agent_id") == me:
            cols: dict[str, Any] = {
                "membership_epoch": int(b["membership_epoch"]),
                "active": int(e.type != "member.removed"),
            }
            if "roles" in b:
                cols["roles"] = json.dumps(sorted(b["roles"]))
            assigns = ", ".join(f"{k}=?" for k in cols)
            self._conn.execute(
                f"UPDATE groups SET {assigns} WHERE group_id=?", (*cols.values(), e.group_id)
            )
            return False
        if e.type == "agent.session_opened" and b.get("agent_id") == me:
            self._meta_max("session_epoch", int(b["session_epoch"]))
            return False
        if e.type == "agent.card_published" and (b.get("card") or {}).get("agent_id") == me:
            self._meta_max("card_version", int(b["card"]["version"]))
            return False
        if e.type in ("work.authorized", "work.proposed"):
            contract = json.dumps(b["contract"])
            self._conn.execute(
                "INSERT OR REPLACE INTO work_items (group_id, work_item_id, mission_id, revision, "
                "contract, state, updated_seq) VALUES (?,?,?,?,?,?,?)",
                (
                    e.group_id,
                    e.work_item_id,
                    b["mission_id"],
                    int(b["contract"]["revision"]),
                    contract,
                    "open" if e.type == "work.authorized" else "proposed",
                    e.seq,
                ),
            )
            return False
        item = self._item(e.group_id, e.work_item_id)
        if item is None:
            if e.type != "work.offered":
                return False
            self._conn.execute(  # authorized before a snapshot: the contract is unknown
                "INSERT INTO work_items (group_id, work_item_id, mission_id, revision, state, "
                "updated_seq) VALUES (?,?,?,?,?,?)",
                (e.group_id, e.work_item_id, b["mission_id"], int(b["revision"]), "offered", e.seq),
            )
            item = self._item(e.group_id, e.work_item_id)
            assert item is not None
        mine = self._project_item(e, item)
        after = self._item(e.group_id, e.work_item_id)
        if after is not None and after["offer_id"] != item["offer_id"]:
            # the earlier offer is gone (accepted, withdrawn, declined, replaced): nothing to
            # answer any more; a new offer to this agent is inserted pending after this
            self._conn.execute(
                "UPDATE inbox SET status='done' WHERE group_id=? AND work_item_id=? "
                "AND status='pending'",
                (e.group_id, e.work_item_id),
            )
        return mine

    def _start_deadline(self, item: sqlite3.Row, at_ms: int) -> int | None:
        if item["contract"] is None:
            return None
        return at_ms + int(json.loads(item["contract"])["timeouts"]["start_deadline_ms"])

    def _project_item(self, e: Event, item: sqlite3.Row) -> bool:
        b, t, me = e.body, e.type, self.agent_id
        no_offer: dict[str, Any] = {
            "offer_id": None,
            "offer_expires_at_ms": None,
            "offer_revision": None,
        }
        if t == "work.contract_revised":
            self._set(e, contract=json.dumps(b["contract"]), revision=int(b["revision"]))
        elif t == "work.offered":
            mine = me in b.get("candidates", [])
            offer = (
                {
                    "offer_id": b["offer_id"],
                    "offer_expires_at_ms": b["expires_at_ms"],
                    "offer_revision": b["revision"],
                }
                if mine
                else no_offer
            )
            self._set(e, state="offered", revision=int(b["revision"]), **offer)
            return mine
        elif t in ("offer.withdrawn", "work.offer_declined"):
            if b.get("offer_id") == item["offer_id"] and (
                t == "offer.withdrawn" or b.get("agent_id") == me
            ):
                self._set(e, **no_offer)
        elif t == "work.offer_accepted":
            self._set(
                e,
                state="queued",
                owner=b["owner"],
                ownership_epoch=int(b["ownership_epoch"]),
                start_deadline_ms=b.get("start_deadline_ms"),
                approved=0,
                lease_id=None,
                queued_at_ms=e.recorded_at_ms,
                **no_offer,
            )
        elif t == "approval.execution_granted":
            self._set(e, approved=1)
        elif t == "work.started":
            cp = b.get("checkpoint")
            self._set(
                e,
                state="active",
                lease_id=(b.get("lease") or {}).get("lease_id"),
                start_deadline_ms=None,
                checkpoint=json.dumps(cp) if cp else None,
            )
        elif t in ("work.progress_reported", "work.checkpointed", "work.blocked"):
            if b.get("checkpoint"):
                self._set(e, checkpoint=json.dumps(b["checkpoint"]))
            if t == "work.checkpointed":
                self._set(
                    e,
                    state="queued",
                    lease_id=None,
                    queued_at_ms=e.recorded_at_ms,
                    start_deadline_ms=b.get("start_deadline_ms"),
                )
        elif t == "lease.revoked" and b.get("state") == "queued":  # a session was replaced
            self._set(
                e,
                lease_id=None,
                queued_at_ms=e.recorded_at_ms,
                start_deadline_ms=self._start_deadline(item, e.recorded_at_ms),
            )
        elif t in ("lease.released", "lease.expired", "lease.revoked"):
            if b.get("lease_id") == item["lease_id"]:
                self._set(e, lease_id=None)
        elif t == "work.unblocked" and b.get("state") == "queued":
            self._set(
                e,
                queued_at_ms=e.recorded_at_ms,
                start_deadline_ms=self._start_deadline(item, e.recorded_at_ms),
            )
        elif t in ("ownership.closed", "work.failed", "mission.child_created"):
            self._set(e, owner=None, lease_id=None, start_deadline_ms=None)
        state = b.get("state")
        if isinstance(state, str) and t != "work.late_result_recorded":
            self._set(e, state=state)
            if state not in ("queued", "active", "blocked"):
                self._set(e, lease_id=None, start_deadline_ms=None)
        return False

    def restore(self, snap: dict[str, Any]) -> None:
        """Reset one Group's projection to a verified Authority snapshot (MW-16-e).

        Snapshots carry no contracts: WorkItems authorized before the snapshot keep an unknown
        contract, and admission control declines their offers.
        """
        g, seq, state = str(snap["group_id"]), int(snap["seq"]), snap["state"]
        conn = self._conn
        conn.execute("INSERT OR IGNORE INTO groups (group_id) VALUES (?)", (g,))
        for m in state.get("members", []):
            if m["agent_id"] == self.agent_id:
                roles = json.dumps(sorted(json.loads(m["roles"])))
                conn.execute(
                    "UPDATE groups SET membership_epoch=?, roles=?, active=? WHERE group_id=?",
                    (m["membership_epoch"], roles, int(bool(m["active"])), g),
                )
        for w in state.get("work_items", []):
            conn.execute(
                "INSERT INTO work_items (group_id, work_item_id, mission_id, revision, state, "
                "owner, ownership_epoch, lease_id, updated_seq) VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (group_id, work_item_id) DO UPDATE SET state=excluded.state, "
                "revision=excluded.revision, owner=excluded.owner, "
                "ownership_epoch=excluded.ownership_epoch, lease_id=excluded.lease_id, "
                "updated_seq=excluded.updated_seq",
                (
                    g,
                    w["work_item_id"],
                    w["mission_id"],
                    w["revision"],
                    w["state"],
                    w["owner"],
                    w["ownership_epoch"],
                    w["lease_id"],
                    seq,
                ),
            )
        conn.execute("UPDATE groups SET applied_seq=max(applied_seq, ?) WHERE group_id=?", (seq, g))


__all__ = ["Projector"]
