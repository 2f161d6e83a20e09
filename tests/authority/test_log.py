"""The signed, hash-chained log: atomicity, idempotency, tamper evidence, ACK and archive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from missionweave.authority import (
    Authority,
    AuthorityConfig,
    AuthorityError,
    ChainError,
    CursorTooOldError,
    UnknownGroupError,
    load_snapshot,
    verify_log,
    verify_snapshot,
)
from missionweave.authority.core._store_sql import COMMAND_PRIORS, SCHEMA_VERSION
from missionweave.protocol import Actor, SigningKey, check_event
from tests.support.pg import raw
from tests.support.world import make_world


def _projection(a: Authority) -> list[dict[str, object]]:
    return a.query("SELECT * FROM work_items ORDER BY work_item_id")


def test_rejected_command_writes_nothing__MW_10_2_c(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    head, before = w.authority.head(w.group), _projection(w.authority)
    for ctype, body in (
        ("work.accept_result", {"work_item_id": "a"}),  # open → verified is not in the table
        ("work.start", {"work_item_id": "a", "ownership_epoch": 0}),
        ("work.nonsense", {}),
    ):
        r = w.submit(w.coordinator, ctype, body)
        assert r.status == "rejected" and r.rejection is not None and r.rejection.code
        assert r.rejection.reason and r.events == []
    assert w.authority.head(w.group) == head and _projection(w.authority) == before
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_signature_and_epochs_checked_first(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    forged = w.coordinator.command("work.cancel", w.group, {"work_item_id": "a"})
    forged = forged.model_copy(update={"body": {"work_item_id": "a", "reason": "forged"}})
    r = w.authority.submit(forged)
    assert r.rejection is not None and r.rejection.code == "bad_signature"
    impostor = Actor("coordinator", SigningKey.generate(), membership_epochs={w.group: 1})
    r = w.authority.submit(impostor.command("work.cancel", w.group, {"work_item_id": "a"}))
    assert r.rejection is not None and r.rejection.code == "bad_signature"
    w.coordinator.membership_epochs[w.group] = 7
    r = w.submit(w.coordinator, "work.cancel", {"work_item_id": "a"})
    assert r.rejection is not None and r.rejection.code == "stale_membership_epoch"


def test_repeated_command_id_returns_original_events(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    cmd = w.coordinator.command("work.authorize", w.group, w.authorization("a"))
    first = w.authority.submit(cmd)
    again = w.authority.submit(cmd)
    assert again.duplicate and again.status == "accepted"
    assert [e.event_id for e in again.events] == [e.event_id for e in first.events]
    other = w.coordinator.command(
        "work.authorize",
        w.group,
        w.authorization("b"),
        command_id=cmd.command_id,
    )
    r = w.authority.submit(other)
    assert r.rejection is not None and r.rejection.code == "idempotency_conflict"


def test_batch_keeps_each_command_atomic(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    mk = w.coordinator.command
    cmds = [
        mk("work.authorize", w.group, w.authorization("a")),
        mk("work.authorize", w.group, w.authorization("b", ["x"])),
        mk("work.authorize", w.group, w.authorization("c", ["a"])),
    ]
    head = w.authority.head(w.group)[0]
    res = w.authority.submit_many(cmds)
    assert [r.status for r in res] == ["accepted", "rejected", "accepted"]
    assert [e.seq for r in res for e in r.events] == [head + 1, head + 2]
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_changed_byte_is_caught_naming_the_sequence(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.authorize("b")
    db = w.authority.db_path
    ((seq, data),) = raw(
        db, "SELECT seq, data FROM events WHERE group_id='g1' AND type='mission.created'"
    )
    assert "test mission" in data
    raw(
        db,
        "UPDATE events SET data=? WHERE group_id='g1' AND seq=?",
        data.replace("test mission", "test missioN"),
        seq,
    )
    with pytest.raises(ChainError) as exc:
        verify_log(w.authority.store, "g1", w.authority.public_key)
    assert exc.value.seq == seq and exc.value.reason in ("hash mismatch", "command mismatch")


def test_other_authority_key_is_refused(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    with pytest.raises(AuthorityError, match="another Authority key"):
        Authority(w.authority.db_path, SigningKey.generate())


def test_ack_never_deletes_history__MW_16_c(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    head = w.authority.head(w.group)[0]
    assert w.authority.ack(w.group, "worker-0", head) == head
    assert w.authority.ack(w.group, "worker-0", 1) == head  # never moves backwards
    assert len(w.authority.events(w.group)) == head
    with pytest.raises(ValueError):
        w.authority.ack(w.group, "worker-0", head + 1)


def test_archive_keeps_chain_and_old_cursor_gets_snapshot__MW_16_e(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db", config=AuthorityConfig(online_window=4))
    for i in range(6):
        w.authorize(f"i{i}")
    through = w.authority.maybe_archive(w.group, force=True)
    head = w.authority.head(w.group)[0]
    assert through == head - 4
    with pytest.raises(CursorTooOldError) as exc:
        w.authority.events(w.group, after_sequence=0)
    ref = exc.value.snapshot
    snap = load_snapshot(w.authority.store, w.group, ref["seq"])
    assert snap is not None and verify_snapshot(snap, w.authority.public_key)
    assert snap["hash"] == ref["hash"] and snap["seq"] >= through
    assert len(snap["state"]["work_items"]) == 6
    assert [e.seq for e in w.authority.events(w.group, after_sequence=through)] == list(
        range(through + 1, head + 1)
    )
    rep = verify_log(w.authority.store, w.group, w.authority.public_key)
    assert rep.events == head  # archive + online still verify as one chain
    tampered = {**snap, "state": {**snap["state"], "work_items": []}}
    assert not verify_snapshot(tampered, w.authority.public_key)
    assert json.loads(json.dumps(ref))["signature"] == snap["signature"]


def test_forged_command_in_a_large_batch_is_caught_by_the_verifier(tmp_path: Path) -> None:
    """Batches are applied while a separate process verifies signatures; a forgery among them
    must still be rejected and must not disturb the honest Commands."""
    w = make_world(tmp_path / "a.db")
    mk = w.coordinator.command
    cmds = [mk("work.authorize", w.group, w.authorization(f"i{i}")) for i in range(12)]
    forged = cmds[5].model_copy(update={"body": {**cmds[5].body, "work_item_id": "evil"}})
    cmds[5] = forged
    assert w.authority.config.parallel_verify_min <= len(cmds)
    results = w.authority.submit_many(cmds)
    assert [r.status for r in results].count("accepted") == 11
    assert results[5].rejection is not None and results[5].rejection.code == "bad_signature"
    assert w.authority.work_item(w.group, "evil") is None
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_archive_of_unknown_group_is_a_clear_error(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db", config=AuthorityConfig(online_window=2))
    with pytest.raises(UnknownGroupError):
        w.authority.maybe_archive("nope", force=True)
    with pytest.raises(ValueError):
        w.authority.query("DELETE FROM events")


@pytest.mark.parametrize(
    "key",
    ["notakey", "", "A" * 43 + "=", SigningKey.generate().public_key + "==", "AAAA"],
    ids=["text", "empty", "padded-43", "padded", "short"],
)
def test_a_member_key_that_is_not_an_ed25519_key_is_refused(tmp_path: Path, key: str) -> None:
    """``member.add`` (and ``group.create``) take an Ed25519 public key in one spelling —
    32 bytes, unpadded base64url — or nothing: a bad key would sit in the signed log and no
    Command of that member could ever verify."""
    w = make_world(tmp_path / "a.db")
    head = w.authority.head(w.group)
    r = w.submit(
        w.coordinator, "member.add", {"agent_id": "mallory", "public_key": key, "roles": ["worker"]}
    )
    assert r.rejection is not None and r.rejection.code in ("invalid_body", "missing_field")
    assert w.authority.head(w.group) == head
    # group.create authenticates with the body's key itself: a bad one fails the signature
    creator = Actor.generate("eve")
    r = w.authority.submit(creator.command("group.create", "g2", {"public_key": key}))
    assert r.rejection is not None and r.rejection.code in ("bad_signature", "missing_field")
    assert w.authority.query("SELECT group_id FROM groups WHERE group_id='g2'") == []


@pytest.mark.sqlite_only
def test_a_schema_1_database_is_migrated_on_open(tmp_path: Path) -> None:
    """Schema 1 kept Command ids global; opening it scopes each remembered id to its Group
    and actor, so a repeat still gets its original verdict."""
    w = make_world(tmp_path / "a.db")
    cmd = w.coordinator.command(
        "mission.create", w.group, {"mission_id": "m-old", "title": "t"}, issued_at_ms=w.clock.now
    )
    assert w.authority.submit(cmd).accepted
    opened = w.workers[0].command("session.open", None, {}, issued_at_ms=w.clock.now)
    assert w.authority.submit(opened).accepted
    remembered = w.authority.query("SELECT count(*) AS n FROM commands")[0]["n"]
    conn = w.authority.store.conn  # type: ignore[attr-defined]
    conn.executescript(
        """
        CREATE TABLE commands_1 (command_id TEXT PRIMARY KEY, signature TEXT NOT NULL,
                                 status TEXT NOT NULL, refs TEXT NOT NULL) WITHOUT ROWID;
        INSERT INTO commands_1 SELECT command_id, signature, status, refs FROM commands;
        DROP TABLE commands;
        ALTER TABLE commands_1 RENAME TO commands;
        UPDATE meta SET value='1' WHERE key='schema_version';
        """
    )
    key, clock = w.authority.key, w.clock
    w.authority.close()
    again = Authority(tmp_path / "a.db", key, w.authority.config, clock=clock)
    try:
        rows = again.query(
            "SELECT group_id, actor FROM commands WHERE command_id=?", cmd.command_id
        )
        assert rows == [{"group_id": w.group, "actor": "coordinator"}]
        assert again.query(
            "SELECT group_id FROM commands WHERE command_id=?", opened.command_id
        ) == [{"group_id": ""}]
        assert again.query("SELECT count(*) AS n FROM commands")[0]["n"] == remembered
        assert again.query("SELECT value FROM meta WHERE key='schema_version'") == [
            {"value": str(SCHEMA_VERSION)}
        ]
        r = again.submit(cmd)
        assert r.accepted and r.duplicate
        verify_log(again.store, w.group, key.public_key)
    finally:
        again.close()


def test_every_event_of_a_large_batch_is_signed_and_returned_as_stored(
    tmp_path: Path,
) -> None:
    """Each Event a batch returns is the one stored, signature included, and the log verifies
    (the writer builds the stored text and the returned Event from one canonical encoding)."""
    w = make_world(tmp_path / "a.db")
    for i in range(3):
        w.authorize(f"a{i}")
    cmds = [
        w.coordinator.command("work.cancel", w.group, {"work_item_id": f"a{i}", "reason": "r"})
        for i in range(3)
    ] + [
        w.coordinator.command("mission.create", w.group, {"mission_id": f"m{i}", "title": "t"})
        for i in range(2, 14)
    ]
    results = w.authority.submit_many(cmds)
    returned = [e for r in results for e in r.events]
    assert len(returned) >= 15
    stored = {(e.group_id, e.seq): e for e in w.authority.events(w.group)}
    for e in returned:
        assert e.signature, f"event {e.seq} returned unsigned"
        assert stored[(e.group_id, e.seq)] == e
        assert check_event(e, w.authority.public_key, e.prev_hash) is None
    assert verify_log(w.authority.store, w.group, w.authority.public_key).events == len(stored)


@pytest.mark.sqlite_only  # the plan read is SQLite's (PostgreSQL plans the join by statistics)
def test_remembered_command_ids_are_found_by_key_not_by_scan(tmp_path: Path) -> None:
    """The batch's one lookup of remembered Command ids searches the primary key: a scan of
    the whole ``commands`` table made every append slower as the log grew (issue 27)."""
    w = make_world(tmp_path / "a.db")
    sql = COMMAND_PRIORS.format(keys="(?,?,?),(?,?,?)")
    rows = w.authority.store.conn.execute(f"EXPLAIN QUERY PLAN {sql}", list("abcdef"))
    plan = " | ".join(str(r[-1]) for r in rows)
    assert "SEARCH commands USING PRIMARY KEY" in plan, plan
    assert "SCAN commands" not in plan, plan
