"""Checking a signed snapshot (MW-16-e): the client side of ``authority.core._snapshots``.

``hash`` is SHA-256 over the canonical snapshot body; ``signature`` is the Authority's Ed25519
signature over the raw hash bytes.
"""

from __future__ import annotations

from typing import Any

from ...protocol import digest, verify


def verify_snapshot(snap: dict[str, Any], authority_public_key: str) -> bool:
    """Whether a whole snapshot's hash matches its body and its signature verifies."""
    try:
        body = {k: snap[k] for k in ("group_id", "seq", "head_hash", "taken_at_ms", "state")}
        h = digest(body)
        return h == snap["hash"] and verify(
            authority_public_key, snap["signature"], bytes.fromhex(h)
        )
    except (KeyError, ValueError, TypeError):
        return False
