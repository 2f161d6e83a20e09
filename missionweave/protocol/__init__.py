"""Pure protocol models and rules: no I/O, safe inside the Temporal workflow sandbox.

Contracts (MW-10.1), the WorkItem state table (MW-10.2), the DAG (MW-10.4), Command/Event
envelopes with RFC 8785 canonical bytes, Ed25519 signatures and the SHA-256 hash chain, and
idempotency keys (MW-16-f), signed Artifact manifests (MW-13.1) and Context Packages (MW-13.3).
"""

from ._artifacts import (
    ArtifactManifest,
    Classification,
    SignedManifest,
    sign_manifest,
    verify_manifest,
)
from ._canonical import canonical_bytes, digest, sha256_hex
from ._capabilities import best_match, capability_matches, parse_capability, satisfies
from ._context_package import (
    ContextPackage,
    EventRange,
    SignedContextPackage,
    sign_context_package,
    verify_chain,
    verify_context_package,
)
from ._contract import (
    AcceptanceCriterion,
    Budget,
    Deliverable,
    DependencyStrategy,
    Money,
    ResourceUsage,
    RetryPolicy,
    RiskClass,
    TimeoutPolicy,
    Urgency,
    WorkContract,
    is_material_revision,
)
from ._crypto import SigningKey, b64u_decode, b64u_encode, verify
from ._dag import WorkGraph, dependencies_satisfied
from ._errors import (
    CanonicalizationError,
    GraphError,
    MissionWeaveError,
    ProtocolError,
    RejectedError,
    Rejection,
    SignatureError,
)
from ._identifiers import (
    MAX_ID_CHARS,
    MAX_LABEL_CHARS,
    check_identifier,
    identifier_problem,
    label_problem,
)
from ._ids import attempt_key, idempotency_key
from ._messages import (
    GENESIS_HASH,
    MAX_SAFE_INT,
    Command,
    Event,
    check_event,
    new_id,
    seal_event,
    sign_command,
    verify_command,
)
from ._records import (
    AgentCard,
    DeclineReason,
    Evidence,
    ProgressReport,
    SelectionBasis,
)
from ._retry import RetryBound, exhausted_retry_bound
from ._signer import Actor
from ._states import (
    TERMINAL_STATES,
    TRANSITIONS,
    UNFINISHED_STATES,
    WORK_ACTIONS,
    Role,
    Transition,
    WorkItemState,
    check_transition,
    transition_for,
)
from ._work_item import WorkItemFacts, reduce_events, reduce_work_item

__all__ = [
    "GENESIS_HASH",
    "MAX_ID_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_SAFE_INT",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "UNFINISHED_STATES",
    "WORK_ACTIONS",
    "AcceptanceCriterion",
    "Actor",
    "AgentCard",
    "ArtifactManifest",
    "Budget",
    "CanonicalizationError",
    "Classification",
    "Command",
    "ContextPackage",
    "DeclineReason",
    "Deliverable",
    "DependencyStrategy",
    "Event",
    "EventRange",
    "Evidence",
    "GraphError",
    "MissionWeaveError",
    "Money",
    "ProgressReport",
    "ProtocolError",
    "RejectedError",
    "Rejection",
    "ResourceUsage",
    "RetryBound",
    "RetryPolicy",
    "RiskClass",
    "Role",
    "SelectionBasis",
    "SignatureError",
    "SignedContextPackage",
    "SignedManifest",
    "SigningKey",
    "TimeoutPolicy",
    "Transition",
    "Urgency",
    "WorkContract",
    "WorkGraph",
    "WorkItemFacts",
    "WorkItemState",
    "attempt_key",
    "b64u_decode",
    "b64u_encode",
    "best_match",
    "canonical_bytes",
    "capability_matches",
    "check_event",
    "check_identifier",
    "check_transition",
    "dependencies_satisfied",
    "digest",
    "exhausted_retry_bound",
    "idempotency_key",
    "identifier_problem",
    "is_material_revision",
    "label_problem",
    "new_id",
    "parse_capability",
    "reduce_events",
    "reduce_work_item",
    "satisfies",
    "seal_event",
    "sha256_hex",
    "sign_command",
    "sign_context_package",
    "sign_manifest",
    "transition_for",
    "verify",
    "verify_chain",
    "verify_command",
    "verify_context_package",
    "verify_manifest",
]
