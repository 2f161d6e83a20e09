"""The Group Authority: the signed, hash-chained event log that is the source of truth.

``Authority`` validates signed Commands and appends Events atomically through a ``Store``
(SQLite file by default, PostgreSQL at a ``postgresql://`` URL, shared by several replicas);
``verify_log`` checks a stored chain offline. The HTTP/WebSocket server and its client live in
``missionweave.authority.server`` and ``missionweave.authority.client``.
"""

from ._engine import Authority, AuthorityConfig, SubmitResult, now_ms
from ._errors import AuthorityError, ChainError, CursorTooOldError, UnknownGroupError
from ._snapshots import load_snapshot, verify_snapshot
from ._store import Store, StoreVersionError, open_reader, open_store
from ._verify import VerifyReport, verify_log

__all__ = [
    "Authority",
    "AuthorityConfig",
    "AuthorityError",
    "ChainError",
    "CursorTooOldError",
    "Store",
    "StoreVersionError",
    "SubmitResult",
    "UnknownGroupError",
    "VerifyReport",
    "load_snapshot",
    "now_ms",
    "open_reader",
    "open_store",
    "verify_log",
    "verify_snapshot",
]
