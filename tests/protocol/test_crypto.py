"""RFC 8785 canonical bytes, SHA-256 digests and Ed25519 keys (docs/design.md §6)."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from missionweave.protocol import (
    CanonicalizationError,
    SignatureError,
    SigningKey,
    b64u_decode,
    b64u_encode,
    canonical_bytes,
    digest,
    sha256_hex,
    verify,
)

# RFC 8032 section 7.1, TEST 1 (empty message)
RFC8032_SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
RFC8032_PUBLIC = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
RFC8032_SIGNATURE = (
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555"
    "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


# --------------------------------------------------------------------------- RFC 8785


def test_keys_sorted_no_whitespace() -> None:
    assert canonical_bytes({"b": 1, "a": [True, None, "x"]}) == b'{"a":[true,null,"x"],"b":1}'
    assert canonical_bytes({"z": {"y": 2, "x": 1}, "a": []}) == b'{"a":[],"z":{"x":1,"y":2}}'
    assert canonical_bytes([]) == b"[]" and canonical_bytes({}) == b"{}"


def test_scalars() -> None:
    assert canonical_bytes(None) == b"null"
    assert canonical_bytes(True) == b"true"
    assert canonical_bytes(0) == b"0"
    assert canonical_bytes(-17) == b"-17"
    assert canonical_bytes(2**53 - 1) == b"9007199254740991"
    assert canonical_bytes((1, "a")) == b'[1,"a"]'


def test_rfc8785_string_vector() -> None:
    # RFC 8785 section 3.2.2 (its "numbers" member is left out: signed bodies hold no floats)
    value = {
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    expected = '{"literals":[null,true,false],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    assert canonical_bytes(value) == expected.encode("utf-8")


def test_rfc8785_sorts_by_utf16_code_units() -> None:
    # RFC 8785 section 3.2.3: the emoji (surrogates D83D DE00) sorts before U+FB33
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    out = canonical_bytes(value).decode("utf-8")
    keys = ["\\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    positions = [out.index(f'"{k}":') for k in keys]
    assert positions == sorted(positions)


def test_unicode_is_utf8_not_escaped() -> None:
    assert canonical_bytes({"é": "日本"}) == '{"é":"日本"}'.encode()
    assert canonical_bytes("\x1f") == b'"\\u001f"'


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        float("nan"),
        {"a": 0.5},
        [1, [2, [3.0]]],
        {1: "int key"},
        {"a": {b"b": 1}},
        b"bytes",
        {1, 2},
        object(),
        2**53,
        -(2**53),
        10**30,
    ],
)
def test_refuses_non_json_values(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_bytes(value)


def test_digest_is_sha256_of_canonical_bytes() -> None:
    value = {"b": 1, "a": [True, None, "x"]}
    expected = hashlib.sha256(b'{"a":[true,null,"x"],"b":1}').hexdigest()
    assert digest(value) == expected == sha256_hex(canonical_bytes(value))
    assert digest({"a": [True, None, "x"], "b": 1}) == expected  # key order is irrelevant
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_canonical_bytes_are_a_fixed_point(value: Any) -> None:
    data = canonical_bytes(value)
    assert canonical_bytes(json.loads(data)) == data
    assert json.loads(data) == value


# --------------------------------------------------------------------------- Ed25519


def test_rfc8032_vector() -> None:
    key = SigningKey.from_private_bytes(bytes.fromhex(RFC8032_SEED))
    assert b64u_decode(key.public_key).hex() == RFC8032_PUBLIC
    sig = key.sign(b"")
    assert b64u_decode(sig).hex() == RFC8032_SIGNATURE
    assert len(sig) == 86 and "=" not in sig
    assert verify(key.public_key, sig, b"")


def test_sign_verify_round_trip() -> None:
    key = SigningKey.generate()
    data = canonical_bytes({"type": "work.start", "epoch": 3})
    sig = key.sign(data)
    assert verify(key.public_key, sig, data)
    assert not verify(SigningKey.generate().public_key, sig, data)


def test_a_flipped_byte_fails_verification() -> None:
    key = SigningKey.generate()
    data = b"the quick brown fox"
    sig = key.sign(data)
    for i in range(len(data)):
        tampered = bytearray(data)
        tampered[i] ^= 0x01
        assert not verify(key.public_key, sig, bytes(tampered))
    raw = b64u_decode(sig)
    for i in (0, 31, 32, 63):
        bad = bytearray(raw)
        bad[i] ^= 0x80
        assert not verify(key.public_key, b64u_encode(bytes(bad)), data)


@pytest.mark.parametrize(
    "public_key", ["", "not base64 !!", b64u_encode(b"short"), b64u_encode(b"\xff" * 33)]
)
def test_verify_never_raises_on_a_malformed_key(public_key: str) -> None:
    sig = SigningKey.generate().sign(b"d")
    assert verify(public_key, sig, b"d") is False


@pytest.mark.parametrize("signature", ["", "@@@", "AAAA", b64u_encode(b"\x00" * 64)])
def test_verify_never_raises_on_a_malformed_signature(signature: str) -> None:
    key = SigningKey.generate()
    assert verify(key.public_key, signature, b"d") is False
    assert verify(key.public_key, key.sign(b"d")[:-2], b"d") is False


def test_b64u_round_trip() -> None:
    for n in range(0, 40):
        data = bytes(range(n))
        text = b64u_encode(data)
        assert "=" not in text and "+" not in text and "/" not in text
        assert b64u_decode(text) == data


def test_seed_must_be_32_bytes() -> None:
    with pytest.raises(SignatureError):
        SigningKey.from_private_bytes(b"\x00" * 31)


def test_key_file_round_trip_with_mode_0600(tmp_path: Path) -> None:
    key = SigningKey.generate()
    path = tmp_path / "keys" / "agent.pem"
    key.to_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    again = SigningKey.from_file(path)
    assert again.public_key == key.public_key
    assert verify(key.public_key, again.sign(b"m"), b"m")
    assert again.sign(b"m") == key.sign(b"m")  # Ed25519 signatures are deterministic


def test_key_file_rejects_other_content(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    with pytest.raises(SignatureError):
        SigningKey.from_file(bad)
    with pytest.raises(FileNotFoundError):
        SigningKey.from_file(tmp_path / "missing.pem")
