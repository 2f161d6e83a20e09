"""The Group Authority: the signed, hash-chained event log that is the source of truth.

``Authority`` validates signed Commands and appends Events atomically (SQLite store);
``verify_log`` checks a stored chain offline; ``verify_capability_token`` says whether a capability
token is in force (MW-11.3-d). The HTTP/WebSocket server and its client live in
``missionweave.authority.server`` and ``missionweave.authority.client``.
"""

from ._engine import Authority, AuthorityConfig, SubmitResult, now_ms
from ._errors import AuthorityError, ChainError, CursorTooOldError, UnknownGroupError
from ._snapshots import load_snapshot, verify_snapshot
from ._tokens import CapabilityToken, TokenCheck, verify_capability_token
from ._verify import VerifyReport, verify_log

__all__ = [
    "Authority",
    "AuthorityConfig",
    "AuthorityError",
    "CapabilityToken",
    "ChainError",
    "CursorTooOldError",
    "SubmitResult",
    "TokenCheck",
    "UnknownGroupError",
    "VerifyReport",
    "load_snapshot",
    "now_ms",
    "verify_capability_token",
    "verify_log",
    "verify_snapshot",
]
