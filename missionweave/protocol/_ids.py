"""Idempotency keys for external tool operations (MW-16-f, MW-11.4-e).

Keys are pure functions of their inputs, so any process — a retried activity, a replacement
worker, a replaying workflow — derives the same key for the same logical operation, and a
different key as soon as the ownership epoch changes.

Two key versions exist (docs/spec/READINGS.md, "MW-16-f — the Group in the key"):

* ``mwk1_`` over ``(Mission, WorkItem, ownership epoch, operation)``, the spec's tuple. Mission
  and WorkItem ids are unique only within their Group, so two Groups can derive one key.
* ``mwk2_`` over ``(Group, Mission, WorkItem, ownership epoch, operation)``: no two Groups
  derive one key.

The version is fixed for a whole ownership epoch, when it begins (the Mission workflow chooses
it for the offer, the acceptance records it in ``work.offer_accepted``): an execution whose epoch
began under ``mwk1_`` keeps ``mwk1_`` on every retry and resume, so an upgrade repeats no
external effect.
"""

from __future__ import annotations

from typing import Final

from ._canonical import canonical_bytes, sha256_hex

#: The key version a new ownership epoch begins with.
CURRENT_KEY_VERSION: Final = 2
#: Every key version, by number: its prefix and its domain-separation tag.
_VERSIONS: Final = {1: ("mwk1_", "mw-idem-v1"), 2: ("mwk2_", "mw-idem-v2")}
#: The key versions an acceptance may record.
KEY_VERSIONS: Final = frozenset(_VERSIONS)
_ATTEMPT_PREFIX = "mwa1_"


def idempotency_key(
    mission_id: str,
    work_item_id: str,
    ownership_epoch: int,
    operation_id: str,
    *,
    key_version: int = 1,
    group_id: str | None = None,
) -> str:
    """The stable idempotency key of one logical external operation.

    Args:
        mission_id: the Mission id.
        work_item_id: the WorkItem id.
        ownership_epoch: the ownership epoch under which the operation runs (≥ 1).
        operation_id: the handler's name for the logical operation, e.g. ``"upload-report"``.
        key_version: the ownership epoch's key version (``work.offer_accepted``'s
            ``key_version``; 1 when it names none). 1 leaves the Group out; 2 folds it in.
        group_id: the Group whose log records the WorkItem; required by version 2, not part of
            a version 1 key.

    Returns:
        ``"mwk1_"`` or ``"mwk2_"`` followed by 64 hex characters: SHA-256 over the canonical
        JSON array ``["mw-idem-v1", mission, work item, epoch, operation]`` or
        ``["mw-idem-v2", group, mission, work item, epoch, operation]``, so no choice of ids can
        make two tuples collide by concatenation, and no two versions share a key.

    Raises:
        ValueError: an id is empty, the epoch is negative, the version is unknown, or version 2
            has no ``group_id``.

    Implements MW-16-f.
    """
    if not (mission_id and work_item_id and operation_id):
        raise ValueError("mission_id, work_item_id and operation_id must be non-empty")
    if ownership_epoch < 0:
        raise ValueError("ownership_epoch must be >= 0")
    if key_version not in _VERSIONS:
        raise ValueError(f"unknown key version {key_version!r} (known: {sorted(_VERSIONS)})")
    prefix, tag = _VERSIONS[key_version]
    if key_version == 1:
        return prefix + sha256_hex(
            canonical_bytes([tag, mission_id, work_item_id, ownership_epoch, operation_id])
        )
    if not group_id:
        raise ValueError("key version 2 folds in the Group: group_id must be non-empty")
    data = canonical_bytes([tag, group_id, mission_id, work_item_id, ownership_epoch, operation_id])
    return prefix + sha256_hex(data)


def attempt_key(key: str, attempt: int) -> str:
    """A deterministic key for retry ``attempt`` (≥ 1) of the operation keyed ``key``.

    Use it only where an external API must see a new key per attempt; otherwise reuse ``key``.

    Raises:
        ValueError: ``key`` is not an idempotency key or ``attempt`` < 1.

    Implements MW-11.4-e.
    """
    if not key.startswith(tuple(prefix for prefix, _ in _VERSIONS.values())):
        raise ValueError("attempt_key takes a key made by idempotency_key()")
    if attempt < 1:
        raise ValueError("attempt numbers start at 1")
    return _ATTEMPT_PREFIX + sha256_hex(canonical_bytes(["mw-attempt-v1", key, attempt]))
