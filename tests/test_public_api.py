"""Pin the public surface: names may be added deliberately, never lost by accident."""

from __future__ import annotations

import missionweave.authority as authority
import missionweave.protocol as protocol
import missionweave.telemetry as telemetry

PROTOCOL = {
    "INPUT_ARTIFACT_KEY", "INPUT_MEDIA_TYPE", "MAX_CARRIED_INPUT_BYTES", "MAX_INLINE_INPUT_BYTES",
    "input_bytes", "input_json", "input_problem", "input_reference", "referenced_input",
    "GENESIS_HASH", "HASH_PATTERN", "is_hash", "load_public_key",
    "TERMINAL_STATES", "TRANSITIONS", "UNFINISHED_STATES", "WORK_ACTIONS",
    "AcceptanceCriterion", "Actor", "AgentCard", "Budget", "CanonicalizationError", "Command",
    "DeclineReason", "Deliverable", "DependencyStrategy", "Event", "Evidence", "GraphError",
    "MissionWeaveError", "Money", "ProgressReport", "ProtocolError", "RejectedError",
    "Rejection", "ResourceUsage", "RetryPolicy", "RiskClass", "Role", "SelectionBasis",
    "SignatureError", "SigningKey", "TimeoutPolicy", "Transition", "Urgency", "WorkContract",
    "WorkGraph", "WorkItemFacts", "WorkItemState", "attempt_key", "b64u_decode", "b64u_encode",
    "canonical_bytes", "check_event", "check_transition", "dependencies_satisfied", "digest",
    "idempotency_key", "RetryBound", "exhausted_retry_bound", "goes_by_reference",
    "is_material_revision", "new_id", "reduce_events", "reduce_work_item", "seal_event",
    "WORK_ITEM_EVENT_TYPES",  # the Event types the reducer knows (issue 27)
    "sha256_hex", "sign_command",
    "state_counts", "transition_for", "verify", "verify_command",
    # artifacts (MW-13.1) and context packages (MW-13.3)
    "ArtifactManifest", "Classification", "SignedManifest", "sign_manifest", "verify_manifest",
    "ContextPackage", "EventRange", "SignedContextPackage", "sign_context_package",
    "verify_chain", "verify_context_package",
    # the one identifier rule and the JSON integer bound (section 16)
    "MAX_ID_CHARS", "MAX_LABEL_CHARS", "MAX_SAFE_INT", "check_identifier", "identifier_problem",
    "label_problem", "new_identifier_problem",
    # idempotency keys' versions (MW-16-f)
    "CURRENT_KEY_VERSION", "KEY_VERSIONS",
    # the one capability matcher (MW-10.3-d/f)
    "best_match", "capability_matches", "parse_capability", "satisfies",
    # bounded offline execution (MW-11.5-f/i)
    "BOUNDED_OFFLINE_EXECUTION", "BUFFERABLE_COMMANDS", "KNOWN_EXTENSIONS",
    "RESOURCE_USAGE_RECORDED", "OfflineBinding",
    # the vocabulary (issue 27)
    "CommandType", "EventType", "RejectionCode", "REJECTION_DOCS", "RejectionDoc",
    "rejection_table",
}  # fmt: skip

AUTHORITY = {
    "Authority", "AuthorityConfig", "AuthorityError", "ChainError", "CursorTooOldError",
    "SubmitResult", "UnknownGroupError", "VerifyReport", "load_snapshot", "now_ms",
    "verify_log", "verify_snapshot", "MembershipRequired", "check_context_use", "events_for_member",
    # capability tokens (MW-11.3-d)
    "CapabilityToken", "TokenCheck", "verify_capability_token",
    "Store", "StoreVersionError", "open_store", "open_reader",
}  # fmt: skip

TELEMETRY = {
    "TRACER_NAME", "TelemetryError", "reset_tracing", "setup_tracing", "temporal_interceptors",
    "tracer", "worker_interceptors",
}  # fmt: skip


def test_protocol_surface() -> None:
    assert set(protocol.__all__) == PROTOCOL
    assert all(hasattr(protocol, n) for n in protocol.__all__)


def test_authority_surface() -> None:
    assert set(authority.__all__) == AUTHORITY
    assert all(hasattr(authority, n) for n in authority.__all__)


def test_telemetry_surface() -> None:
    assert set(telemetry.__all__) == TELEMETRY
    assert all(hasattr(telemetry, n) for n in telemetry.__all__)


def test_protocol_does_no_io_imports() -> None:
    """The protocol package must stay importable in the Temporal workflow sandbox: none of its
    modules imports I/O, network or Temporal machinery."""
    import ast
    from pathlib import Path

    banned = {"sqlite3", "httpx", "socket", "temporalio", "subprocess", "websockets"}
    root = Path(protocol.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in banned, f"{path.name} imports {name}"
