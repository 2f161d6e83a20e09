"""Capability tokens (MW-11.3-d): rotation and narrowing under an active lease, verification
against the ``capability_tokens`` table, and a token that never outlives its lease — on a real
Authority, and through a real tool gateway on loopback that asks the Authority's HTTP API."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from missionweave.authority import Authority, TokenCheck, verify_capability_token, verify_log
from missionweave.protocol import SigningKey, digest, reduce_events
from tests.support.world import World, make_world

TOOLS = ["search", "fetch"]
OPERATIONS = ["publish"]


def _leased(tmp_path: Path) -> tuple[World, dict[str, Any]]:
    """A world whose worker-0 holds an execution lease on ``a``; the token it got."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", allowed_tools=TOOLS, allowed_operations=OPERATIONS)
    assert w.accept(w.workers[0], "a", w.offer("a", w.workers[0])).accepted
    r = w.ok(w.workers[0], "work.start", {"work_item_id": "a", "ownership_epoch": 1})
    w.leases["a"] = r.reply["lease"]
    return w, r.reply["capability_token"]


def _check(w: World, token: dict[str, Any], operation: str | None = None) -> TokenCheck:
    return verify_capability_token(w.authority, token, operation)


def _rotate(w: World, **body: Any) -> dict[str, Any]:
    r = w.ok(w.workers[0], "capability_token.rotate", w.leased("a", **body))
    token: dict[str, Any] = r.reply["capability_token"]
    return token


def test_mw_11_3_d_a_rotated_token_works_and_the_old_one_is_refused(tmp_path: Path) -> None:
    w, first = _leased(tmp_path)
    assert _check(w, first, "search").valid
    lease_id = w.leases["a"]["lease_id"]
    second = _rotate(w)
    assert second["token_id"] != first["token_id"] and second["lease_id"] == lease_id
    assert second["scope"] == sorted(TOOLS + OPERATIONS)
    old = _check(w, first, "search")
    assert not old.valid and old.code == "token_superseded" and old.lease_id == lease_id
    new = _check(w, second, "search")
    assert new.valid and new.lease_id == lease_id and new.work_item_id == "a"
    assert new.agent_id == "worker-0" and new.operation == "search"
    lease = w.authority.lease(lease_id)
    assert lease is not None and lease["valid"]  # the lease stays active throughout
    # the log keeps the public token only; the workflow's view follows the rotation
    events = w.authority.all_events(w.group)
    rotated = events[-1]
    assert rotated.type == "capability_token.rotated" and not rotated.body["narrowed"]
    assert rotated.body["superseded"] == [first["token_id"]]
    assert "signature" not in rotated.body["capability_token"]
    facts = reduce_events(events)["a"]
    assert facts.lease is not None
    assert facts.lease["capability_token"]["token_id"] == second["token_id"]
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_mw_11_3_d_a_narrowed_token_refuses_what_it_no_longer_allows(tmp_path: Path) -> None:
    w, first = _leased(tmp_path)
    narrow = _rotate(w, scope=["search"])
    assert narrow["scope"] == ["search"]
    assert _check(w, narrow, "search").valid
    out = _check(w, narrow, "fetch")
    assert not out.valid and out.code == "operation_not_in_scope" and out.scope == ["search"]
    assert _check(w, first, "fetch").code == "token_superseded"
    assert w.authority.all_events(w.group)[-1].body["narrowed"] is True
    # a renewal keeps the narrowed scope; it never widens the token again
    w.clock.advance(1_000)
    renewed = w.ok(w.workers[0], "lease.renew", w.leased("a")).reply["capability_token"]
    assert renewed["scope"] == ["search"]
    assert _check(w, renewed, "fetch").code == "operation_not_in_scope"


def test_mw_11_3_d_a_token_cannot_be_widened_and_a_refusal_writes_nothing(
    tmp_path: Path,
) -> None:
    w, _ = _leased(tmp_path)
    _rotate(w, scope=["search"])
    head = w.authority.head(w.group)
    rows = w.authority.query("SELECT * FROM capability_tokens ORDER BY token_id")
    for body, code in (
        ({"scope": ["search", "fetch"]}, "scope_not_narrower"),
        ({"scope": "search"}, "invalid_body"),
        ({"scope": ["search", "search"]}, "invalid_body"),
    ):
        r = w.submit(w.workers[0], "capability_token.rotate", w.leased("a", **body))
        assert r.status == "rejected" and r.rejection is not None, body
        assert r.rejection.code == code, (body, r.rejection)
    assert w.authority.head(w.group) == head
    assert w.authority.query("SELECT * FROM capability_tokens ORDER BY token_id") == rows


def test_mw_11_3_d_only_the_lease_holder_rotates_under_its_current_lease(tmp_path: Path) -> None:
    w, _ = _leased(tmp_path)
    other = w.submit(w.workers[1], "capability_token.rotate", w.leased("a"))
    assert other.rejection is not None and other.rejection.code == "not_owner"
    stale = w.submit(
        w.workers[0], "capability_token.rotate", {**w.leased("a"), "lease_id": "lease_0"}
    )
    assert stale.rejection is not None and stale.rejection.code == "unknown_lease"


def test_mw_11_3_d_a_token_never_outlives_its_lease(tmp_path: Path) -> None:
    # released by a submission
    w, token = _leased(tmp_path / "submit")
    w.ok(w.workers[0], "work.submit", w.leased("a", **w.report("a", w.workers[0])))
    ended = _check(w, token, "search")
    assert not ended.valid and ended.code == "lease_ended"
    # expired by time, though nothing marked it yet
    w, token = _leased(tmp_path / "expire")
    w.clock.advance(w.leases["a"]["expires_at_ms"] - w.clock.now)
    assert _check(w, token).code == "token_expired"
    # revoked by a replacement session (MW-11.3-f)
    w, token = _leased(tmp_path / "session")
    worker = w.workers[0]
    assert w.authority.submit(
        worker.command("session.open", None, {}, issued_at_ms=w.clock.now)
    ).accepted
    assert _check(w, token).code == "lease_ended"
    # a token expires no later than the lease bound it was issued under
    assert token["expires_at_ms"] <= w.leases["a"]["expires_at_ms"]


