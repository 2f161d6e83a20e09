"""Signed Commands and the Authority's hash-chained, signed Events (docs/design.md §6)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from missionweave.protocol import (
    GENESIS_HASH,
    Actor,
    CanonicalizationError,
    Command,
    Event,
    EventType,
    RejectionCode,
    SigningKey,
    b64u_decode,
    b64u_encode,
    canonical_bytes,
    check_event,
    seal_event,
    sign_command,
    verify,
    verify_command,
)
from missionweave.protocol._canonical import _plain

_KEY = SigningKey.from_private_bytes(bytes(range(32)))
_AUTHORITY = SigningKey.from_private_bytes(bytes(range(1, 33)))


def _command(**over: Any) -> Command:
    fields: dict[str, Any] = {
        "command_id": "cmd_1",
        "group_id": "g1",
        "type": "work.start",
        "actor": "worker-0",
        "issued_at_ms": 1_800_000_000_000,
        "session_epoch": 2,
        "membership_epoch": 1,
        "body": {"work_item_id": "w1", "ownership_epoch": 1},
    }
    fields.update(over)
    return sign_command(Command(**fields), _KEY)


# A changed value for every signed field of a Command.
_CHANGES: dict[str, Any] = {
    "command_id": "cmd_2",
    "group_id": "g2",
    "type": "work.submit",
    "actor": "worker-1",
    "issued_at_ms": 1_800_000_000_001,
    "session_epoch": 3,
    "membership_epoch": 2,
    "body": {"work_item_id": "w1", "ownership_epoch": 2},
    "extensions": {"urn:example:x": {"k": 1}},
    "critical_extensions": ["urn:example:x"],
}


def test_command_signature_verifies() -> None:
    cmd = _command()
    assert verify_command(cmd, _KEY.public_key)
    assert not verify_command(cmd, _AUTHORITY.public_key)
    assert verify(_KEY.public_key, cmd.signature, cmd.signing_bytes())


def test_every_command_field_is_signed() -> None:
    assert set(_CHANGES) == set(Command.model_fields) - {"signature"}


@pytest.mark.parametrize("field", sorted(_CHANGES))
def test_changing_any_command_field_breaks_the_signature(field: str) -> None:
    cmd = _command()
    tampered = cmd.model_copy(update={field: _CHANGES[field]})
    assert tampered.signature == cmd.signature
    assert not verify_command(tampered, _KEY.public_key)
    assert tampered.body_digest() != cmd.body_digest()


def test_group_id_none_is_distinct_from_absent_value() -> None:
    agent_level = _command(group_id=None)
    assert verify_command(agent_level, _KEY.public_key)
    assert not verify_command(agent_level.model_copy(update={"group_id": ""}), _KEY.public_key)


def test_nested_body_change_breaks_the_signature() -> None:
    cmd = _command(body={"evidence": [{"criterion": "a", "result": "pass"}]})
    tampered = cmd.model_copy(update={"body": {"evidence": [{"criterion": "a", "result": "fail"}]}})
    assert not verify_command(tampered, _KEY.public_key)


def test_unsigned_command_never_verifies() -> None:
    cmd = Command(command_id="c", type="t", actor="a", issued_at_ms=0)
    assert cmd.signature == ""
    assert not verify_command(cmd, _KEY.public_key)


def test_signing_bytes_are_canonical_and_exclude_the_signature() -> None:
    cmd = _command()
    value = cmd.model_dump(mode="json")
    del value["signature"]
    assert cmd.signing_bytes() == canonical_bytes(value)
    assert b"signature" not in cmd.signing_bytes()
    assert cmd.body_digest() == hashlib.sha256(cmd.signing_bytes()).hexdigest()


def test_command_body_refuses_floats() -> None:
    with pytest.raises(ValueError, match=r"float 1\.5 at body\.amount"):
        _command(body={"amount": 1.5})
    actor = Actor("worker-0", _KEY)
    for value in (42.0, float("nan"), float("inf"), -float("inf")):
        with pytest.raises(CanonicalizationError, match="signed bodies hold integers only"):
            actor.command("progress.report", "g1", {"percent": value})
    with pytest.raises(CanonicalizationError, match="lone surrogate"):
        actor.command("progress.report", "g1", {"\ud800": 1})


def test_actor_signs_with_its_epochs() -> None:
    actor = Actor("worker-0", _KEY, session_epoch=4, membership_epochs={"g1": 7})
    cmd = actor.command("work.start", "g1", {"x": 1}, command_id="c1", issued_at_ms=5)
    assert (cmd.session_epoch, cmd.membership_epoch, cmd.issued_at_ms) == (4, 7, 5)
    assert verify_command(cmd, actor.public_key)
    other = actor.command("work.start", "g2", {"x": 1})
    assert other.membership_epoch == 0 and other.command_id != cmd.command_id


# --------------------------------------------------------------------------- Event chain


def _chain(n: int, key: SigningKey = _AUTHORITY) -> list[Event]:
    events: list[Event] = []
    prev = GENESIS_HASH
    for seq in range(1, n + 1):
        ev = seal_event(
            Event(
                group_id="g1",
                seq=seq,
                event_id=f"evt_{seq}",
                type="work.offered",
                command_id=f"cmd_{seq}",
                actor="coordinator",
                work_item_id="w1",
                recorded_at_ms=1_800_000_000_000 + seq,
                body={"n": seq},
                prev_hash=prev,
            ),
            key,
        )
        events.append(ev)
        prev = ev.hash
    return events


def test_sealed_chain_verifies() -> None:
    events = _chain(4)
    prev = GENESIS_HASH
    for ev in events:
        assert check_event(ev, _AUTHORITY.public_key, prev) is None
        assert ev.prev_hash == prev
        assert len(ev.hash) == 64
        prev = ev.hash


def test_event_hash_is_sha256_of_canonical_value_and_signature_covers_raw_hash() -> None:
    ev = _chain(1)[0]
    value = ev.hashed_value()
    assert "hash" not in value and "signature" not in value
    assert {"prev_hash", "seq", "body", "group_id", "type"} <= set(value)
    assert ev.hash == hashlib.sha256(canonical_bytes(value)).hexdigest()
    assert verify(_AUTHORITY.public_key, ev.signature, bytes.fromhex(ev.hash))
    assert len(b64u_decode(ev.signature)) == 64


def test_broken_link_is_detected() -> None:
    a, b, c = _chain(3)
    assert check_event(c, _AUTHORITY.public_key, a.hash) == "broken link"
    assert check_event(a, _AUTHORITY.public_key, "f" * 64) == "broken link"
    # a window starting at a snapshot skips the link check only
    assert check_event(b, _AUTHORITY.public_key, None) is None


def test_event_relinked_to_another_predecessor_is_detected() -> None:
    a, _, c = _chain(3)
    relinked = c.model_copy(update={"prev_hash": a.hash})
    assert check_event(relinked, _AUTHORITY.public_key, a.hash) == "hash mismatch"


_EVENT_CHANGES: dict[str, Any] = {
    "group_id": "g2", "seq": 9, "event_id": "evt_x", "type": "work.cancelled",
    "command_id": "cmd_x", "actor": "intruder", "work_item_id": "w2", "recorded_at_ms": 1,
    "body": {"n": 99}, "prev_hash": "1" * 64,
}  # fmt: skip
# The carried Command is protected too, though not necessarily through the hash.
_CARRIED_CHANGES: dict[str, Any] = {"command": {"forged": True}, "command_signature": "AAAA"}


def test_every_event_field_is_protected() -> None:
    protected = set(_EVENT_CHANGES) | set(_CARRIED_CHANGES)
    assert set(Event.model_fields) - {"hash", "signature"} <= protected


@pytest.mark.parametrize("field", sorted(_EVENT_CHANGES))
def test_hash_mismatch_is_detected(field: str) -> None:
    ev = _chain(2)[1]
    tampered = ev.model_copy(update={field: _EVENT_CHANGES[field]})
    # the link check is skipped so the hash itself is what fails
    assert check_event(tampered, _AUTHORITY.public_key, None) == "hash mismatch"


@pytest.mark.parametrize("field", sorted(f for f in _CARRIED_CHANGES if f in Event.model_fields))
def test_carried_command_change_is_detected(field: str) -> None:
    assert "command" in Event.model_fields
    ev = _chain(2)[1]
    tampered = ev.model_copy(update={field: _CARRIED_CHANGES[field]})
    assert check_event(tampered, _AUTHORITY.public_key, None) is not None


def test_forged_hash_is_detected() -> None:
    ev = _chain(1)[0]
    assert (
        check_event(ev.model_copy(update={"hash": "0" * 64}), _AUTHORITY.public_key, GENESIS_HASH)
        == "hash mismatch"
    )
    assert (
        check_event(ev.model_copy(update={"hash": "zz"}), _AUTHORITY.public_key, GENESIS_HASH)
        == "hash mismatch"
    )


def test_bad_signature_is_detected() -> None:
    ev = _chain(1)[0]
    by_intruder = _chain(1, key=SigningKey.generate())[0]
    assert by_intruder.hash == ev.hash  # same content, same hash: only the signer differs
    assert check_event(by_intruder, _AUTHORITY.public_key, GENESIS_HASH) == "bad signature"
    flipped = bytearray(b64u_decode(ev.signature))
    flipped[10] ^= 1
    forged = ev.model_copy(update={"signature": b64u_encode(bytes(flipped))})
    assert check_event(forged, _AUTHORITY.public_key, GENESIS_HASH) == "bad signature"
    assert (
        check_event(ev.model_copy(update={"signature": ""}), _AUTHORITY.public_key, GENESIS_HASH)
        == "bad signature"
    )


def test_recomputed_hash_without_the_key_is_detected() -> None:
    # an attacker who edits a body and recomputes the hash still lacks the Authority key
    ev = _chain(1)[0]
    edited = ev.model_copy(update={"body": {"n": 1000}})
    edited = edited.model_copy(update={"hash": edited.compute_hash()})
    assert check_event(edited, _AUTHORITY.public_key, GENESIS_HASH) == "bad signature"


_VOCABULARY = st.sampled_from([*EventType, *RejectionCode])  # StrEnum members, as handlers emit
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text(st.characters(exclude_categories=("Cs",))) | _VOCABULARY,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
                      | _VOCABULARY, kids, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(_JSON)
@settings(max_examples=300, deadline=None)
def test_fast_canonical_bytes_equal_the_rfc8785_oracle(value: object) -> None:
    """The hot path's encoder gives the ``rfc8785`` package's bytes for every signable value,
    astral and private-use keys (where UTF-16 and code-point order differ) included."""
    assert canonical_bytes(value) == rfc8785.dumps(value)


def test_vocabulary_members_take_the_fast_path() -> None:
    """An Event's ``type`` is an :class:`EventType` member: the C encoder writes its value, so
    the writer's hot path does not fall back to ``rfc8785`` for it (and the bytes agree)."""
    value = {"type": EventType.WORK_SUBMITTED, RejectionCode.INVALID_BODY: [EventType.WORK_FAILED]}
    assert _plain(value) is True
    assert canonical_bytes(value) == rfc8785.dumps(value)
