"""Canonical JSON bytes (RFC 8785) and SHA-256 digests.

Signed bodies must hold no floats: money is in minor units, durations in milliseconds. The
canonicalizer refuses floats outright rather than relying on RFC 8785's number serialization, so a
float can never slip into a signature and later fail to reproduce on another platform.

The hot path (every Command signed, every Event hashed and checked) uses the standard library's
C JSON encoder, whose output *is* RFC 8785 for what is left once floats, lone surrogates and
integers beyond ±(2⁵³−1) are refused: sorted keys, no whitespace, the same string escapes. Key
order is the one exception — RFC 8785 sorts by UTF-16 code units, Python by code points, which
differ only for keys holding a character at or above U+E000 alongside one above U+FFFF — so
such values go to the ``rfc8785`` package, which stays the oracle: a property test checks that
both give the same bytes (``tests/protocol/test_messages.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import rfc8785

from ._errors import CanonicalizationError

_MAX_INT = 2**53 - 1
_ENCODER = json.JSONEncoder(
    ensure_ascii=False,
    separators=(",", ":"),
    sort_keys=True,
    allow_nan=False,
    check_circular=False,
)


def _text(value: str, path: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise CanonicalizationError(
                f"a lone surrogate at {path or '$'}: signed text is valid Unicode"
            ) from None


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _text(value, path)
        return
    if isinstance(value, int):
        if not -_MAX_INT <= value <= _MAX_INT:
            raise CanonicalizationError(
                f"integer {value} at {path or '$'} is beyond ±(2**53-1) (RFC 8785, I-JSON)"
            )
        return
    if isinstance(value, float):  # NaN and Infinity too: pydantic would sign them as null
        raise CanonicalizationError(
            f"float {value!r} at {path or '$'}: signed bodies hold integers only "
            "(money in minor units, durations in milliseconds)"
        )
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise CanonicalizationError(f"non-string key {k!r} at {path or '$'}")
            _text(k, f"{path}.<key>")
            _check(v, f"{path}.{k}")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{path}[{i}]")
        return
    raise CanonicalizationError(f"unsupported type {type(value).__name__} at {path or '$'}")


def _plain(value: Any) -> bool | None:
    """One pass without paths: ``True`` when ``value`` is plain signable JSON whose keys sort
    the same in UTF-16 and in code points; ``None`` when it is certainly not signable; ``False``
    otherwise (other key orders, subclasses, floats: :func:`_check` and ``rfc8785`` decide)."""
    stack = [value]
    simple = True
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return None
        elif t is int:
            if not -_MAX_INT <= v <= _MAX_INT:
                return None
        elif t is dict:
            for k, x in v.items():
                if not isinstance(k, str):
                    return None
                if not k.isascii():
                    try:
                        k.encode("utf-8")
                    except UnicodeEncodeError:
                        return None
                    if max(k) >= "\ue000":
                        simple = False
                stack.append(x)
        elif t is list or t is tuple:
            stack.extend(v)
        elif v is None or t is bool:
            pass
        elif isinstance(v, str):  # a StrEnum member: the C encoder writes its value
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return None
        else:  # another subclass, a Mapping, a float: the careful path decides
            simple = False
    return simple


def check_json_value(value: Any, path: str = "") -> None:
    """Check that ``value`` can be canonicalized and signed as it is: JSON built from dict (str
    keys), list, str (valid Unicode), int (within ±(2⁵³−1)), bool and None — no float, NaN or
    Infinity included.

    Raises:
        CanonicalizationError: naming the first offending place (``body.budget.cost``).
    """
    if _plain(value) is not True:
        _check(value, path)


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 (JCS) canonical UTF-8 bytes of a JSON value.

    Args:
        value: a JSON value built from dict (str keys), list, str, int, bool and None.

    Returns:
        The canonical bytes: sorted keys, no insignificant whitespace.

    Raises:
        CanonicalizationError: the value holds a float, a non-string key or a non-JSON type.
    """
    if _plain(value) is True:
        return _ENCODER.encode(value).encode("utf-8")
    _check(value, "")
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError) as exc:  # e.g. int out of range
        raise CanonicalizationError(str(exc)) from exc


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data`` as 64 lowercase hex characters."""
    return hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """SHA-256 hex of the canonical bytes of ``value`` (see :func:`canonical_bytes`)."""
    return sha256_hex(canonical_bytes(value))
