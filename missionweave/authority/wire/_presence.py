"""Presence: each agent's current capacity in a Group (docs/design.md §2).

Presence is ephemeral and deliberately **not** in the log: an agent reports ``free_slots`` and
``queue_depth`` in a small signed frame (``PUT /v1/groups/{g}/presence``)::

    {agent, group, free_slots, queue_depth, issuedAtMs, signature}

signed like the WebSocket SUBSCRIBE frame (the agent's Ed25519 signature over the canonical
bytes of the frame without ``signature``; :func:`~._frames.check_member_frame`). The server
keeps the latest report per agent in memory; a report older than :data:`PRESENCE_TTL_MS` on the
Authority's clock is stale and no longer shown. A restart forgets everything, which is right:
agents report again within one TTL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...protocol import Actor, RejectionCode, canonical_bytes
from ._frames import FrameError, is_int

#: A presence report is shown for this long after it was received, in milliseconds.
PRESENCE_TTL_MS = 30_000
#: The largest ``free_slots`` / ``queue_depth`` accepted.
MAX_PRESENCE_COUNT = 1_000_000

_FIELDS = ("agent", "group", "free_slots", "queue_depth", "issuedAtMs", "signature")


class PresenceInfo(BaseModel):
    """One agent's fresh presence, as ``GET /v1/groups/{g}/presence`` shows it.

    Attributes:
        free_slots: execution slots the agent has free now.
        queue_depth: WorkItems waiting in the agent's queue for this Group.
        age_ms: milliseconds since the Authority received the report (its clock).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    free_slots: int = Field(ge=0)
    queue_depth: int = Field(ge=0)
    age_ms: int = Field(ge=0)


def presence_frame(
    actor: Actor, group_id: str, free_slots: int, queue_depth: int, issued_at_ms: int
) -> dict[str, Any]:
    """A signed presence report of ``actor`` in ``group_id``.

    Args:
        actor: the reporting agent (an active member of the Group).
        group_id: the Group.
        free_slots: free execution slots, >= 0.
        queue_depth: WorkItems waiting in the agent's queue, >= 0.
        issued_at_ms: when, epoch milliseconds (within 5 minutes of the Authority's clock).

    Returns:
        The frame with ``signature`` (base64url) over the canonical bytes of the rest.
    """
    frame: dict[str, Any] = {
        "agent": actor.agent_id,
        "group": group_id,
        "free_slots": free_slots,
        "queue_depth": queue_depth,
        "issuedAtMs": issued_at_ms,
    }
    frame["signature"] = actor.key.sign(canonical_bytes(frame))
    return frame


def check_presence_shape(frame: dict[str, Any], group_id: str) -> None:
    """Check the fields of a presence frame (not its signature).

    Raises:
        FrameError: ``invalid_frame`` when a field is missing, extra, of the wrong type, out of
            range, or ``group`` is not ``group_id`` (the Group of the URL).
    """
    if set(frame) != set(_FIELDS) or not (
        isinstance(frame["agent"], str)
        and isinstance(frame["group"], str)
        and isinstance(frame["signature"], str)
        and all(is_int(frame[k]) for k in ("free_slots", "queue_depth", "issuedAtMs"))
        and 0 <= frame["free_slots"] <= MAX_PRESENCE_COUNT
        and 0 <= frame["queue_depth"] <= MAX_PRESENCE_COUNT
    ):
        raise FrameError(
            RejectionCode.INVALID_FRAME,
            f"a presence report is exactly {', '.join(_FIELDS)}; counts are integers "
            f"0..{MAX_PRESENCE_COUNT}",
            fields=list(_FIELDS),
        )
    if frame["group"] != group_id:
        raise FrameError(
            RejectionCode.INVALID_FRAME,
            "the report's group is not the group of the URL",
            group=frame["group"],
            url_group=group_id,
        )


@dataclass(slots=True)
class _Entry:
    free_slots: int
    queue_depth: int
    issued_at_ms: int
    received_at_ms: int


class PresenceBoard:
    """The latest presence report per (Group, agent), in memory, with a TTL.

    Used from the event loop only (no lock).

    Args:
        clock: epoch-milliseconds clock (the Authority's, so a virtual clock ages reports too).
        ttl_ms: a report is stale this many milliseconds after it was received.

    Raises:
        ValueError: ``ttl_ms`` < 1.
    """

    def __init__(self, clock: Callable[[], int], ttl_ms: int = PRESENCE_TTL_MS) -> None:
        if ttl_ms < 1:
            raise ValueError("ttl_ms must be positive")
        self._clock = clock
        self.ttl_ms = ttl_ms
        self._groups: dict[str, dict[str, _Entry]] = {}

    def put(
        self, group_id: str, agent_id: str, free_slots: int, queue_depth: int, issued_at_ms: int
    ) -> bool:
        """Store a checked report unless an at-least-as-new one is stored.

        Reports can arrive out of order (concurrent requests, retries); the one issued last
        wins, so a replayed old report cannot overwrite a newer one.

        Returns:
            Whether the report was stored.
        """
        entries = self._groups.setdefault(group_id, {})
        old = entries.get(agent_id)
        if old is not None and old.issued_at_ms >= issued_at_ms:
            return False
        entries[agent_id] = _Entry(free_slots, queue_depth, issued_at_ms, self._clock())
        return True

    def fresh(self, group_id: str) -> dict[str, PresenceInfo]:
        """Every fresh report of ``group_id`` by agent id; stale ones are dropped."""
        entries = self._groups.get(group_id, {})
        now = self._clock()
        out: dict[str, PresenceInfo] = {}
        for agent_id, e in list(entries.items()):
            age = max(0, now - e.received_at_ms)
            if age > self.ttl_ms:
                del entries[agent_id]
                continue
            out[agent_id] = PresenceInfo(
                free_slots=e.free_slots, queue_depth=e.queue_depth, age_ms=age
            )
        return dict(sorted(out.items()))


__all__ = [
    "MAX_PRESENCE_COUNT",
    "PRESENCE_TTL_MS",
    "PresenceBoard",
    "PresenceInfo",
    "check_presence_shape",
    "presence_frame",
]
