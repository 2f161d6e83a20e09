"""SQLite schema and connection settings of the Authority store.

WAL mode, ``synchronous=FULL`` (an acknowledged append survives power loss) and ``BEGIN
IMMEDIATE`` for writes, so two Authority processes on one file serialize their appends instead of
failing on upgrade deadlocks.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 1

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    group_id TEXT PRIMARY KEY,
    created_at_ms INTEGER NOT NULL,
    head_seq INTEGER NOT NULL,
    head_hash TEXT NOT NULL,
    archived_through INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS members (
    group_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    public_key TEXT NOT NULL,
    roles TEXT NOT NULL,
    membership_epoch INTEGER NOT NULL,
    active INTEGER NOT NULL,
    PRIMARY KEY (group_id, agent_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agents (
    agent_id TEXT PRIMARY KEY,
    public_key TEXT NOT NULL,
    session_epoch INTEGER NOT NULL DEFAULT 0,
    card TEXT,
    card_version INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events (
    group_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    work_item_id TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS archived_events (
    group_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    work_item_id TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commands (
    command_id TEXT PRIMARY KEY,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    refs TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS missions (
    group_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    state TEXT NOT NULL,
    parent TEXT,
    PRIMARY KEY (group_id, mission_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS work_items (
    group_id TEXT NOT NULL,
    work_item_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    state TEXT NOT NULL,
    revision INTEGER NOT NULL,
    contract TEXT NOT NULL,
    dependencies TEXT NOT NULL,
    owner TEXT,
    ownership_epoch INTEGER NOT NULL DEFAULT 0,
    start_deadline_ms INTEGER,
    lease_id TEXT,
    approved INTEGER NOT NULL DEFAULT 0,
    checkpoint TEXT,
    usage TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    child_mission_id TEXT,
    PRIMARY KEY (group_id, work_item_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS offers (
    offer_id TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    work_item_id TEXT NOT NULL,
    candidates TEXT NOT NULL,
    declined TEXT NOT NULL,
    selection_basis TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    status TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS offers_item ON offers (group_id, work_item_id, status);
CREATE TABLE IF NOT EXISTS leases (
    lease_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    group_id TEXT NOT NULL,
    work_item_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    session_epoch INTEGER NOT NULL,
    ownership_epoch INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    renewals TEXT NOT NULL,
    status TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS leases_agent ON leases (agent_id, status);
CREATE TABLE IF NOT EXISTS capability_tokens (
    token_id TEXT PRIMARY KEY,
    lease_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cursors (
    group_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, agent_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    group_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts (
    group_id TEXT NOT NULL,
    artifact_hash TEXT NOT NULL,
    manifest_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    work_item_id TEXT NOT NULL,
    producer TEXT NOT NULL,
    classification TEXT NOT NULL,
    published_at_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_hash, manifest_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS promoted_artifacts (
    group_id TEXT NOT NULL,
    artifact_hash TEXT NOT NULL,
    classification TEXT NOT NULL,
    promoted_by TEXT NOT NULL,
    promoted_at_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS promoted_artifacts_hash ON promoted_artifacts (artifact_hash);
CREATE TABLE IF NOT EXISTS result_approvals (
    group_id TEXT NOT NULL,
    work_item_id TEXT NOT NULL,
    ownership_epoch INTEGER NOT NULL,
    decision TEXT NOT NULL,
    approver TEXT NOT NULL,
    review_digest TEXT NOT NULL,
    decided_at_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, work_item_id, ownership_epoch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS context_packages (
    group_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    version INTEGER NOT NULL,
    package_hash TEXT NOT NULL,
    generator TEXT NOT NULL,
    data TEXT NOT NULL,
    recorded_at_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, mission_id, scope, version)
) WITHOUT ROWID;
"""


def connect(path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) an Authority database at ``path``.

    The connection is in autocommit mode (``isolation_level=None``); writers open their own
    ``BEGIN IMMEDIATE`` transactions.

    Raises:
        sqlite3.Error: the file cannot be opened or is not a database.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(DDL)
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
    )
    return conn