def test_mw_11_3_d_verification_reveals_nothing_about_a_token_it_did_not_issue(
    tmp_path: Path,
) -> None:
    w, token = _leased(tmp_path)
    widened = {**token, "scope": ["search", "fetch", "publish", "delete"]}
    impostor = SigningKey.generate()
    fields = {
        k: token[k]
        for k in (
            "token_id",
            "lease_id",
            "agent_id",
            "group_id",
            "work_item_id",
            "scope",
            "expires_at_ms",
        )
    }
    resigned = {**token, "signature": impostor.sign(bytes.fromhex(digest(fields)))}
    for forged in (widened, resigned, {**token, "token_id": "cap_0"}):
        check = _check(w, forged, "delete")
        assert not check.valid and check.code == "invalid_token"
        assert check.lease_id is None and check.scope is None and check.agent_id is None
    # the log's public form has no bearer signature: it is no token at all
    started = [e for e in w.authority.all_events(w.group) if e.type == "work.started"]
    public = started[-1].body["capability_token"]
    with pytest.raises(ValidationError):
        verify_capability_token(w.authority, public)


def test_mw_11_3_d_the_table_is_the_one_source_of_a_tokens_standing(tmp_path: Path) -> None:
    """Whatever the token says, its standing and scope are the table's."""
    w, token = _leased(tmp_path)
    w.authority.store.conn.execute(
        "UPDATE capability_tokens SET scope='[\"search\"]' WHERE token_id=?", (token["token_id"],)
    )
    assert _check(w, token, "fetch").code == "operation_not_in_scope"
    w.authority.store.conn.execute(
        "UPDATE capability_tokens SET status='superseded' WHERE token_id=?", (token["token_id"],)
    )
    assert _check(w, token).code == "token_superseded"


def test_a_schema_2_database_gets_token_status_on_open(tmp_path: Path) -> None:
    w, token = _leased(tmp_path)
    conn = w.authority.store.conn
    conn.executescript(
        """
        CREATE TABLE t2 (token_id TEXT PRIMARY KEY, lease_id TEXT NOT NULL, scope TEXT NOT NULL,
                         expires_at_ms INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO t2 SELECT token_id, lease_id, scope, expires_at_ms FROM capability_tokens;
        DROP TABLE capability_tokens;
        ALTER TABLE t2 RENAME TO capability_tokens;
        UPDATE meta SET value='2' WHERE key='schema_version';
        """
    )
    key, clock, config = w.authority.key, w.clock, w.authority.config
    w.authority.close()
    again = Authority(tmp_path / "a.db", key, config, clock=clock)
    try:
        assert again.query("SELECT status FROM capability_tokens") == [{"status": "active"}]
        assert verify_capability_token(again, token, "search").valid
    finally:
        again.close()
    with sqlite3.connect(tmp_path / "a.db") as raw:
        assert raw.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("3",)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.sampled_from(["rotate", "narrow", "renew", "widen"]), max_size=8),
    data=st.data(),
)
def test_mw_11_3_d_after_any_rotations_only_tokens_since_the_last_one_are_valid(
    tmp_path_factory: pytest.TempPathFactory, steps: list[str], data: st.DataObject
) -> None:
    """Rotations, narrowings, renewals and refused widenings in any order: the tokens issued
    since the last rotation are valid (with the narrowest scope so far), every earlier one is
    superseded, none expires after its lease, and the scope never grows."""
    w, first = _leased(tmp_path_factory.mktemp("seq"))
    issued = [first]  # every token, in order
    live = [first]  # those since the last rotation
    scope = sorted(TOOLS + OPERATIONS)
    for step in steps:
        w.clock.advance(100)
        if step == "renew":
            r = w.ok(w.workers[0], "lease.renew", w.leased("a"))
            live.append(r.reply["capability_token"])
        elif step == "widen":
            r = w.submit(
                w.workers[0], "capability_token.rotate", w.leased("a", scope=[*scope, "delete"])
            )
            assert r.rejection is not None and r.rejection.code == "scope_not_narrower"
            continue
        else:
            if step == "narrow" and scope:
                scope = sorted(data.draw(st.sets(st.sampled_from(scope)), label="scope"))
            body = {"scope": scope} if step == "narrow" else {}
            live = [_rotate(w, **body)]
        issued.append(live[-1])
        assert live[-1]["scope"] == scope
    lease = w.authority.lease(w.leases["a"]["lease_id"])
    assert lease is not None
    for token in issued:
        check = _check(w, token)
        assert check.valid is any(t["token_id"] == token["token_id"] for t in live), check
        if not check.valid:
            assert check.code == "token_superseded"
        assert token["expires_at_ms"] <= lease["expires_at_ms"]


def test_mw_11_3_d_a_token_that_cannot_be_canonicalized_is_simply_not_genuine(
    tmp_path: Path,
) -> None:
    """A genuine token altered to hold a lone surrogate in its scope cannot be hashed: it is
    refused as ``invalid_token`` with no facts, never an internal error (found by attack)."""
    w, token = _leased(tmp_path)
    check = _check(w, {**token, "scope": ["\udfff"]})
    assert (check.valid, check.code, check.token_id) == (False, "invalid_token", None)
