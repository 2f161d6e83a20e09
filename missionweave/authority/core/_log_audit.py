"""Offline verification of a Group's whole log (archive and online window).

Reads the database through a Store, so it works with the Authority stopped, and re-checks every
link, hash and Authority signature from sequence 1, and every carried Command's signature under
its actor's key as the log itself recorded it (``member.added``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from ...protocol import GENESIS_HASH, CommandType, Event, EventType, check_event
from ..wire import ChainError, UnknownGroupError
from ._store import Store


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """A successful verification: how many Events, the head sequence and hash."""

    group_id: str
    events: int
    head_seq: int
    head_hash: str


def _rows(store: Store, group_id: str) -> Iterator[tuple[int, str]]:
    for part in ("verify.archived", "verify.online"):
        for row in store.all(part, group_id):
            yield int(row[0]), str(row[1])


def verify_log(store: Store, group_id: str, authority_public_key: str) -> VerifyReport:
    """Verify the chain and every Authority signature of ``group_id`` from sequence 1.

    Args:
        store: the Authority database's Store (``Authority.store``, or
            :func:`~missionweave.authority.open_store` / ``SQLiteStore(path, read_only=True)``).
        group_id: the Group.
        authority_public_key: base64url Ed25519 key the Events must be signed with.

    Returns:
        A :class:`VerifyReport`.

    Raises:
        UnknownGroupError: no such Group.
        ChainError: names the first bad sequence and why (``gap``, ``broken link``,
            ``hash mismatch``, ``bad signature``, ``command mismatch``, ``bad command signature``,
            ``unknown actor``, ``unreadable``, ``head mismatch``).
    """
    head = store.one("groups.head", group_id)
    if head is None:
        raise UnknownGroupError(group_id)
    prev, expected, count = GENESIS_HASH, 1, 0
    keys: dict[str, str] = {}  # actor keys, learned from the log itself
    for seq, data in _rows(store, group_id):
        if seq != expected:
            raise ChainError(group_id, expected, "gap")
        try:
            ev = Event.model_validate_json(data)
        except ValidationError:
            raise ChainError(group_id, seq, "unreadable") from None
        if ev.seq != seq or ev.group_id != group_id:
            raise ChainError(group_id, seq, "hash mismatch")
        actor_key = keys.get(ev.actor or "")
        if ev.command is not None and ev.command.get("type") == CommandType.GROUP_CREATE:
            actor_key = str((ev.command.get("body") or {}).get("public_key", ""))
        if ev.command is not None and actor_key is None:
            raise ChainError(group_id, seq, "unknown actor")
        problem = check_event(ev, authority_public_key, prev, actor_key)
        if problem:
            raise ChainError(group_id, seq, problem)
        if ev.type == EventType.MEMBER_ADDED:
            keys[str(ev.body["agent_id"])] = str(ev.body["public_key"])
        prev, expected, count = ev.hash, expected + 1, count + 1
    if expected - 1 != head[0] or (count and prev != head[1]):
        raise ChainError(group_id, expected, "head mismatch")
    return VerifyReport(group_id, count, expected - 1, prev)
