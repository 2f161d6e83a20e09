"""The Group Authority: the signed, hash-chained event log that is the source of truth.

Four parts, each importable without the ones it does not need:

* ``missionweave.authority.core`` — :class:`Authority` validates signed Commands and appends
  Events atomically through a :class:`Store` (a SQLite file by default, PostgreSQL at a
  ``postgresql://`` URL, shared by several replicas); :func:`verify_log` checks a stored chain
  offline.
* ``missionweave.authority.http`` — the HTTP/WebSocket front (``create_app``, ``serve``).
* ``missionweave.authority.client`` — ``AuthorityClient`` and the event ``Subscriber``.
* ``missionweave.authority.wire`` — what server and clients share (:class:`SubmitResult`,
  :func:`now_ms`, the errors, snapshot checks).

The names below are loaded on first use (PEP 562), so ``import missionweave.authority.client``
loads no server code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .core import (
        Authority,
        AuthorityConfig,
        Store,
        StoreVersionError,
        VerifyReport,
        check_context_use,
        events_for_member,
        load_snapshot,
        open_reader,
        open_store,
        verify_capability_token,
        verify_log,
    )
    from .wire import (
        AuthorityError,
        CapabilityToken,
        ChainError,
        CursorTooOldError,
        MembershipRequired,
        SubmitResult,
        TokenCheck,
        UnknownGroupError,
        now_ms,
        verify_snapshot,
    )

_HOME = {
    "Authority": "core", "AuthorityConfig": "core", "VerifyReport": "core",
    "load_snapshot": "core", "verify_log": "core",
    "AuthorityError": "wire", "ChainError": "wire", "CursorTooOldError": "wire",
    "SubmitResult": "wire", "UnknownGroupError": "wire", "now_ms": "wire",
    "verify_snapshot": "wire", "MembershipRequired": "wire",
    "check_context_use": "core", "events_for_member": "core",
    "CapabilityToken": "wire", "TokenCheck": "wire", "verify_capability_token": "core",
    "Store": "core", "StoreVersionError": "core", "open_reader": "core", "open_store": "core",
}  # fmt: skip


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())


__all__ = [
    "Authority",
    "AuthorityConfig",
    "AuthorityError",
    "CapabilityToken",
    "ChainError",
    "CursorTooOldError",
    "MembershipRequired",
    "Store",
    "StoreVersionError",
    "SubmitResult",
    "TokenCheck",
    "UnknownGroupError",
    "VerifyReport",
    "check_context_use",
    "events_for_member",
    "load_snapshot",
    "now_ms",
    "open_reader",
    "open_store",
    "verify_capability_token",
    "verify_log",
    "verify_snapshot",
]
