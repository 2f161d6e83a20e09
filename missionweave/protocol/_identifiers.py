"""The one rule for identifiers and short labels, wherever they enter (spec section 16).

An identifier (a Group, agent, actor, Command, Mission or WorkItem id) names something in signed
Events that people read and machines compare as strings, so two that look alike must be equal
and one must never disguise itself. The rule: 1 to :data:`MAX_ID_CHARS` characters, already in
Unicode NFC, none of them a control or format character (Unicode categories ``Cc``, ``Cf`` —
which covers NUL, the bidi overrides ``U+202A``–``U+202E``/``U+2066``–``U+2069`` and the
zero-width characters —, ``Cs``, ``Co``, ``Cn``, ``Zl``, ``Zp``), and no white space at either
end. Group ids also exclude ``/``, ``?``, ``#`` and ``%``: they are URL path segments.

A label (a Mission title) may hold inner white space and up to :data:`MAX_LABEL_CHARS`
characters, under the same character rule.
"""

from __future__ import annotations

import re
import unicodedata

#: Longest identifier, in characters.
MAX_ID_CHARS = 128
#: Longest label (a Mission title), in characters.
MAX_LABEL_CHARS = 200

_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_NOT_IN_PATH = frozenset("/?#%")
# Printable ASCII, no space at either end: valid under the rule, checked without a loop.
_PLAIN_ASCII = re.compile(r"[!-~](?:[ -~]*[!-~])?")


def identifier_problem(value: object, *, path_segment: bool = False) -> str | None:
    """Why ``value`` is not a valid identifier, or ``None`` when it is.

    Args:
        value: the candidate (anything: a non-string is refused).
        path_segment: also refuse ``/``, ``?``, ``#`` and ``%`` (Group ids).

    Returns:
        One short English phrase (``"has a control or invisible character at index 4"``), or
        ``None``.
    """
    if not isinstance(value, str):
        return "is not a string"
    return _text_problem(value, MAX_ID_CHARS) or (
        "contains one of / ? # %"
        if path_segment and any(c in _NOT_IN_PATH for c in value)
        else None
    )


def label_problem(value: object) -> str | None:
    """Why ``value`` is not a valid label (a Mission title; may be empty), or ``None``."""
    if not isinstance(value, str):
        return "is not a string"
    return None if value == "" else _text_problem(value, MAX_LABEL_CHARS)


def _text_problem(value: str, max_chars: int) -> str | None:
    if not value:
        return "is empty"
    if len(value) > max_chars:
        return f"is longer than {max_chars} characters"
    if _PLAIN_ASCII.fullmatch(value):
        return None
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            return f"has a control or invisible character (U+{ord(ch):04X}) at index {i}"
    if value != value.strip():
        return "has white space at its start or end"
    if unicodedata.normalize("NFC", value) != value:
        return "is not in Unicode NFC"
    return None


def check_identifier(value: object, field: str, *, path_segment: bool = False) -> str:
    """``value`` when it is a valid identifier.

    Raises:
        ValueError: ``"<field> <problem>"`` (see :func:`identifier_problem`).
    """
    problem = identifier_problem(value, path_segment=path_segment)
    if problem is not None:
        raise ValueError(f"{field} {problem}")
    assert isinstance(value, str)
    return value


__all__ = [
    "MAX_ID_CHARS",
    "MAX_LABEL_CHARS",
    "check_identifier",
    "identifier_problem",
    "label_problem",
]
