"""Command and Event envelopes, their canonical bytes, signatures and the hash chain.

A :class:`Command` is what an actor asks, signed by the actor. An :class:`Event` is what the Group
Authority accepted: it carries the command's id and actor, a contiguous group sequence, the hash of
the previous Event, its own hash and the Authority's signature.

Hashing and signing (docs/design.md §6):

* ``command.signature`` = Ed25519(actor key, canonical(command without ``signature``));
* ``event.hash`` = SHA-256 hex of canonical(event without ``hash``, ``signature`` and the carried
  ``command``) — this includes ``prev_hash``, so the hashes form a chain, and
  ``command_signature``, which pins the carried Command: Ed25519 signatures are deterministic and
  bind their message, so a verifier that checks the carried Command's signature under its actor's
  key (whose key the log itself records in ``member.added``) detects any change to it. The
  Authority therefore never canonicalizes a Command on its writer path, only to verify it;
* ``event.signature`` = Ed25519(authority key, the 32 raw bytes of ``event.hash``).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from ._canonical import canonical_bytes, check_json_value, sha256_hex
from ._crypto import SigningKey, verify
from ._errors import CanonicalizationError
from ._identifiers import check_identifier

#: ``prev_hash`` of a Group's first Event.
GENESIS_HASH = "0" * 64
#: Largest integer a Command or Event carries: what every JSON reader holds exactly (2**53 - 1).
MAX_SAFE_INT = 2**53 - 1

_ENVELOPE = ConfigDict(extra="forbid", frozen=True)


def _empty(value: object) -> bool:
    return not value


class Command(BaseModel):
    """A signed request from an actor to the Group Authority.

    Attributes:
        command_id: unique per actor request; a retry reuses it (idempotency).
        group_id: the Group whose log it targets (``None`` only for agent-level commands such as
            ``session.open``).
        type: the action, e.g. ``work.accept_offer``.
        actor: the agent id that signs.
        issued_at_ms: the actor's clock, epoch milliseconds.
        session_epoch: the actor's current Session Epoch (0 for actors without sessions).
        membership_epoch: the actor's Membership Epoch in ``group_id`` as the actor knows it.
        body: the action's arguments (JSON, no floats).
        extensions: extension URN → its JSON value (e.g. the bounded-offline binding,
            MW-11.5-f); signed like every other field. Omitted from the canonical bytes and
            the wire form when empty, so Commands without extensions sign as before.
        critical_extensions: the URNs in ``extensions`` a receiver must understand: an
            Authority that does not know one rejects the Command (``unsupported_extension``).
        signature: base64url Ed25519 signature; empty until :func:`sign_command`.
    """

    model_config = _ENVELOPE
    command_id: str = Field(min_length=1, max_length=128)
    group_id: str | None = Field(default=None, max_length=128)
    type: str = Field(min_length=1, max_length=64)
    actor: str = Field(min_length=1, max_length=128)
    issued_at_ms: int = Field(ge=0, le=MAX_SAFE_INT, strict=True)
    session_epoch: int = Field(default=0, ge=0, le=MAX_SAFE_INT, strict=True)
    membership_epoch: int = Field(default=0, ge=0, le=MAX_SAFE_INT, strict=True)
    body: dict[str, Any] = Field(default_factory=dict)
    # omitted when empty (``exclude_if``, in pydantic's core: this is the writer's hot path)
    extensions: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude_if=_empty)
    critical_extensions: list[str] = Field(default_factory=list, max_length=16, exclude_if=_empty)
    signature: str = Field(default="", max_length=128)

    @field_validator("extensions")
    @classmethod
    def _signable_extensions(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        try:
            check_json_value(value, "extensions")
        except CanonicalizationError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("command_id", "actor")
    @classmethod
    def _identifier(cls, value: str, info: Any) -> str:
        return check_identifier(value, str(info.field_name))

    @field_validator("body")
    @classmethod
    def _signable(cls, value: dict[str, Any]) -> dict[str, Any]:
        # before model_dump(mode="json") can turn NaN or Infinity into null and sign that
        try:
            check_json_value(value, "body")
        except CanonicalizationError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("group_id")
    @classmethod
    def _group(cls, value: str | None) -> str | None:
        return None if value is None else check_identifier(value, "group_id", path_segment=True)

    def signing_bytes(self) -> bytes:
        """Canonical bytes that the actor signs (every field but ``signature``).

        Computed afresh on every call, never cached: ``body`` is a mutable dict, and a cached
        value would let an in-place change slip past verification.

        Raises:
            CanonicalizationError: the body holds a float or a non-JSON value.
        """
        return canonical_bytes(self.model_dump(mode="json", exclude={"signature"}))

    def body_digest(self) -> str:
        """SHA-256 hex over everything but the signature: what idempotency compares."""
        return sha256_hex(self.signing_bytes())


class Event(BaseModel):
    """An accepted, sequenced, hash-chained and Authority-signed record of a Group log.

    Attributes:
        group_id: the Group.
        seq: contiguous from 1 within the Group.
        event_id: globally unique; recipients deduplicate by it (MW-16-a).
        type: what happened, e.g. ``work.offered``.
        command_id: the Command that caused it (``None`` for Authority-originated Events).
        actor: who caused it (``None`` for the Authority itself).
        work_item_id: the WorkItem it concerns, if any.
        recorded_at_ms: the Authority's clock, epoch milliseconds.
        body: the facts (JSON, no floats).
        command: the whole signed Command, on the first Event a Command produced, so the log
            alone proves who asked for what.
        command_signature: the carried Command's signature (with ``command``); hashed.
        prev_hash: ``hash`` of Event ``seq - 1`` (:data:`GENESIS_HASH` for ``seq`` 1).
        hash: SHA-256 hex of the canonical Event without ``hash`` and ``signature``.
        signature: the Authority's Ed25519 signature over the raw hash bytes.
    """

    model_config = _ENVELOPE
    group_id: str
    seq: int = Field(ge=1)
    event_id: str
    type: str
    command_id: str | None = None
    actor: str | None = None
    work_item_id: str | None = None
    recorded_at_ms: int = Field(ge=0)
    body: dict[str, Any] = Field(default_factory=dict)
    command: dict[str, Any] | None = None
    command_signature: str | None = None
    prev_hash: str
    hash: str = ""
    signature: str = ""

    def hashed_value(self) -> dict[str, Any]:
        """The JSON value the hash covers."""
        return self.model_dump(mode="json", exclude={"hash", "signature", "command"})

    def compute_hash(self) -> str:
        """SHA-256 hex over :meth:`hashed_value`."""
        return sha256_hex(canonical_bytes(self.hashed_value()))


def new_id(prefix: str) -> str:
    """A fresh random id such as ``cmd_3f2a…``: ``prefix``, ``_`` and 128 random bits as 32
    lowercase hex characters, as ``uuid4().hex`` without its cost (the writer makes one per
    Event). Never call inside workflow code."""
    return f"{prefix}_{os.urandom(16).hex()}"


def sign_command(command: Command, key: SigningKey) -> Command:
    """Return ``command`` with its ``signature`` set by ``key``."""
    return command.model_copy(update={"signature": key.sign(command.signing_bytes())})


def verify_command(command: Command, public_key: str) -> bool:
    """Whether ``command.signature`` verifies under ``public_key`` (base64url)."""
    return bool(command.signature) and verify(
        public_key, command.signature, command.signing_bytes()
    )


def seal_event(event: Event, key: SigningKey) -> Event:
    """Return ``event`` with ``hash`` computed and signed by the Authority ``key``."""
    h = event.compute_hash()
    return event.model_copy(update={"hash": h, "signature": key.sign(bytes.fromhex(h))})


def check_event(
    event: Event,
    authority_public_key: str,
    prev_hash: str | None,
    actor_public_key: str | None = None,
    *,
    signature: bool = True,
) -> str | None:
    """Check one Event of a chain.

    Args:
        event: the Event to check.
        authority_public_key: the Authority's base64url public key.
        prev_hash: the expected ``prev_hash`` (the previous Event's hash), or ``None`` to skip
            the link check (first Event of a window that starts at a snapshot).
        actor_public_key: the key of the Event's actor; when given and the Event carries its
            Command, that Command's signature is verified too (what makes the carried Command
            tamper-evident).
        signature: check the Authority's signature (``False``: the caller checks the
            signature of a later Event of the same linked run, which authenticates this one
            through the hash chain).

    Returns:
        ``None`` when it verifies, else a short reason: ``broken link``, ``command mismatch``
        (the carried Command is not the one the Event names), ``bad command signature``,
        ``hash mismatch`` or ``bad signature``.
    """
    if prev_hash is not None and event.prev_hash != prev_hash:
        return "broken link"
    if event.compute_hash() != event.hash:
        return "hash mismatch"
    try:
        raw = bytes.fromhex(event.hash)
    except ValueError:
        return "hash mismatch"
    if signature and not verify(authority_public_key, event.signature, raw):
        return "bad signature"
    if event.command is not None:
        try:
            carried = Command.model_validate(event.command)
        except ValidationError:
            return "command mismatch"
        if (
            carried.signature != event.command_signature
            or carried.command_id != event.command_id
            or carried.actor != event.actor
        ):
            return "command mismatch"
        if actor_public_key is not None and not verify_command(carried, actor_public_key):
            return "bad command signature"
    elif event.command_signature is not None:
        return "command mismatch"
    return None
