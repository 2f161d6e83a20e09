"""How each Group Event changes the agent's local projection (MW-11.1-b).

The rules read only the Event, never a local clock, so replaying a Group's log from the start
always rebuilds the same projection. WorkItem state is the one reducer's
(:func:`~missionweave.protocol.reduce_work_item`), kept for the WorkItems this agent owns or
owned — offers reach the agent as ``execute_work_item`` activities carrying their contract, so
nothing else needs projecting, and the agent pays for the Events that concern it. Only
metadata is stored (MW-13.3-e): no checkpoint, outputs or Evidence.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

from ..protocol import Event, EventType, WorkItemFacts, WorkItemState, reduce_work_item

#: Facts never stored locally (payloads, not metadata).
_DROPPED: dict[str, Any] = {
    "checkpoint": None,
    "outputs": {},
    "artifacts": (),
    "evidence": (),
    "approval": None,
}


def facts_json(f: WorkItemFacts) -> str:
    """The stored form of ``f``: metadata only; the lease without its capability token."""
    f = dataclasses.replace(f, **_DROPPED)
    data = dataclasses.asdict(f)
    if f.lease is not None:
        data["lease"] = {k: v for k, v in f.lease.items() if k != "capability_token"}
    return json.dumps(data, separators=(",", ":"))


def facts_of(text: str) -> WorkItemFacts:
    """The inverse of :func:`facts_json`."""
    data = json.loads(text)
    for k in ("offer_candidates", "declined", "artifacts", "evidence"):
        data[k] = tuple(data.get(k) or ())
    data["state"] = WorkItemState(data["state"]) if data.get("state") else None
    return WorkItemFacts(**data)


class Projector:
    """Applies Events to the projection tables; the caller owns the transaction.

    Args:
        conn: the local state's connection.
        agent_id: this agent (its memberships, session, card and WorkItems are tracked).
    """

    def __init__(self, conn: sqlite3.Connection, agent_id: str) -> None:
        self._conn = conn
        self.agent_id = agent_id

    def _meta_max(self, key: str, value: int) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?,?) "
            "ON CONFLICT (key) DO UPDATE SET value=max(value, excluded.value)",
            (key, value),
        )

    def project(self, e: Event) -> None:
        """Update the projection for ``e``."""
        b, me = e.body, self.agent_id
        if e.type.startswith("member.") and b.get("agent_id") == me:
            cols: dict[str, Any] = {
                "membership_epoch": int(b["membership_epoch"]),
                "active": int(e.type != EventType.MEMBER_REMOVED),
            }
            if "roles" in b:
                cols["roles"] = json.dumps(sorted(b["roles"]))
            assigns = ", ".join(f"{k}=?" for k in cols)
            self._conn.execute(
                f"UPDATE groups SET {assigns} WHERE group_id=?", (*cols.values(), e.group_id)
            )
        elif e.type == EventType.AGENT_SESSION_OPENED and b.get("agent_id") == me:
            self._meta_max("session_epoch", int(b["session_epoch"]))
        elif (
            e.type == EventType.AGENT_CARD_PUBLISHED and (b.get("card") or {}).get("agent_id") == me
        ):
            self._meta_max("card_version", int(b["card"]["version"]))
        elif (
            e.type == EventType.GROUP_PRIORITY_SET
        ):  # the Group's weight, set by policy (MW-11.1-d)
            self._conn.execute(
                "INSERT INTO meta (key, value) VALUES (?,?) "
                "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                (f"weight_milli:{e.group_id}", int(b["effective_weight_milli"])),
            )
        elif e.work_item_id is not None:
            self._project_item(e)

    def _project_item(self, e: Event) -> None:
        row = self._conn.execute(
            "SELECT facts FROM work_items WHERE group_id=? AND work_item_id=?",
            (e.group_id, e.work_item_id),
        ).fetchone()
        if row is None:
            if e.type != EventType.WORK_OFFER_ACCEPTED or e.body.get("owner") != self.agent_id:
                return  # not this agent's: nothing to keep
            before = WorkItemFacts(mission_id=None)
        else:
            before = facts_of(row[0])
        after = reduce_work_item(before, e)
        self._conn.execute(
            "INSERT INTO work_items (group_id, work_item_id, owner, state, facts, updated_seq) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT (group_id, work_item_id) DO UPDATE SET "
            "owner=excluded.owner, state=excluded.state, facts=excluded.facts, "
            "updated_seq=excluded.updated_seq",
            (
                e.group_id,
                e.work_item_id,
                after.owner,
                after.state and str(after.state),
                facts_json(after),
                e.seq,
            ),
        )

    def restore(self, snap: dict[str, Any]) -> None:
        """Reset one Group's projection to a verified Authority snapshot (MW-16-e)."""
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
        conn.execute("DELETE FROM work_items WHERE group_id=?", (g,))
        for w in state.get("work_items", []):
            if w["owner"] != self.agent_id:
                continue
            f = WorkItemFacts(
                state=WorkItemState(w["state"]),
                mission_id=w["mission_id"],
                revision=w["revision"],
                owner=w["owner"],
                ownership_epoch=w["ownership_epoch"],
                lease={"lease_id": w["lease_id"]} if w["lease_id"] else None,
                seq=seq,
            )
            conn.execute(
                "INSERT INTO work_items (group_id, work_item_id, owner, state, facts, "
                "updated_seq) VALUES (?,?,?,?,?,?)",
                (g, w["work_item_id"], f.owner, str(f.state), facts_json(f), seq),
            )
        conn.execute("UPDATE groups SET applied_seq=max(applied_seq, ?) WHERE group_id=?", (seq, g))


__all__ = ["Projector", "facts_json", "facts_of"]
