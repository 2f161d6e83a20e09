"""The one rule for identifiers and short labels, wherever they enter (spec section 16).

An identifier (a Group, agent, actor, Command, Mission or WorkItem id) names something in signed
Events that people read and machines compare as strings, so two that look alike must be equal
and one must never disguise itself. The rule: 1 to :data:`MAX_ID_CHARS` characters, already in
Unicode NFC, none of them a control or format character (Unicode categories ``Cc``, ``Cf`` —
which covers NUL, the bidi overrides ``U+202A``–``U+202E``/``U+2066``–``U+2069`` and the
zero-width characters —, ``Cs``, ``Co``, ``Cn``, ``Zl``, ``Zp``), none invisible though it is a
letter or mark (:data:`INVISIBLE_RANGES`: Hangul fillers, variation selectors, the combining
grapheme joiner, …), no space but U+0020, and no white space at either end. Group ids also
exclude ``/``, ``?``, ``#``, ``%``, ``.`` and ``..``: they are URL path segments.

A label (a Mission title) may hold inner white space and up to :data:`MAX_LABEL_CHARS`
characters, under the same character rule.

A *new* identity — a Group, agent, Mission or WorkItem id as it is created — must also be in
Unicode NFKC (:func:`new_identifier_problem`): ``ｐａｙｐａｌ`` (fullwidth) or ``ﬁle`` (a
ligature) is refused, never normalized, since an id sits inside signed bytes. The check runs at
creation only, so a log written before it still folds and its ids still act.
"""

from __future__ import annotations

import re
import unicodedata

#: Longest identifier, in characters.
MAX_ID_CHARS = 128
#: Longest label (a Mission title), in characters.
MAX_LABEL_CHARS = 200

_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: Characters that show nothing though their category is a letter, mark or symbol: Unicode's
#: Default_Ignorable_Code_Point set (DerivedCoreProperties.txt; combining grapheme joiner,
#: Hangul fillers, variation selectors, Mongolian selectors, …), and blank-rendering ones found
#: by attack: the blank Braille pattern, the ideographic half fill space, the object
#: replacement character, the Khitan filler, a Duployan selector, the null notehead.
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x2800, 0x2800), (0x303F, 0x303F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFC),
    (0x16FE4, 0x16FE4), (0x1BC9D, 0x1BC9D), (0x1BCA0, 0x1BCA3), (0x1D159, 0x1D159),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
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
    problem = _text_problem(value, MAX_ID_CHARS)
    if problem is None and path_segment:
        if any(c in _NOT_IN_PATH for c in value):
            problem = "contains one of / ? # %"
        elif value in (".", ".."):
            problem = "is a dot segment (. or ..), which URLs drop"
    return problem


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
        category = unicodedata.category(ch)
        if (
            category in _FORBIDDEN_CATEGORIES
            or (category == "Zs" and ch != " ")
            or is_invisible(ch)
        ):
            return f"has a control or invisible character (U+{ord(ch):04X}) at index {i}"
    if value != value.strip():
        return "has white space at its start or end"
    if unicodedata.normalize("NFC", value) != value:
        return "is not in Unicode NFC"
    return None


def new_identifier_problem(value: object, *, path_segment: bool = False) -> str | None:
    """Why ``value`` cannot name a new identity (a Group, agent, Mission or WorkItem id at its
    creation), or ``None``: :func:`identifier_problem`, and then Unicode NFKC — a character
    with a compatibility form (fullwidth ``ｐ``, the ligature ``ﬁ``, superscript ``²``) is
    refused, naming the first one.
    """
    problem = identifier_problem(value, path_segment=path_segment)
    if problem is not None:
        return problem
    assert isinstance(value, str)
    if value.isascii() or unicodedata.is_normalized("NFKC", value):
        return None
    at = next((i for i, ch in enumerate(value) if unicodedata.normalize("NFKC", ch) != ch), None)
    if at is None:
        return "is not in Unicode NFKC"
    return f"is not in Unicode NFKC (U+{ord(value[at]):04X} at index {at} has a compatibility form)"


def is_invisible(ch: str) -> bool:
    """Whether ``ch`` is in :data:`INVISIBLE_RANGES`."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in INVISIBLE_RANGES)


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
    "new_identifier_problem",
]
