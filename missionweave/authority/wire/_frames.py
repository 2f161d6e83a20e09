"""What a refused frame is, on both sides of the Authority's API (``SUBSCRIBE``, presence)."""

from __future__ import annotations

from typing import Any


class FrameError(Exception):
    """A frame is refused; becomes an ``ERROR`` frame or an HTTP error body.

    Attributes:
        code: ``invalid_frame`` or ``unauthorized`` (also for a Group that does not exist).
        reason: one human sentence.
        detail: machine-readable facts.
    """

    def __init__(self, code: str, reason: str, **detail: Any) -> None:
        super().__init__(reason)
        self.code, self.reason, self.detail = code, reason, detail


def is_int(value: Any) -> bool:
    """Whether ``value`` is a JSON integer (``bool`` is not)."""
    return isinstance(value, int) and not isinstance(value, bool)
