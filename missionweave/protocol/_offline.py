"""The bounded-offline binding a buffered Command carries (MW-11.5-f) and the Event that
records an offline resource charge (MW-11.5-i).

A Worker cut off from its Authority buffers its progress and checkpoints as signed Commands
that carry :data:`BOUNDED_OFFLINE_EXECUTION` as a *critical* extension: an Authority that does
not know it must reject the Command rather than apply it as if it were fresh. On reconnection
the Worker keeps the binding and re-signs the Command with its current ``issued_at_ms``,
Session Epoch and Membership Epoch (MW-11.5-g).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._contract import ResourceUsage
from ._vocabulary import CommandType, EventType

#: The critical extension of every buffered Command (MW-11.5-f).
BOUNDED_OFFLINE_EXECUTION = "urn:missionweaveprotocol:extension:bounded-offline-execution"
#: The Event appended for each non-zero offline resource delta (MW-11.5-i).
RESOURCE_USAGE_RECORDED = EventType.RESOURCE_USAGE_RECORDED
#: The extensions this implementation understands (an unknown critical one is rejected).
KNOWN_EXTENSIONS = frozenset({BOUNDED_OFFLINE_EXECUTION})
#: Command types a Worker may buffer while offline: progress and checkpoints (MW-11.5-c).
BUFFERABLE_COMMANDS = frozenset({CommandType.PROGRESS_REPORT})


class OfflineBinding(BaseModel):
    """The value of :data:`BOUNDED_OFFLINE_EXECUTION` (MW-11.5-f). Times are epoch
    milliseconds on the Worker's clock; ``usage`` is the six-dimension delta the buffered
    Command charges (it is charged once, at reconciliation, not in the body).

    Attributes:
        agent_id: the Agent that did the work.
        group_id: the Group of the WorkItem.
        work_item_id: the WorkItem whose conversation the Command belongs to.
        session_epoch: the Session Epoch the lease was granted to (the historical session).
        ownership_epoch: the ownership epoch of the execution.
        lease_id: the historical execution lease id.
        disconnected_at_ms: when the Worker lost the Authority.
        buffered_at_ms: when the Command was buffered.
        grace_deadline_ms: the lease's expiry plus the contract's ``offline_grace_ms``.
        lease_expires_at_ms: the lease's expiry as the Worker last heard it.
        usage: the resource-usage delta (money, tokens, tool calls, compute, wall clock,
            side effects).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    agent_id: str = Field(min_length=1, max_length=128)
    group_id: str = Field(min_length=1, max_length=128)
    work_item_id: str = Field(min_length=1, max_length=128)
    session_epoch: int = Field(ge=0, strict=True)
    ownership_epoch: int = Field(ge=0, strict=True)
    lease_id: str = Field(min_length=1, max_length=128)
    disconnected_at_ms: int = Field(ge=0, strict=True)
    buffered_at_ms: int = Field(ge=0, strict=True)
    grace_deadline_ms: int = Field(ge=0, strict=True)
    lease_expires_at_ms: int = Field(ge=0, strict=True)
    usage: ResourceUsage = Field(default_factory=ResourceUsage)

    def wire(self) -> dict[str, Any]:
        """The binding as the extension's JSON value."""
        return self.model_dump(mode="json")


__all__ = [
    "BOUNDED_OFFLINE_EXECUTION",
    "BUFFERABLE_COMMANDS",
    "KNOWN_EXTENSIONS",
    "RESOURCE_USAGE_RECORDED",
    "OfflineBinding",
]
