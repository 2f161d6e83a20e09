"""The JSON bounds of the Authority's front (``_limits``), against an oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missionweave.authority.http._limits import MAX_JSON_DEPTH, JSONProblem, _depth, parse_json

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\\\ab\n\u00e9'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\\\ab'), inner, max_size=3)
    ),
    max_leaves=30,
)


def _true_depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_true_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_true_depth(v) for v in value.values()), default=0)
    return 0


@given(_json, st.booleans())
def test_depth_skips_strings_and_escapes(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert _depth(raw) == _true_depth(value)
    assert parse_json(raw) == value


def test_bounds_refuse_with_their_reason() -> None:
    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    for raw, code in (
        (deep, "too_deep"),
        (b'{"a":1,"a":2}', "invalid_json"),
        (b"[NaN]", "invalid_json"),
        (b"[-Infinity]", "invalid_json"),
        (b"{not json", "invalid_json"),
        (b"\xff", "invalid_json"),
    ):
        with pytest.raises(JSONProblem) as err:
            parse_json(raw)
        assert err.value.code == code, raw
    ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert _depth(ok) == MAX_JSON_DEPTH and parse_json(ok) is not None
