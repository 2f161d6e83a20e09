"""Canonical JSON bytes (RFC 8785) and SHA-256 digests.

Signed bodies must hold no floats: money is in minor units, durations in milliseconds. The
canonicalizer refuses floats outright rather than relying on RFC 8785's number serialization, so a
float can never slip into a signature and later fail to reproduce on another platform.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import rfc8785

from ._errors import CanonicalizationError


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


def check_json_value(value: Any, path: str = "") -> None:
    """Check that ``value`` can be canonicalized and signed as it is: JSON built from dict (str
    keys), list, str (valid Unicode), int, bool and None — no float, NaN or Infinity included.

    Raises:
        CanonicalizationError: naming the first offending place (``body.budget.cost``).
    """
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
