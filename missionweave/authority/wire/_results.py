"""What both sides of the Authority's API share about time and verdicts: :func:`now_ms` and
:class:`SubmitResult`, the Authority's verdict on one Command (protocol section 16)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...protocol import Event, Rejection
from ...protocol.temporal_contract import CommandVerdict, EventSummary


def now_ms() -> int:
    """Wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class SubmitResult(BaseModel):
    """The Authority's verdict on one Command.

    Attributes:
        command_id: the Command's id.
        status: ``accepted`` (Events written), ``rejected`` (nothing written) or ``recorded``
            (an audit Event was written but the Command changed no state — MW-11.5-b).
        events: the Events written (or, for a repeated command id, originally written).
        rejection: why, for ``rejected`` and ``recorded``.
        reply: facts for the caller only (e.g. a capability token); not part of the log.
        duplicate: the command id had been seen; ``events`` are the original ones.
    """

    model_config = ConfigDict(extra="forbid")
    command_id: str
    status: Literal["accepted", "rejected", "recorded"]
    events: list[Event] = Field(default_factory=list)
    rejection: Rejection | None = None
    reply: dict[str, Any] = Field(default_factory=dict)
    duplicate: bool = False

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"

    def verdict(self) -> CommandVerdict:
        """This result as a workflow payload: Events summarized (seq, type, work item, body
        without the ``contract``, which the workflow already holds), reply kept whole.

        The log records a capability token without its bearer signature; the summary of the
        Event that issued it carries the whole token from the caller's ``reply`` instead, so
        the workflow can hand it to the lease holder."""
        token = self.reply.get("capability_token")

        def body(e: Event) -> dict[str, Any]:
            b = {k: v for k, v in e.body.items() if k != "contract"}
            if token is not None and "capability_token" in b:
                b["capability_token"] = token
            return b

        return CommandVerdict(
            command_id=self.command_id,
            status=self.status,
            rejection=self.rejection,
            events=[
                EventSummary(seq=e.seq, type=e.type, work_item_id=e.work_item_id, body=body(e))
                for e in self.events
            ],
            reply=dict(self.reply),
        )
