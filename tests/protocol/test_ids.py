"""Idempotency keys for external operations (MW-16-f) and derived attempt keys (MW-11.4-e)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from missionweave.protocol import attempt_key, idempotency_key

# Format pins, computed once: a change here breaks every in-flight external operation's dedup.
PINNED_KEY = "mwk1_16de9908de8531264f2ef25dd7aeb19e53517ce5e3747f5b28383d642dc2e6ab"
PINNED_ATTEMPT_1 = "mwa1_0f435e0164a565bb06619c63a621d6ee2cdd9b4ee0e4a4be1bf63a0015d3f8fd"


def test_pinned_regression_vector__MW_16_f() -> None:
    assert idempotency_key("m1", "w1", 1, "upload-report") == PINNED_KEY
    # the documented derivation: SHA-256 over the canonical JSON array of the tuple
    raw = b'["mw-idem-v1","m1","w1",1,"upload-report"]'
    assert PINNED_KEY == "mwk1_" + hashlib.sha256(raw).hexdigest()


def test_pinned_attempt_vector__MW_11_4_e() -> None:
    assert attempt_key(PINNED_KEY, 1) == PINNED_ATTEMPT_1
    raw = f'["mw-attempt-v1","{PINNED_KEY}",1]'.encode()
    assert PINNED_ATTEMPT_1 == "mwa1_" + hashlib.sha256(raw).hexdigest()


def test_stable_across_calls__MW_16_f() -> None:
    keys = {idempotency_key("mission-7", "item/3", 4, "charge-card") for _ in range(50)}
    assert len(keys) == 1


def test_stable_across_processes__MW_16_f() -> None:
    code = (
        "from missionweave.protocol import idempotency_key, attempt_key;"
        "k = idempotency_key('m1', 'w1', 1, 'upload-report');"
        "print(k, attempt_key(k, 1))"
    )
    root = Path(__file__).resolve().parents[2]
    outs = set()
    for seed in ("0", "12345"):  # a different str hash seed must not matter
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        outs.add(done.stdout.strip())
    assert outs == {f"{PINNED_KEY} {PINNED_ATTEMPT_1}"}


def test_shape__MW_16_f() -> None:
    key = idempotency_key("m", "w", 0, "op")
    assert key.startswith("mwk1_") and len(key) == 5 + 64
    assert all(c in "0123456789abcdef" for c in key[5:])


@pytest.mark.parametrize(
    "other",
    [
        ("m2", "w1", 1, "upload-report"),
        ("m1", "w2", 1, "upload-report"),
        ("m1", "w1", 2, "upload-report"),
        ("m1", "w1", 1, "upload-report-2"),
    ],
)
def test_any_input_changes_the_key__MW_16_f(other: tuple[str, str, int, str]) -> None:
    assert idempotency_key(*other) != PINNED_KEY


def test_new_ownership_epoch_new_key__MW_16_f() -> None:
    keys = [idempotency_key("m1", "w1", epoch, "upload-report") for epoch in range(0, 20)]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("a", "bc", 1, "op"), ("ab", "c", 1, "op")),
        (("m", "w1", 1, "op"), ("m", "w", 11, "op")),
        (("m", "w", 1, "1op"), ("m", "w", 11, "op")),
        (("m", "w", 1, "op"), ("m", "w", 1, "op ")),
        (("m,w", "x", 1, "op"), ("m", "w,x", 1, "op")),
        (('m"', "w", 1, "op"), ("m", '"w', 1, "op")),
    ],
)
def test_no_concatenation_collisions__MW_16_f(
    a: tuple[str, str, int, str], b: tuple[str, str, int, str]
) -> None:
    assert idempotency_key(*a) != idempotency_key(*b)


_part = st.text(min_size=1, max_size=8)
_tuple = st.tuples(_part, _part, st.integers(0, 2**31), _part)


@settings(max_examples=300, deadline=None)
@given(_tuple, _tuple)
def test_distinct_operations_get_distinct_keys__MW_16_f(
    a: tuple[str, str, int, str], b: tuple[str, str, int, str]
) -> None:
    assert (idempotency_key(*a) == idempotency_key(*b)) == (a == b)


def test_attempt_keys_deterministic_and_distinct__MW_11_4_e() -> None:
    attempts = [attempt_key(PINNED_KEY, n) for n in range(1, 30)]
    assert attempts == [attempt_key(PINNED_KEY, n) for n in range(1, 30)]
    assert len(set(attempts)) == len(attempts)
    assert all(a.startswith("mwa1_") and len(a) == 69 for a in attempts)
    assert PINNED_KEY not in attempts
    other = idempotency_key("m1", "w1", 2, "upload-report")
    assert attempt_key(other, 1) != attempt_key(PINNED_KEY, 1)


@pytest.mark.parametrize(
    "args",
    [("", "w", 1, "op"), ("m", "", 1, "op"), ("m", "w", 1, ""), ("m", "w", -1, "op")],
)
def test_bad_input_raises__MW_16_f(args: tuple[str, str, int, str]) -> None:
    with pytest.raises(ValueError):
        idempotency_key(*args)


@pytest.mark.parametrize(
    ("key", "attempt"),
    [(PINNED_KEY, 0), (PINNED_KEY, -1), ("mwa1_" + "0" * 64, 1), ("", 1), ("random", 2)],
)
def test_bad_attempt_input_raises__MW_11_4_e(key: str, attempt: int) -> None:
    with pytest.raises(ValueError):
        attempt_key(key, attempt)


# Version 2 (mwk2_) folds in the Group (docs/spec/READINGS.md, "MW-16-f — the Group in the key").
PINNED_KEY_V2 = "mwk2_c48ba52c316a9c38e60f92bc7e91b2ad53db6edaa3a82624522a79cb44dcf6c1"


def _v2(group: str, *rest: Any) -> str:
    mission, item, epoch, op = rest
    return idempotency_key(mission, item, epoch, op, key_version=2, group_id=group)


def test_pinned_regression_vector_v2__MW_16_f() -> None:
    assert _v2("g1", "m1", "w1", 1, "upload-report") == PINNED_KEY_V2
    raw = b'["mw-idem-v2","g1","m1","w1",1,"upload-report"]'
    assert PINNED_KEY_V2 == "mwk2_" + hashlib.sha256(raw).hexdigest()
    # version 1 is unchanged, the Group given or not: an epoch begun under it keeps its keys
    assert idempotency_key("m1", "w1", 1, "upload-report", group_id="g1") == PINNED_KEY


def test_two_groups_never_derive_one_key__MW_16_f() -> None:
    """The same Mission and WorkItem ids in two Groups: under mwk1_ one key (the defect of
    issue 38), under mwk2_ two."""
    same = ("m1", "w1", 1, "charge-card")
    assert idempotency_key(*same, group_id="g1") == idempotency_key(*same, group_id="g2")
    assert _v2("g1", *same) != _v2("g2", *same)
    assert _v2("g1", *same) != idempotency_key(*same)  # and no version shares a key


@settings(max_examples=300, deadline=None)
@given(_part, _part, _tuple)
def test_distinct_groups_get_distinct_keys__MW_16_f(
    g1: str, g2: str, op: tuple[str, str, int, str]
) -> None:
    assert (_v2(g1, *op) == _v2(g2, *op)) == (g1 == g2)


def test_v2_needs_its_group_and_a_known_version__MW_16_f() -> None:
    with pytest.raises(ValueError, match="group_id"):
        idempotency_key("m", "w", 1, "op", key_version=2)
    with pytest.raises(ValueError, match="key version"):
        idempotency_key("m", "w", 1, "op", key_version=3, group_id="g")
    assert attempt_key(_v2("g", "m", "w", 1, "op"), 1).startswith("mwa1_")
