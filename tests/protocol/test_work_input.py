"""The bounds on WorkItem inputs a Mission carries, and inputs by reference (issue 24,
finding 4): pure functions, shared by the workflow's validator and the clients."""

from __future__ import annotations

import hashlib

import pytest

from missionweave import protocol as wi  # the public names of the work input's bounds

H = hashlib.sha256(b"x").hexdigest()


def test_input_bytes_are_of_one_deterministic_json() -> None:
    assert wi.input_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    assert wi.input_bytes({}) == 0 and wi.input_bytes({"a": 1}) == len(b'{"a":1}')
    with pytest.raises(ValueError):
        wi.input_json({"x": float("nan")})


def test_a_reference_is_one_key_naming_a_hash() -> None:
    assert wi.input_reference(H) == {wi.INPUT_ARTIFACT_KEY: H}
    assert wi.referenced_input(wi.input_reference(H)) == H
    assert wi.referenced_input({wi.INPUT_ARTIFACT_KEY: H, "other": 1}) is None
    assert wi.referenced_input({wi.INPUT_ARTIFACT_KEY: "not-a-hash"}) is None
    assert wi.referenced_input({"n": 1}) is None
    with pytest.raises(ValueError):
        wi.input_reference("ABC")


def test_one_input_and_the_total_are_bounded() -> None:
    fits = {"b": "x" * (wi.MAX_INLINE_INPUT_BYTES - 10)}
    assert wi.input_problem([("a", fits)]) is None
    over = {"b": "x" * wi.MAX_INLINE_INPUT_BYTES}
    code, reason, detail = wi.input_problem([("ok", fits), ("big", over)]) or ("", "", {})
    assert code == "input_too_large" and wi.INPUT_ARTIFACT_KEY in reason
    assert detail == {
        "work_item_id": "big",
        "bytes": wi.input_bytes(over),
        "max_bytes": wi.MAX_INLINE_INPUT_BYTES,
    }
    carried = wi.MAX_CARRIED_INPUT_BYTES - wi.input_bytes(fits) + 1
    code, _, detail = wi.input_problem([("a", fits)], carried) or ("", "", {})
    assert code == "mission_inputs_too_large"
    assert detail["carried_bytes"] == carried and detail["bytes"] == wi.MAX_CARRIED_INPUT_BYTES + 1
    assert (
        wi.input_problem([("a", wi.input_reference(H))], wi.MAX_CARRIED_INPUT_BYTES - 100) is None
    )


def test_an_input_goes_by_reference_when_inline_and_over_the_bound() -> None:
    """One rule for ``mission start`` and ``ctx.authorize_work`` (issue 36)."""
    big = {"blob": "x" * wi.MAX_INLINE_INPUT_BYTES}
    assert wi.goes_by_reference(big) and not wi.goes_by_reference({"n": 1})
    assert not wi.goes_by_reference(wi.input_reference(H))  # a reference already
    assert wi.goes_by_reference({"n": 12}, threshold=5) and not wi.goes_by_reference(
        {}, threshold=0
    )
