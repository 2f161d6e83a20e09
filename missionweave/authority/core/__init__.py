"""The Authority's core: validate signed Commands and append signed, hash-chained Events.

:class:`Authority` (the engine, its command handlers and its storage), :class:`AuthorityConfig`,
the offline log check (:func:`verify_log`, :class:`VerifyReport`) and stored snapshots
(:func:`load_snapshot`), who may put what into a Mission's context (:func:`check_context_use`,
:func:`events_for_member`, MW-13.3-b/d) and who may read or write an Artifact's bytes
(:func:`artifact_read_refusal`, :func:`artifact_write_refusal`). It imports no HTTP server and
no client: the front is
``missionweave.authority.http``, the client ``missionweave.authority.client``, and what both
sides share ``missionweave.authority.wire``.
"""

from ._artifact_access import artifact_read_refusal, artifact_write_refusal, promoting_groups
from ._context_access import check_context_use, events_for_member
from ._engine import Authority, AuthorityConfig
from ._log_audit import VerifyReport, verify_log
from ._outages import credit_on_start, credit_quiet, keep_alive
from ._readiness import NotReady, Probe, Readiness, Unready
from ._signature_process import warm_up as warm_up_verifier
from ._snapshots import load_snapshot
from ._store import (
    Store,
    StoreForkedError,
    StoreUnavailableError,
    StoreVersionError,
    is_url,
    open_reader,
    open_store,
    redact,
)
from ._tokens import verify_capability_token

__all__ = [
    "Authority",
    "AuthorityConfig",
    "NotReady",
    "Probe",
    "Readiness",
    "Store",
    "StoreForkedError",
    "StoreUnavailableError",
    "StoreVersionError",
    "Unready",
    "VerifyReport",
    "artifact_read_refusal",
    "artifact_write_refusal",
    "check_context_use",
    "credit_on_start",
    "credit_quiet",
    "events_for_member",
    "is_url",
    "keep_alive",
    "load_snapshot",
    "open_reader",
    "open_store",
    "promoting_groups",
    "redact",
    "verify_capability_token",
    "verify_log",
    "warm_up_verifier",
]
