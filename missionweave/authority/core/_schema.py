"""SQLite schema and connection settings of the Authority store.

WAL mode, ``synchronous=FULL`` (an acknowledged append survives power loss) and ``BEGIN
IMMEDIATE`` for writes, so two Authority processes on one file serialize their appends instead of
failing on upgrade deadlocks.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: The schema this code writes. 2: Command ids scoped to ``(group_id, actor, command_id)``;
#: 3: a capability token's ``status`` (``active`` or ``superseded``, MW-11.3-d).
SCHEMA_VERSION = 3

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
    group_id TEXT NOT NULL,
    actor TEXT NOT NULL,
    command_id TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    refs TEXT NOT NULL,
    PRIMARY KEY (group_id, actor, command_id)
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
    expires_at_ms INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'active'
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS capability_tokens_lease ON capability_tokens (lease_id, status);
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
CREATE TABLE IF NOT EXISTS mission_usage (
    group_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    budget TEXT,
    usage TEXT NOT NULL,
    PRIMARY KEY (group_id, mission_id)
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
        sqlite3.DatabaseError: the file has a newer schema than this code reads.
    """
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("BEGIN IMMEDIATE")
    try:
        _migrate(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring an older one to :data:`SCHEMA_VERSION`, in the caller's
    transaction (committed here).

    Raises:
        sqlite3.DatabaseError: the file was written by a newer MissionWeave (its
            ``schema_version`` is above this code's).
    """
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    row = (
        conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if has_meta
        else None
    )
    version = int(row[0]) if row else None
    if version is not None and version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"the database has schema version {version}; this MissionWeave reads up to "
            f"{SCHEMA_VERSION}: upgrade MissionWeave"
        )
    if version == 1:
        _v1_to_v2(conn)
    if version is not None and version < 3:
        _v2_to_v3(conn)
    for statement in DDL.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
        (str(SCHEMA_VERSION),),
    )
    conn.execute("COMMIT")


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Scope each remembered Command id to its Group and actor, read from the first Event
    it wrote (every remembered Command wrote one; its ``command`` carries both)."""
    conn.execute("ALTER TABLE commands RENAME TO commands_v1")
    conn.execute(
        """CREATE TABLE commands (
            group_id TEXT NOT NULL, actor TEXT NOT NULL, command_id TEXT NOT NULL,
            signature TEXT NOT NULL, status TEXT NOT NULL, refs TEXT NOT NULL,
            PRIMARY KEY (group_id, actor, command_id)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """INSERT INTO commands
           SELECT coalesce(json_extract(e.data, '$.command.group_id'), ''),
                  json_extract(e.data, '$.command.actor'), c.command_id, c.signature,
                  c.status, c.refs
           FROM commands_v1 c
           JOIN (SELECT group_id, seq, data FROM events
                 UNION ALL SELECT group_id, seq, data FROM archived_events) e
             ON e.group_id = json_extract(c.refs, '$.events[0][0]')
            AND e.seq = json_extract(c.refs, '$.events[0][1]')"""
    )
    conn.execute("DROP TABLE commands_v1")


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Give each capability token a ``status``; every token issued before is in force."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(capability_tokens)")}
    if columns and "status" not in columns:
        conn.execute(
            "ALTER TABLE capability_tokens ADD COLUMN status TEXT NOT NULL DEFAULT 'active'"
        )
