"""Errors of the agent runtime, and the exceptions a handler raises to end its work.

Error tree::

    MissionWeaveError                   (missionweave.protocol)
    └── WorkerError                     root of the agent runtime's errors
        ├── HandlerLoadError            load_handlers: a module cannot be imported or has no
        │                               handler; a handler's signature is unusable
        ├── SessionError                the Authority refused ``session.open`` (not a member,
        │                               unknown agent, key mismatch)
        ├── LeaseLost                   the execution lease is no longer valid: revoked, expired,
        │                               superseded, or unconfirmable (raised by ``guard()``,
        │                               ``save()``, ``report()``)
        └── HandlerOutcome              how a handler ends without a Submission
            ├── Pause                   checkpoint and release the slot (MW-11.3-g)
            ├── Blocked                 checkpoint, name the resolution needed (MW-11.4-c)
            └── PermanentFailure        fail, and do not retry (MW-11.4-f)

Any other exception a handler raises is a retryable failure (``work.fail`` with Evidence).
"""

from __future__ import annotations

from typing import Any

from ..protocol import MissionWeaveError


class WorkerError(MissionWeaveError):
    """Root of the agent runtime's errors."""


class HandlerLoadError(WorkerError):
    """A handler module cannot be imported, holds no handler, or a handler is malformed."""


class SessionError(WorkerError):
    """The Authority refused to open the agent's session.

    Attributes:
        code: the rejection code (``unknown_actor``, ``not_a_member``, ``bad_signature``, …).
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"session.open rejected: {code}: {reason}")
        self.code = code


class LeaseLost(WorkerError):
    """The execution lease is gone (or cannot be confirmed): stop before any side effect.

    Implements the fence of MW-11.5-d: without a currently valid lease and capability token no
    new externally visible action may be taken.

    Attributes:
        code: the Authority's rejection code when it gave one (``stale_lease``,
            ``lease_expired``, ``stale_session_epoch``, …), else ``lease_invalid`` or
            ``authority_unreachable``.
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(f"lease lost: {code}: {reason}")
        self.code = code


class HandlerOutcome(WorkerError):
    """Base of the exceptions that end a handler with an outcome other than a Submission."""


def _checkpoint(state: dict[str, Any], what: str) -> dict[str, Any]:
    if not isinstance(state, dict) or not state:
        raise ValueError(f"{what} needs a non-empty checkpoint dict (the resume point)")
    return dict(state)


class Pause(HandlerOutcome):
    """End the handler at a safe point: the runtime reports ``work.checkpoint`` with
    ``state``, the lease and slot are released and the WorkItem re-enters its Group queue
    (MW-11.3-g). Raise it, or return ``ctx.pause(state)``.

    Args:
        state: the checkpoint to resume from: a non-empty JSON object without floats.

    Raises:
        ValueError: ``state`` is empty or not a dict.
    """

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = _checkpoint(state, "Pause")
        super().__init__("paused at a checkpoint")


class Blocked(HandlerOutcome):
    """End the handler because it needs something: the runtime reports ``work.block`` with the
    ``resolution`` it needs and the checkpoint ``state`` (MW-11.4-c).

    Args:
        resolution: what would unblock it (a JSON object, e.g. ``{"needs": "credentials"}``).
        state: the checkpoint to resume from (non-empty).

    Raises:
        ValueError: ``resolution`` or ``state`` is empty.
    """

    def __init__(self, resolution: dict[str, Any], state: dict[str, Any]) -> None:
        if not isinstance(resolution, dict) or not resolution:
            raise ValueError("Blocked needs a non-empty resolution dict")
        self.resolution = dict(resolution)
        self.state = _checkpoint(state, "Blocked")
        super().__init__(f"blocked: needs {sorted(self.resolution)}")


class PermanentFailure(HandlerOutcome):
    """Fail the WorkItem without retry: ``work.fail`` with ``retryable: false`` (MW-11.4-f).

    Args:
        message: a short factual error (it becomes the failure Evidence's summary).
    """


__all__ = [
    "Blocked",
    "HandlerLoadError",
    "HandlerOutcome",
    "LeaseLost",
    "Pause",
    "PermanentFailure",
    "SessionError",
    "WorkerError",
]
