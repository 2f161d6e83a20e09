"""Authority errors.

Error tree::

    AuthorityError
    ├── UnknownGroupError     no such Group
    ├── CursorTooOldError     the cursor is below the online window (carries a snapshot reference)
    └── ChainError            the stored log does not verify (names the first bad sequence)

Rejections of Commands are *not* exceptions: they come back as data in a
:class:`~missionweave.authority.SubmitResult`.
"""

from __future__ import annotations

from typing import Any

from ...protocol import MissionWeaveError, RejectionCode


class AuthorityError(MissionWeaveError):
    """Root of Authority errors."""


class UnknownGroupError(AuthorityError):
    """The Group does not exist."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"unknown group {group_id!r}")
        self.group_id = group_id


class CursorTooOldError(AuthorityError):
    """``after_sequence`` is below the online window: restore ``snapshot`` and resume (MW-16-e).

    Attributes:
        group_id: the Group.
        after_sequence: the cursor asked for.
        first_online_seq: the first sequence still online.
        snapshot: the signed snapshot reference (``group_id``, ``seq``, ``hash``, ``signature``).
    """

    code: str = RejectionCode.CURSOR_TOO_OLD

    def __init__(
        self, group_id: str, after_sequence: int, first_online_seq: int, snapshot: dict[str, Any]
    ) -> None:
        super().__init__(
            f"cursor {after_sequence} of group {group_id!r} is below the online window "
            f"(first online sequence {first_online_seq})"
        )
        self.group_id = group_id
        self.after_sequence = after_sequence
        self.first_online_seq = first_online_seq
        self.snapshot = snapshot


class ChainError(AuthorityError):
    """The log does not verify.

    Attributes:
        group_id: the Group.
        seq: the first bad sequence.
        reason: ``broken link``, ``hash mismatch``, ``bad signature``, ``gap`` or ``unreadable``.
    """

    def __init__(self, group_id: str, seq: int, reason: str) -> None:
        super().__init__(f"group {group_id!r}: sequence {seq}: {reason}")
        self.group_id = group_id
        self.seq = seq
        self.reason = reason


class MembershipRequired(AuthorityError):
    """The agent is not an active member of the Group whose Events it asked for (MW-13.3-b).

    Attributes:
        group_id: the Group.
        agent_id: the agent refused.
    """

    def __init__(self, group_id: str, agent_id: str) -> None:
        super().__init__(
            f"agent {agent_id!r} is not an active member of group {group_id!r}: "
            "its Events are visible to members only"
        )
        self.group_id = group_id
        self.agent_id = agent_id
