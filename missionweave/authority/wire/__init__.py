"""What the Authority's server and its clients share: verdicts, errors, time, signed reads,
frames, presence, snapshot checks and trace propagation (protocol section 16).

Light on purpose: no database, no web server. ``missionweave.authority.client`` and the agent
runtime import it without loading the Authority's core or its HTTP front.
"""

from ._agents import AgentInfo, Reliability
from ._artifacts import (
    BLOB_PREFIX,
    GRANT_TTL_MS,
    ArtifactGrant,
    Operation,
    artifact_path,
    upload_path,
)
from ._errors import (
    AuthorityError,
    ChainError,
    CursorTooOldError,
    MembershipRequired,
    UnknownGroupError,
)
from ._frames import FrameError, is_int
from ._presence import (
    PRESENCE_TTL_MS,
    PresenceBoard,
    PresenceInfo,
    check_presence_shape,
    presence_frame,
)
from ._readsig import (
    ACCEPT_SIGNATURE,
    MAX_SKEW_MS,
    ReadRefused,
    ReadVerifier,
    SignedRead,
    SignedReads,
    sign_read,
)
from ._results import SubmitResult, now_ms
from ._snapshots import verify_snapshot
from ._tokens import VERIFY_PATH, CapabilityToken, TokenCheck, TokenVerifyRequest
from ._tracing import inject_trace_headers

__all__ = [
    "ACCEPT_SIGNATURE",
    "BLOB_PREFIX",
    "GRANT_TTL_MS",
    "MAX_SKEW_MS",
    "PRESENCE_TTL_MS",
    "VERIFY_PATH",
    "AgentInfo",
    "ArtifactGrant",
    "AuthorityError",
    "CapabilityToken",
    "ChainError",
    "CursorTooOldError",
    "FrameError",
    "MembershipRequired",
    "Operation",
    "PresenceBoard",
    "PresenceInfo",
    "ReadRefused",
    "ReadVerifier",
    "Reliability",
    "SignedRead",
    "SignedReads",
    "SubmitResult",
    "TokenCheck",
    "TokenVerifyRequest",
    "UnknownGroupError",
    "artifact_path",
    "check_presence_shape",
    "inject_trace_headers",
    "is_int",
    "now_ms",
    "presence_frame",
    "sign_read",
    "upload_path",
    "verify_snapshot",
]
