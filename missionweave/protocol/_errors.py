"""Errors and structured rejections shared by every component.

Error tree::

    MissionWeaveError
    ├── ProtocolError            bad input to a pure protocol function
    │   ├── CanonicalizationError   a value cannot be canonicalized (floats, NaN, non-str keys)
    │   ├── SignatureError          a signature does not verify
    │   └── GraphError              a WorkItem DAG change is invalid (cycle, self-loop, unknown id)
    └── RejectedError            a Rejection raised as an exception (carries ``.rejection``)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._rejection_codes import RejectionCode


class Rejection(BaseModel):
    """A structured refusal: what was refused, why, and the facts behind it.

    Rejections are data, never free strings. ``code`` is a :class:`RejectionCode` callers may
    branch on (for example ``stale_lease``, ``transition_not_allowed``, ``cycle``; on the wire its
    string value, and a code no member names does not validate); ``reason`` is one human
    sentence; ``detail`` holds the machine-readable facts (ids, expected vs. actual).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: RejectionCode
    reason: str
    detail: dict[str, Any] = Field(default_factory=dict)

    def line(self, most: int = 500) -> str:
        """The refusal in one line for people, with the facts that say what it is about:
        ``deliverable_missing: a deliverable … (deliverable=report, media_type=text/markdown)``,
        ``evidence_missing: every acceptance criterion needs Evidence (missing=tests, docs)``.
        ``detail`` entries of ``None`` are left out, lists joined by commas; at most ``most``
        characters, never a line break (a WorkItem's error shows its first line)."""
        facts = []
        for key, value in self.detail.items():
            if value is None:
                continue
            if isinstance(value, list | tuple):
                value = ", ".join(str(v) for v in value)
            facts.append(f"{key}={value}")
        text = f"{self.code.value}: {self.reason}" + (f" ({', '.join(facts)})" if facts else "")
        text = " ".join(text.split())
        return text if len(text) <= most else text[: most - 1] + "…"


class MissionWeaveError(Exception):
    """Root of every MissionWeave exception."""


class ProtocolError(MissionWeaveError):
    """Bad input to a pure protocol function."""


class CanonicalizationError(ProtocolError):
    """A value cannot be put in RFC 8785 canonical form under our rules (no floats)."""


class SignatureError(ProtocolError):
    """An Ed25519 signature does not verify, or a key is malformed."""


class RejectedError(MissionWeaveError):
    """A :class:`Rejection` raised as an exception.

    Attributes:
        rejection: the structured refusal.
    """

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.code}: {rejection.reason}")
        self.rejection = rejection

    @classmethod
    def of(cls, code: RejectionCode, reason: str, **detail: Any) -> RejectedError:
        """Build the error from its parts."""
        return cls(Rejection(code=code, reason=reason, detail=detail))


class GraphError(ProtocolError):
    """An invalid WorkItem DAG change; ``.rejection`` says which (MW-10.4-c)."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(f"{rejection.code}: {rejection.reason}")
        self.rejection = rejection
