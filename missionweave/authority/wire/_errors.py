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

from dataclasses import dataclass
from typing import Any, ClassVar

from ...protocol import MissionWeaveError, RejectionCode


class AuthorityError(MissionWeaveError):
    """Root of Authority errors. Each subclass is a dataclass of the facts it carries (its
    attributes), its message made from them."""


@dataclass(eq=False, repr=False)
class UnknownGroupError(AuthorityError):
    """The Group does not exist.

    Attributes:
        group_id: the Group asked for.
    """

    group_id: str

    def __post_init__(self) -> None:
        super().__init__(f"unknown group {self.group_id!r}")


@dataclass(eq=False, repr=False)
class CursorTooOldError(AuthorityError):
    """``after_sequence`` is below the online window: restore ``snapshot`` and resume (MW-16-e).

    Attributes:
        group_id: the Group.
        after_sequence: the cursor asked for.
        first_online_seq: the first sequence still online.
        snapshot: the signed snapshot reference (``group_id``, ``seq``, ``hash``, ``signature``).
    """

    code: ClassVar[str] = RejectionCode.CURSOR_TOO_OLD

    group_id: str
    after_sequence: int
    first_online_seq: int
    snapshot: dict[str, Any]

    def __post_init__(self) -> None:
        super().__init__(
            f"cursor {self.after_sequence} of group {self.group_id!r} is below the online window "
            f"(first online sequence {self.first_online_seq})"
        )


@dataclass(eq=False, repr=False)
class ChainError(AuthorityError):
    """The log does not verify.

    Attributes:
        group_id: the Group.
        seq: the first bad sequence.
        reason: ``broken link``, ``hash mismatch``, ``bad signature``, ``gap`` or ``unreadable``.
    """

    group_id: str
    seq: int
    reason: str

    def __post_init__(self) -> None:
        super().__init__(f"group {self.group_id!r}: sequence {self.seq}: {self.reason}")


@dataclass(eq=False, repr=False)
class MembershipRequired(AuthorityError):
    """The agent is not an active member of the Group whose Events it asked for (MW-13.3-b).

    Attributes:
        group_id: the Group.
        agent_id: the agent refused.
    """

    group_id: str
    agent_id: str

    def __post_init__(self) -> None:
        super().__init__(
            f"agent {self.agent_id!r} is not an active member of group {self.group_id!r}: "
            "its Events are visible to members only"
        )
