"""Building and signing Commands on behalf of one actor.

Not for workflow code (it reads the clock and draws random ids): activities, agents, services and
tests use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._canonical import check_json_value
from ._crypto import SigningKey
from ._messages import Command, new_id, sign_command


@dataclass
class Actor:
    """An agent identity that signs Commands.

    Attributes:
        agent_id: the agent's id.
        key: its Ed25519 key.
        session_epoch: the current Session Epoch (set after ``session.open``).
        membership_epochs: current Membership Epoch per Group id.
        clock: epoch milliseconds its Commands are issued at when a call names no
            ``issued_at_ms`` (the wall clock; an agent runtime gives its own clock, which
            time-skipping tests set to the Authority's virtual one).
    """

    agent_id: str
    key: SigningKey
    session_epoch: int = 0
    membership_epochs: dict[str, int] = field(default_factory=dict)
    clock: Callable[[], int] = field(
        default=lambda: time.time_ns() // 1_000_000, repr=False, compare=False
    )

    @classmethod
    def generate(cls, agent_id: str) -> Actor:
        """A new actor with a fresh key."""
        return cls(agent_id, SigningKey.generate())

    @property
    def public_key(self) -> str:
        return self.key.public_key

    def command(
        self,
        type: str,
        group_id: str | None,
        body: dict[str, Any] | None = None,
        *,
        command_id: str | None = None,
        issued_at_ms: int | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        critical_extensions: list[str] | None = None,
    ) -> Command:
        """A signed Command of ``type`` for ``group_id`` with this actor's current epochs.

        Args:
            type: the Command type, e.g. ``"work.accept_offer"``.
            group_id: the Group, or ``None`` for agent-level Commands (``session.open``).
            body: the arguments (JSON without floats).
            command_id: reuse an id to retry idempotently; a fresh one by default.
            issued_at_ms: the issue time, epoch milliseconds; :attr:`clock` by default.
            extensions: extension URN → value (signed with the rest).
            critical_extensions: the URNs of ``extensions`` the receiver must understand.

        Raises:
            CanonicalizationError: the body holds a float (NaN and Infinity included), a lone
                surrogate or a non-JSON value.
            pydantic.ValidationError: an id breaks the identifier rule
                (:func:`~missionweave.protocol.identifier_problem`).
        """
        check_json_value(body or {}, "body")
        cmd = Command(
            command_id=command_id or new_id("cmd"),
            group_id=group_id,
            type=type,
            actor=self.agent_id,
            issued_at_ms=issued_at_ms if issued_at_ms is not None else self.clock(),
            session_epoch=self.session_epoch,
            membership_epoch=self.membership_epochs.get(group_id or "", 0),
            body=body or {},
            extensions=extensions or {},
            critical_extensions=critical_extensions or [],
        )
        return sign_command(cmd, self.key)
