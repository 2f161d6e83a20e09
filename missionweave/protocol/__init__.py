"""Pure protocol models and rules: no I/O, safe inside the Temporal workflow sandbox.

Contracts (MW-10.1), the WorkItem state table (MW-10.2), the DAG (MW-10.4), Command/Event
envelopes with RFC 8785 canonical bytes, Ed25519 signatures and the SHA-256 hash chain, and
idempotency keys (MW-16-f).
"""

from ._canonical import canonical_bytes, digest, sha256_hex
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
from ._dag import WorkGraph
from ._errors import (
    CanonicalizationError,
    GraphError,
    MissionWeaveError,
    ProtocolError,
    RejectedError,
    Rejection,
    SignatureError,
)
from ._ids import attempt_key, idempotency_key
from ._messages import (
    GENESIS_HASH,
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

__all__ = [
    "GENESIS_HASH",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "UNFINISHED_STATES",
    "WORK_ACTIONS",
    "AcceptanceCriterion",
    "Actor",
    "AgentCard",
    "Budget",
    "CanonicalizationError",
    "Command",
    "DeclineReason",
    "Deliverable",
    "DependencyStrategy",
    "Event",
    "Evidence",
    "GraphError",
    "MissionWeaveError",
    "Money",
    "ProgressReport",
    "ProtocolError",
    "RejectedError",
    "Rejection",
    "ResourceUsage",
    "RetryPolicy",
    "RiskClass",
    "Role",
    "SelectionBasis",
    "SignatureError",
    "SigningKey",
    "TimeoutPolicy",
    "Transition",
    "Urgency",
    "WorkContract",
    "WorkGraph",
    "WorkItemState",
    "attempt_key",
    "b64u_decode",
    "b64u_encode",
    "canonical_bytes",
    "check_event",
    "check_transition",
    "digest",
    "idempotency_key",
    "is_material_revision",
    "new_id",
    "seal_event",
    "sha256_hex",
    "sign_command",
    "transition_for",
    "verify",
    "verify_command",
]
