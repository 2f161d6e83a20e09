"""Idempotency keys for external tool operations (MW-16-f, MW-11.4-e).

Keys are pure functions of their inputs, so any process — a retried activity, a replacement
worker, a replaying workflow — derives the same key for the same logical operation, and a
different key as soon as the ownership epoch changes.
"""

from __future__ import annotations

from ._canonical import canonical_bytes, sha256_hex

_KEY_PREFIX = "mwk1_"
_ATTEMPT_PREFIX = "mwa1_"


def idempotency_key(
    mission_id: str, work_item_id: str, ownership_epoch: int, operation_id: str
) -> str:
    """The stable idempotency key of one logical external operation.

    Args:
        mission_id: the Mission id.
        work_item_id: the WorkItem id.
        ownership_epoch: the ownership epoch under which the operation runs (≥ 1).
        operation_id: the handler's name for the logical operation, e.g. ``"upload-report"``.

    Returns:
        ``"mwk1_"`` followed by 64 hex characters (SHA-256 over the canonical tuple). The tuple is
        canonicalized as a JSON array, so no choice of ids can make two tuples collide by
        concatenation.

    Raises:
        ValueError: an id is empty or the epoch is negative.

    Implements MW-16-f.
    """
    if not (mission_id and work_item_id and operation_id):
        raise ValueError("mission_id, work_item_id and operation_id must be non-empty")
    if ownership_epoch < 0:
        raise ValueError("ownership_epoch must be >= 0")
    data = canonical_bytes(["mw-idem-v1", mission_id, work_item_id, ownership_epoch, operation_id])
    return _KEY_PREFIX + sha256_hex(data)


def attempt_key(key: str, attempt: int) -> str:
    """A deterministic key for retry ``attempt`` (≥ 1) of the operation keyed ``key``.

    Use it only where an external API must see a new key per attempt; otherwise reuse ``key``.

    Raises:
        ValueError: ``key`` is not an idempotency key or ``attempt`` < 1.

    Implements MW-11.4-e.
    """
    if not key.startswith(_KEY_PREFIX):
        raise ValueError("attempt_key takes a key made by idempotency_key()")
    if attempt < 1:
        raise ValueError("attempt numbers start at 1")
    return _ATTEMPT_PREFIX + sha256_hex(canonical_bytes(["mw-attempt-v1", key, attempt]))
