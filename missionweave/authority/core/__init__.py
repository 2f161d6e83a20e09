"""The Authority's core: validate signed Commands and append signed, hash-chained Events.

:class:`Authority` (the engine, its command handlers and its storage), :class:`AuthorityConfig`,
the offline log check (:func:`verify_log`, :class:`VerifyReport`) and stored snapshots
(:func:`load_snapshot`), who may put what into a Mission's context (:func:`check_context_use`,
:func:`events_for_member`, MW-13.3-b/d) and who may read or write an Artifact's bytes
(:func:`artifact_read_refusal`, :func:`artifact_write_refusal`, :func:`upload_refusal`), and
the bounds no member can exhaust: each member's Command budget (:class:`CommandLimits`) and the
disk reserve (:func:`reserve_status`, for a readiness probe). It imports no HTTP server and
no client: the front is
``missionweave.authority.http``, the client ``missionweave.authority.client``, and what both
sides share ``missionweave.authority.wire``.
"""

from ._artifact_access import (
    artifact_read_refusal,
    artifact_write_refusal,
    promoting_groups,
    read_scope,
    unreadable,
    upload_refusal,
)
from ._bounds import KEEPS_OR_ENDS_WORK
from ._context_access import check_context_use, events_for_member
from ._engine import (
    DEFAULT_MAX_SESSION_GROUPS,
    DEFAULT_MAX_UPLOAD_BYTES,
    Authority,
    AuthorityConfig,
)
from ._lease_clock import LeaseClock, freshness_clock
from ._log_audit import VerifyReport, verify_log
from ._outages import credit_on_start, credit_quiet, keep_alive, note_queued
from ._possession import present_for, record_upload
from ._rates import CommandLimits
from ._readiness import NotReady, Probe, Readiness, Unready, disk_probe
from ._reserve import DEFAULT_RESERVE_BYTES, DiskReserve, reserve_status
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
    "DEFAULT_MAX_SESSION_GROUPS",
    "DEFAULT_MAX_UPLOAD_BYTES",
    "DEFAULT_RESERVE_BYTES",
    "KEEPS_OR_ENDS_WORK",
    "Authority",
    "AuthorityConfig",
    "CommandLimits",
    "DiskReserve",
    "LeaseClock",
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
    "disk_probe",
    "events_for_member",
    "freshness_clock",
    "is_url",
    "keep_alive",
    "load_snapshot",
    "note_queued",
    "open_reader",
    "open_store",
    "present_for",
    "promoting_groups",
    "read_scope",
    "record_upload",
    "redact",
    "reserve_status",
    "unreadable",
    "upload_refusal",
    "verify_capability_token",
    "verify_log",
    "warm_up_verifier",
]
