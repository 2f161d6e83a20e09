"""Who may put what into a Mission's context: cross-Mission Artifacts (MW-13.3-d) and the Events
a Context Package cites (MW-13.3-b)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol import Event, Rejection, is_hash
from ..wire import ChainError, MembershipRequired
from ._handlers_context import context_use

if TYPE_CHECKING:
    from ._engine import Authority

#: Most Events one :func:`events_for_member` call returns.
MAX_EVENTS = 10_000


def check_context_use(
    authority: Authority, group_id: str, mission_id: str, artifact_hash: str
) -> Rejection | None:
    """May Artifact ``artifact_hash`` enter the context of Mission ``mission_id``?

    Allowed when it was published in that Mission, or promoted to an Organization Artifact
    (``artifact.promote``). A Group's content does not enter another Mission's context by
    default (MW-13.3-d).

    Args:
        authority: the Group Authority.
        group_id: the Group of the Mission.
        mission_id: the Mission whose context would receive the Artifact.
        artifact_hash: the Artifact's SHA-256 hex.

    Returns:
        ``None`` when allowed, else the refusal: ``unknown_mission``, ``unknown_artifact`` or
        ``cross_mission_content``.

    Raises:
        ValueError: ``artifact_hash`` is malformed.
    """
    if not is_hash(artifact_hash):
        raise ValueError(f"not a SHA-256 hex hash: {str(artifact_hash)[:80]!r}")
    return context_use(authority, group_id, mission_id, artifact_hash)


def events_for_member(
    authority: Authority, group_id: str, agent_id: str, from_seq: int, to_seq: int
) -> list[Event]:
    """The Events ``from_seq..to_seq`` (both included) of ``group_id``, for a member only.

    This is how a Worker fetches the Events a Context Package cites (MW-13.3-b): the agent
    must be an active member of the Group. Archived Events are included.

    Args:
        authority: the Group Authority.
        group_id: the Group.
        agent_id: the agent asking (authenticated by the caller).
        from_seq: first sequence, ≥ 1.
        to_seq: last sequence, ≤ the Group's head and < ``from_seq`` + 10,000.

    Returns:
        The Events in sequence order.

    Raises:
        UnknownGroupError: no such Group.
        MembershipRequired: ``agent_id`` is not an active member of the Group.
        ValueError: the range is empty, starts below 1, ends past the head or is too long.
        ChainError: the stored log has a gap in the range.
    """
    head, _ = authority.head(group_id)
    if authority.member_key(group_id, agent_id) is None:
        raise MembershipRequired(group_id, agent_id)
    if not 1 <= from_seq <= to_seq <= head or to_seq - from_seq >= MAX_EVENTS:
        raise ValueError(
            f"event range {from_seq}..{to_seq} is not within 1..{head} "
            f"(at most {MAX_EVENTS} Events)"
        )
    events = authority.events_between(group_id, from_seq, to_seq)
    for expected, ev in zip(range(from_seq, to_seq + 1), [*events, None], strict=False):
        if ev is None or ev.seq != expected:  # the stored log has a hole
            raise ChainError(group_id, expected, "gap")
    return events
