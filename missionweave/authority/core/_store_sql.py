"""The Authority's SQL: every statement the Authority and its readers run, by name.

Callers never hold SQL; they name a statement (``store.one("work_items.row", gid, wid)``) and
the :class:`~missionweave.authority.core.Store` backend runs it. Statements are written in the
common dialect of SQLite and PostgreSQL with ``?`` placeholders; the PostgreSQL backend
translates placeholders and takes its own text from :data:`POSTGRES_OVERRIDES` where the
dialects differ (``INSERT OR REPLACE``, scalar ``max``, ``json_extract``).
"""

from __future__ import annotations

#: The schema this code writes. 2: Command ids scoped to ``(group_id, actor, command_id)``.
#: 3: an index of Events by type within a Group (the agents read's outcomes); a capability
#: token's ``status`` (``active`` or ``superseded``, MW-11.3-d); each Mission's budget and usage
#: (``mission_usage``, MW-11.5-i).
SCHEMA_VERSION = 3

#: The online window and the archive hold Events alike.
_EVENT_TABLE = """CREATE TABLE IF NOT EXISTS {name} (
    group_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    work_item_id TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, seq)
) WITHOUT ROWID;"""

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
{events}
CREATE INDEX IF NOT EXISTS events_type ON events (group_id, type);
{archived_events}
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
CREATE TABLE IF NOT EXISTS mission_usage (
    group_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    budget TEXT,
    usage TEXT NOT NULL,
    PRIMARY KEY (group_id, mission_id)
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
CREATE TABLE IF NOT EXISTS artifact_uploads (
    group_id TEXT NOT NULL,
    artifact_hash TEXT NOT NULL,
    lease_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    work_item_id TEXT NOT NULL,
    uploaded_at_ms INTEGER NOT NULL,
    PRIMARY KEY (group_id, artifact_hash, lease_id)
) WITHOUT ROWID;
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
CREATE TABLE IF NOT EXISTS id_skeletons (
    kind TEXT NOT NULL,
    group_id TEXT NOT NULL,
    mission_id TEXT NOT NULL,
    skeleton TEXT NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (kind, group_id, mission_id, skeleton)
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
""".format(
    events=_EVENT_TABLE.format(name="events"),
    archived_events=_EVENT_TABLE.format(name="archived_events"),
)


#: name → SQL (SQLite dialect, ``?`` placeholders).
STATEMENTS: dict[str, str] = {
    # --- one Command's changes (the syntax both SQLite and PostgreSQL accept)
    "tx.savepoint": "SAVEPOINT cmd",
    "tx.release": "RELEASE SAVEPOINT cmd",
    "tx.rollback_to": "ROLLBACK TO SAVEPOINT cmd",
    # --- meta
    "meta.pin_key": "INSERT OR IGNORE INTO meta (key, value) VALUES ('authority_public_key', ?)",
    "meta.authority_key": "SELECT value FROM meta WHERE key='authority_public_key'",
    "meta.schema_version": "SELECT value FROM meta WHERE key='schema_version'",
    "meta.set_schema_version": "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
    "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
    # --- the writer (engine)
    "groups.head": "SELECT head_seq, head_hash FROM groups WHERE group_id=?",
    "groups.set_head": "UPDATE groups SET head_seq=?, head_hash=? WHERE group_id=?",
    "groups.ids": "SELECT group_id FROM groups ORDER BY 1",
    "events.insert": "INSERT INTO events (group_id, seq, event_id, type, work_item_id, data) "
    "VALUES (?,?,?,?,?,?)",
    "commands.insert": "INSERT INTO commands (group_id, actor, command_id, signature, status, "
    "refs) VALUES (?,?,?,?,?,?)",
    "members.actor_row": "SELECT m.public_key, m.roles, m.membership_epoch, m.active, "
    "a.session_epoch FROM members m JOIN agents a ON a.agent_id = m.agent_id "
    "WHERE m.group_id=? AND m.agent_id=?",
    # --- reads and log maintenance
    "events.one": "SELECT data FROM events WHERE group_id=? AND seq=? UNION ALL "
    "SELECT data FROM archived_events WHERE group_id=? AND seq=?",
    "events.page": "SELECT data FROM events WHERE group_id=? AND seq>? ORDER BY seq LIMIT ?",
    "events.all": "SELECT seq, data FROM archived_events WHERE group_id=? UNION ALL "
    "SELECT seq, data FROM events WHERE group_id=? ORDER BY 1",
    "events.range": "SELECT seq, data FROM archived_events WHERE group_id=? AND seq BETWEEN ? "
    "AND ? UNION ALL SELECT seq, data FROM events WHERE group_id=? AND seq BETWEEN ? AND ? "
    "ORDER BY 1",
    "events.archive": (
        "INSERT INTO archived_events SELECT * FROM events WHERE group_id=? AND seq<=?"
    ),
    "events.delete_archived": "DELETE FROM events WHERE group_id=? AND seq<=?",
    "events.outcomes": "SELECT type, json_extract(data, '$.body.owner'), "
    "json_extract(data, '$.body.capabilities') FROM events "
    "WHERE group_id=? AND type IN ('work.result_accepted', 'work.failed')",
    "groups.archived_through": "SELECT archived_through FROM groups WHERE group_id=?",
    "groups.head_and_archived": "SELECT head_seq, archived_through FROM groups WHERE group_id=?",
    "groups.set_archived_through": "UPDATE groups SET archived_through=max(archived_through, ?) "
    "WHERE group_id=?",
    "members.groups_of_key": "SELECT DISTINCT group_id FROM members WHERE public_key=? "
    "AND active=1 ORDER BY 1",
    "members.key_may_read": "SELECT 1 FROM members WHERE group_id=? AND public_key=? AND active=1",
    "members.active_by_key": (
        "SELECT agent_id, roles FROM members WHERE group_id=? AND public_key=? AND active=1"
    ),
    "members.active_with_agents": "SELECT m.agent_id, m.public_key, m.roles, "
    "m.membership_epoch, a.card, a.session_epoch "
    "FROM members m JOIN agents a ON a.agent_id = m.agent_id "
    "WHERE m.group_id=? AND m.active=1 ORDER BY m.agent_id",
    "cursors.advance": "INSERT INTO cursors (group_id, agent_id, seq, updated_at_ms) "
    "VALUES (?,?,?,?) ON CONFLICT (group_id, agent_id) DO UPDATE SET "
    "seq=max(seq, excluded.seq), updated_at_ms=excluded.updated_at_ms",
    "cursors.seq": "SELECT seq FROM cursors WHERE group_id=? AND agent_id=?",
    # --- snapshots
    "snapshot.members": "SELECT agent_id, public_key, roles, membership_epoch, active "
    "FROM members WHERE group_id=? ORDER BY agent_id",
    "snapshot.missions": "SELECT mission_id, state, parent FROM missions WHERE group_id=? "
    "ORDER BY 1",
    "snapshot.work_items": "SELECT work_item_id, mission_id, state, revision, contract, "
    "dependencies, owner, ownership_epoch, start_deadline_ms, lease_id, attempts "
    "FROM work_items WHERE group_id=? ORDER BY 1",
    "snapshot.offers": "SELECT offer_id, work_item_id, candidates, expires_at_ms, status "
    "FROM offers WHERE group_id=? AND status='open' ORDER BY 1",
    "snapshot.leases": "SELECT lease_id, kind, work_item_id, agent_id, ownership_epoch, "
    "expires_at_ms FROM leases WHERE group_id=? AND status='active' ORDER BY 1",
    "snapshots.put": "INSERT OR REPLACE INTO snapshots (group_id, seq, data) VALUES (?,?,?)",
    "snapshots.latest": "SELECT data FROM snapshots WHERE group_id=? ORDER BY seq DESC LIMIT 1",
    "snapshots.at": "SELECT data FROM snapshots WHERE group_id=? AND seq=?",
    # --- offline verification
    "verify.archived": "SELECT seq, data FROM archived_events WHERE group_id=? ORDER BY seq",
    "verify.online": "SELECT seq, data FROM events WHERE group_id=? ORDER BY seq",
    # --- artifacts in context (MW-13.3-d)
    "artifacts.homes": "SELECT DISTINCT group_id, mission_id FROM artifacts WHERE artifact_hash=?",
    "promoted_artifacts.any": "SELECT 1 FROM promoted_artifacts WHERE artifact_hash=? LIMIT 1",
    "promoted_artifacts.groups": (
        "SELECT group_id FROM promoted_artifacts WHERE artifact_hash=? ORDER BY group_id"
    ),
    "artifacts.published_in_mission": (
        "SELECT 1 FROM artifacts WHERE group_id=? AND artifact_hash=? AND mission_id=? LIMIT 1"
    ),
    "artifacts.published_in_group": (
        "SELECT 1 FROM artifacts WHERE group_id=? AND artifact_hash=? LIMIT 1"
    ),
    # --- proof of possession: which lease's write grant brought which bytes (MW-13.3-d)
    "artifact_uploads.in_item": (
        "SELECT 1 FROM artifact_uploads WHERE group_id=? AND artifact_hash=? AND work_item_id=? "
        "LIMIT 1"
    ),
    "artifact_uploads.in_mission": (
        "SELECT 1 FROM artifact_uploads WHERE group_id=? AND artifact_hash=? AND mission_id=? "
        "LIMIT 1"
    ),
    "artifact_uploads.in_group": (
        "SELECT 1 FROM artifact_uploads WHERE group_id=? AND artifact_hash=? LIMIT 1"
    ),
    "artifact_uploads.insert_ignore": (
        "INSERT OR IGNORE INTO artifact_uploads (group_id, artifact_hash, lease_id, mission_id, "
        "work_item_id, uploaded_at_ms) VALUES (?,?,?,?,?,?)"
    ),
    "leases.held_in_mission": (
        "SELECT 1 FROM leases l JOIN work_items w ON w.group_id = l.group_id "
        "AND w.work_item_id = l.work_item_id WHERE l.group_id=? AND l.agent_id=? "
        "AND w.mission_id=? LIMIT 1"
    ),
    "artifacts.published_in_item": (
        "SELECT 1 FROM artifacts WHERE group_id=? AND artifact_hash=? AND work_item_id=? LIMIT 1"
    ),
    "promoted_artifacts.in_group": (
        "SELECT 1 FROM promoted_artifacts WHERE group_id=? AND artifact_hash=?"
    ),
    # --- command handlers
    "missions.state_by_group_id_mission_id": (
        "SELECT state FROM missions WHERE group_id=? AND mission_id=?"
    ),
    "missions.state_and_parent": (
        "SELECT state, parent FROM missions WHERE group_id=? AND mission_id=?"
    ),
    # the latest Event of one type for one WorkItem, online or archived (a child Mission's link)
    "events.latest_of_item": (
        "SELECT data FROM (SELECT seq, data FROM events WHERE group_id=? AND type=? "
        "AND work_item_id=? UNION ALL SELECT seq, data FROM archived_events WHERE group_id=? "
        "AND type=? AND work_item_id=?) AS e ORDER BY seq DESC LIMIT 1"
    ),
    # one WorkItem's Events of one type, online or archived (a submission's manifests)
    "events.of_item_type": (
        "SELECT data FROM events WHERE group_id=? AND type=? AND work_item_id=? UNION ALL "
        "SELECT data FROM archived_events WHERE group_id=? AND type=? AND work_item_id=?"
    ),
    "events.of_type": (
        "SELECT data FROM events WHERE group_id=? AND type=? UNION ALL "
        "SELECT data FROM archived_events WHERE group_id=? AND type=?"
    ),
    "missions.exists_by_group_id_mission_id": (
        "SELECT 1 FROM missions WHERE group_id=? AND mission_id=?"
    ),
    "missions.insert": (
        "INSERT INTO missions (group_id, mission_id, state, parent) VALUES (?,?,?,?)"
    ),
    "work_items.row": "SELECT * FROM work_items WHERE group_id=? AND work_item_id=?",
    "work_items.upsert": (
        "INSERT OR REPLACE INTO work_items (group_id, work_item_id, mission_id, state, "
        "revision, contract, dependencies, usage) VALUES (?,?,?,?,?,?,?,?)"
    ),
    "offers.insert": (
        "INSERT INTO offers (offer_id, group_id, work_item_id, candidates, declined, "
        "selection_basis, expires_at_ms, revision, status) VALUES (?,?,?,?,?,?,?,?,'open')"
    ),
    "offers.row": "SELECT * FROM offers WHERE offer_id=? AND group_id=?",
    "offers.accept": "UPDATE offers SET status='accepted' WHERE offer_id=?",
    "offers.withdraw": "UPDATE offers SET status='withdrawn' WHERE offer_id=?",
    "offers.set_declined_status": "UPDATE offers SET declined=?, status=? WHERE offer_id=?",
    "result_approvals.decision_approver": (
        "SELECT decision, approver FROM result_approvals WHERE group_id=? AND work_item_id=? "
        "AND ownership_epoch=?"
    ),
    "result_approvals.insert": (
        "INSERT INTO result_approvals (group_id, work_item_id, ownership_epoch, decision, "
        "approver, review_digest, decided_at_ms) VALUES (?,?,?,?,?,?,?)"
    ),
    "result_approvals.decision": (
        "SELECT decision FROM result_approvals WHERE group_id=? AND work_item_id=? AND "
        "ownership_epoch=?"
    ),
    "work_items.rows_by_mission": (
        "SELECT * FROM work_items WHERE group_id=? AND mission_id=? ORDER BY work_item_id"
    ),
    "missions.set_state": "UPDATE missions SET state=? WHERE group_id=? AND mission_id=?",
    "work_items.open_ids_by_mission": (
        "SELECT work_item_id FROM work_items WHERE group_id=? AND mission_id=? AND state NOT "
        "IN ('verified','cancelled')"
    ),
    "missions.complete": "UPDATE missions SET state='completed' WHERE group_id=? AND mission_id=?",
    "work_items.admitted_mission_id": (
        "SELECT mission_id FROM work_items WHERE group_id=? AND work_item_id=? AND state != "
        "'proposed'"
    ),
    "members.is_active_worker": (
        "SELECT 1 FROM members WHERE group_id=? AND agent_id=? AND active=1 AND roles LIKE "
        "'%\"worker\"%'"
    ),
    "leases.active_of_item": (
        "SELECT lease_id, kind FROM leases WHERE group_id=? AND work_item_id=? AND "
        "status='active' ORDER BY lease_id"
    ),
    "leases.latest_active_of_item": (
        "SELECT status, expires_at_ms, kind FROM leases WHERE group_id=? AND work_item_id=? "
        "AND status='active' ORDER BY started_at_ms DESC LIMIT 1"
    ),
    "offers.open_of_item": (
        "SELECT offer_id, candidates FROM offers WHERE group_id=? AND work_item_id=? AND "
        "status='open' ORDER BY offer_id"
    ),
    "leases.set_status": "UPDATE leases SET status=? WHERE lease_id=?",
    "members.active_key": (
        "SELECT public_key FROM members WHERE group_id=? AND agent_id=? AND active=1"
    ),
    "members.key": "SELECT public_key FROM members WHERE group_id=? AND agent_id=?",
    "context_packages.latest": (
        "SELECT version, package_hash FROM context_packages WHERE group_id=? AND mission_id=? "
        "AND scope=? ORDER BY version DESC LIMIT 1"
    ),
    "context_packages.insert": (
        "INSERT INTO context_packages (group_id, mission_id, scope, version, package_hash, "
        "generator, data, recorded_at_ms) VALUES (?,?,?,?,?,?,?,?)"
    ),
    "artifacts.homes_in_group": (
        "SELECT manifest_id, mission_id, work_item_id, producer, classification FROM "
        "artifacts WHERE group_id=? AND artifact_hash=? ORDER BY manifest_id"
    ),
    "promoted_artifacts.upsert": (
        "INSERT OR REPLACE INTO promoted_artifacts (group_id, artifact_hash, classification, "
        "promoted_by, promoted_at_ms) VALUES (?,?,?,?,?)"
    ),
    "work_items.exists_in_mission": (
        "SELECT 1 FROM work_items WHERE group_id=? AND work_item_id=? AND mission_id=?"
    ),
    "work_items.admitted_dependencies": (
        "SELECT work_item_id, dependencies FROM work_items WHERE group_id=? AND mission_id=? "
        "AND state != 'proposed'"
    ),
    "work_items.set_dependencies": (
        "UPDATE work_items SET dependencies=? WHERE group_id=? AND work_item_id=?"
    ),
    "agents.public_key_by_agent_id": "SELECT public_key FROM agents WHERE agent_id=?",
    "groups.exists_by_group_id": "SELECT 1 FROM groups WHERE group_id=?",
    "groups.insert": (
        "INSERT INTO groups (group_id, created_at_ms, head_seq, head_hash) VALUES (?,?,0,?)"
    ),
    "members.insert": (
        "INSERT INTO members (group_id, agent_id, public_key, roles, membership_epoch, "
        "active) VALUES (?,?,?,?,1,1)"
    ),
    "members.membership_epoch_active_by_group_id_agent_id": (
        "SELECT membership_epoch, active FROM members WHERE group_id=? AND agent_id=?"
    ),
    "members.upsert": (
        "INSERT OR REPLACE INTO members (group_id, agent_id, public_key, roles, "
        "membership_epoch, active) VALUES (?,?,?,?,?,1)"
    ),
    "members.active_epoch": (
        "SELECT membership_epoch FROM members WHERE group_id=? AND agent_id=? AND active=1"
    ),
    "members.set_roles_membership_epoch": (
        "UPDATE members SET roles=?, membership_epoch=? WHERE group_id=? AND agent_id=?"
    ),
    "members.deactivate": (
        "UPDATE members SET active=0, membership_epoch=? WHERE group_id=? AND agent_id=?"
    ),
    "agents.public_key_card_version_by_agent_id": (
        "SELECT public_key, card_version FROM agents WHERE agent_id=?"
    ),
    "agents.set_card_card_version": "UPDATE agents SET card=?, card_version=? WHERE agent_id=?",
    "agents.session_epoch_by_agent_id": "SELECT session_epoch FROM agents WHERE agent_id=?",
    "agents.set_session_epoch": "UPDATE agents SET session_epoch=? WHERE agent_id=?",
    "leases.active_execution_of_agent": (
        "SELECT lease_id, group_id, work_item_id FROM leases WHERE agent_id=? AND "
        "status='active' AND kind='execution' ORDER BY group_id, lease_id"
    ),
    "work_items.contract_by_group_id_work_item_id": (
        "SELECT contract FROM work_items WHERE group_id=? AND work_item_id=?"
    ),
    "agents.insert": "INSERT INTO agents (agent_id, public_key) VALUES (?,?)",
    "leases.revoke": "UPDATE leases SET status='revoked' WHERE lease_id=?",
    "members.group_id_by_agent_id": (
        "SELECT group_id FROM members WHERE agent_id=? AND active=1 ORDER BY 1"
    ),
    "leases.row": "SELECT * FROM leases WHERE lease_id=?",
    # --- capability tokens (MW-11.3-d)
    "capability_tokens.insert": (
        "INSERT INTO capability_tokens (token_id, lease_id, scope, expires_at_ms, status) "
        "VALUES (?,?,?,?,'active')"
    ),
    "capability_tokens.active_of_lease": (
        "SELECT token_id, scope FROM capability_tokens WHERE lease_id=? AND status='active' "
        "ORDER BY token_id"
    ),
    "capability_tokens.supersede": (
        "UPDATE capability_tokens SET status='superseded' WHERE lease_id=? AND status='active'"
    ),
    "capability_tokens.with_lease": (
        "SELECT t.token_id, t.lease_id, t.scope, t.expires_at_ms, t.status, "
        "l.status AS lease_status, l.expires_at_ms AS lease_expires_at_ms, l.agent_id, "
        "l.group_id, l.work_item_id FROM capability_tokens t "
        "JOIN leases l ON l.lease_id = t.lease_id WHERE t.token_id=?"
    ),
    # --- Mission budgets and bounded offline execution (MW-11.5-c/i)
    "missions.parent_and_usage": (
        "SELECT m.parent, u.budget, u.usage FROM missions m LEFT JOIN mission_usage u "
        "ON u.group_id = m.group_id AND u.mission_id = m.mission_id "
        "WHERE m.group_id=? AND m.mission_id=?"
    ),
    "mission_usage.save_usage": (
        "INSERT INTO mission_usage (group_id, mission_id, budget, usage) VALUES (?,?,?,?) "
        "ON CONFLICT (group_id, mission_id) DO UPDATE SET usage=excluded.usage"
    ),
    "mission_usage.save_budget": (
        "INSERT INTO mission_usage (group_id, mission_id, budget, usage) VALUES (?,?,?,?) "
        "ON CONFLICT (group_id, mission_id) DO UPDATE SET budget=excluded.budget"
    ),
    "meta.alive_at": "SELECT value FROM meta WHERE key='alive_at_ms'",
    "meta.set_alive_at": "INSERT INTO meta (key, value) VALUES ('alive_at_ms', ?) "
    "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
    # the end of the last outage credited to live leases (lease time, ms; MW-11.5-c)
    "meta.credited_until": "SELECT value FROM meta WHERE key='credited_until_ms'",
    "meta.set_credited_until": "INSERT INTO meta (key, value) VALUES ('credited_until_ms', ?) "
    "ON CONFLICT (key) DO UPDATE SET value=excluded.value",
    # the database's clock, epoch ms (lease time over PostgreSQL)
    "clock.now_ms": "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    "leases.live_at_with_contract": (
        "SELECT l.lease_id, l.kind, l.started_at_ms, l.expires_at_ms, l.renewals, w.contract "
        "FROM leases l JOIN work_items w ON w.group_id = l.group_id "
        "AND w.work_item_id = l.work_item_id WHERE l.status='active' AND l.expires_at_ms > ?"
    ),
    "leases.set_expires_at_ms": "UPDATE leases SET expires_at_ms=? WHERE lease_id=?",
    "work_items.credit_start_deadlines": (
        "UPDATE work_items SET start_deadline_ms = start_deadline_ms + ? "
        "WHERE start_deadline_ms > ?"
    ),
    "leases.live_by_kind": (
        "SELECT kind, COUNT(*) FROM leases WHERE status='active' AND expires_at_ms > ? "
        "GROUP BY kind"
    ),
    "leases.insert": (
        "INSERT INTO leases (lease_id, kind, group_id, work_item_id, agent_id, session_epoch, "
        "ownership_epoch, started_at_ms, expires_at_ms, renewals, status) VALUES "
        "(?,?,?,?,?,?,?,?,?,'[]','active')"
    ),
    "leases.set_expires_at_ms_renewals": (
        "UPDATE leases SET expires_at_ms=?, renewals=? WHERE lease_id=?"
    ),
    "leases.exists_by_lease_id_agent_id_group_id_work_item_id": (
        "SELECT 1 FROM leases WHERE lease_id=? AND agent_id=? AND group_id=? AND work_item_id=?"
    ),
    "agents.card_version_by_agent_id": "SELECT card_version FROM agents WHERE agent_id=?",
    "agents.card_by_agent_id": "SELECT card FROM agents WHERE agent_id=?",
    "agents.ids": "SELECT agent_id FROM agents",
    # --- one identity per look (UTS #39 skeletons of ids, by scope: authority/core/_identity)
    "id_skeletons.id": (
        "SELECT id FROM id_skeletons WHERE kind=? AND group_id=? AND mission_id=? AND skeleton=?"
    ),
    "id_skeletons.insert_ignore": (
        "INSERT OR IGNORE INTO id_skeletons (kind, group_id, mission_id, skeleton, id) "
        "VALUES (?,?,?,?,?)"
    ),
    "missions.ids_of_group": "SELECT mission_id FROM missions WHERE group_id=?",
    "work_items.ids_of_mission": (
        "SELECT work_item_id FROM work_items WHERE group_id=? AND mission_id=?"
    ),
    "artifacts.insert_ignore": (
        "INSERT OR IGNORE INTO artifacts (group_id, artifact_hash, manifest_id, mission_id, "
        "work_item_id, producer, classification, published_at_ms) VALUES (?,?,?,?,?,?,?,?)"
    ),
}

#: The remembered Commands among ``{keys}`` — ``(?,?,?),…``, one per (group, actor, id).
COMMAND_PRIORS = (
    "WITH k(g, a, c) AS (VALUES {keys}) "
    "SELECT group_id, actor, command_id, signature, status, refs FROM k JOIN commands "
    "ON commands.group_id = k.g AND commands.actor = k.a AND commands.command_id = k.c"
)

#: One WorkItem's columns ``{assigns}`` (``col=?, …``) set.
SET_WORK_ITEM = "UPDATE work_items SET {assigns} WHERE group_id=? AND work_item_id=?"

#: PostgreSQL text where the dialects differ (``?`` placeholders still; translated on load).
POSTGRES_OVERRIDES: dict[str, str] = {
    # session.* of one agent serialized across replicas by its row (issue 27): a second
    # session.open waits for the first to commit, then reads its epoch
    "agents.session_epoch_by_agent_id": STATEMENTS["agents.session_epoch_by_agent_id"]
    + " FOR UPDATE",
    "meta.pin_key": "INSERT INTO meta (key, value) VALUES ('authority_public_key', ?) "
    "ON CONFLICT DO NOTHING",
    "artifacts.insert_ignore": STATEMENTS["artifacts.insert_ignore"].replace(
        "INSERT OR IGNORE", "INSERT"
    )
    + " ON CONFLICT DO NOTHING",
    "artifact_uploads.insert_ignore": STATEMENTS["artifact_uploads.insert_ignore"].replace(
        "INSERT OR IGNORE", "INSERT"
    )
    + " ON CONFLICT DO NOTHING",
    "id_skeletons.insert_ignore": STATEMENTS["id_skeletons.insert_ignore"].replace(
        "INSERT OR IGNORE", "INSERT"
    )
    + " ON CONFLICT DO NOTHING",
    "events.outcomes": "SELECT type, data::jsonb #>> '{body,owner}', "
    "(data::jsonb #> '{body,capabilities}')::text FROM events "
    "WHERE group_id=? AND type IN ('work.result_accepted', 'work.failed')",
    "groups.set_archived_through": "UPDATE groups SET "
    "archived_through=greatest(archived_through, ?) WHERE group_id=?",
    "clock.now_ms": "SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)",
    "cursors.advance": "INSERT INTO cursors (group_id, agent_id, seq, updated_at_ms) "
    "VALUES (?,?,?,?) ON CONFLICT (group_id, agent_id) DO UPDATE SET "
    "seq=greatest(cursors.seq, excluded.seq), updated_at_ms=excluded.updated_at_ms",
}


def _upsert(name: str, keys: str) -> None:
    """PostgreSQL text of an ``INSERT OR REPLACE`` statement: update every non-key column."""
    sql = STATEMENTS[name].replace("INSERT OR REPLACE", "INSERT")
    cols = [c.strip() for c in sql[sql.index("(") + 1 : sql.index(")")].split(",")]
    sets = ", ".join(f"{c}=excluded.{c}" for c in cols if c not in keys.split(","))
    POSTGRES_OVERRIDES[name] = f"{sql} ON CONFLICT ({keys}) DO UPDATE SET {sets}"


for _name, _keys in [
    ("members.upsert", "group_id,agent_id"),
    ("promoted_artifacts.upsert", "group_id,artifact_hash"),
    ("snapshots.put", "group_id,seq"),
]:
    _upsert(_name, _keys)

# SQLite's REPLACE deletes the old row, so every column not named takes its default again.
POSTGRES_OVERRIDES["work_items.upsert"] = (
    STATEMENTS["work_items.upsert"].replace("INSERT OR REPLACE", "INSERT")
    + " ON CONFLICT (group_id,work_item_id) DO UPDATE SET mission_id=excluded.mission_id, "
    "state=excluded.state, revision=excluded.revision, contract=excluded.contract, "
    "dependencies=excluded.dependencies, usage=excluded.usage, owner=NULL, "
    "ownership_epoch=0, start_deadline_ms=NULL, lease_id=NULL, approved=0, checkpoint=NULL, "
    "attempts=0, child_mission_id=NULL"
)
