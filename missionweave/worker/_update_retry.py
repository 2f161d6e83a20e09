"""Retrying the one Update an agent sends: ``authorize_work`` (a tool's change to the DAG).

Temporal admits at most 10 Updates in flight per workflow (the 11th fails with
ResourceExhausted); the same update id makes every retry idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.service import RPCStatusCode

#: Temporal answers worth retrying: busy (the 10-updates bound), unavailable, timed out, or not
#: found (a workflow between runs, or not started yet).
RETRYABLE = frozenset(
    {
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.ABORTED,
        RPCStatusCode.NOT_FOUND,
    }
)


@dataclass(frozen=True, slots=True)
class UpdateRetry:
    """Backoff for updates Temporal could not take.

    Attributes:
        initial_backoff: wait before the first retry.
        max_backoff: the longest wait between retries.
        max_attempts: attempts in all before giving up.
        rpc_timeout: the deadline of one update call.
    """

    initial_backoff: timedelta = timedelta(milliseconds=100)
    max_backoff: timedelta = timedelta(seconds=2)
    max_attempts: int = 10
    rpc_timeout: timedelta = timedelta(seconds=30)


__all__ = ["RETRYABLE", "UpdateRetry"]
