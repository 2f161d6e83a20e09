"""Context Packages (MW-13.3-a, -c), member-only cited Events (MW-13.3-b) and cross-Mission
content (MW-13.3-d)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from missionweave.authority import (
    MembershipRequired,
    UnknownGroupError,
    check_context_use,
    events_for_member,
    verify_log,
)
from missionweave.protocol import (
    Actor,
    ContextPackage,
    SignedContextPackage,
    SigningKey,
    check_event,
    sign_context_package,
    verify_chain,
)
from tests.support.artifact_servers import signed
from tests.support.world import World, make_leased_world

X = "ab" * 32  # an Artifact published in Mission m1


def _world(tmp_path: Path) -> World:
    """m1 with item ``a`` leased to worker-0 that published Artifact X; m2 with item ``b``."""
    w = make_leased_world(tmp_path / "a.db")
    w.uploaded("a", X)
    w.ok(w.workers[0], "artifact.publish", w.leased("a", manifest=signed(w.workers[0], X).wire()))
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2", "title": "another"})
    w.ok(w.coordinator, "work.authorize", w.authorization("b", mission="m2"))
    return w


def _package(
    w: World, version: int, previous: str | None, *, generator: Actor | None = None, **over: Any
) -> SignedContextPackage:
    gen = generator or w.coordinator
    fields: dict[str, Any] = {
        "mission_id": "m1",
        "scope": ["a"],
        "source": {"group_id": w.group, "from_seq": 1, "to_seq": w.authority.head(w.group)[0]},
        "artifacts": [X],
        "decisions": [f"v{version}: verify with sha256"],
        "constraints": ["no network"],
        "open_questions": [],
        "generator": gen.agent_id,
        "created_at_ms": w.clock.now,
        "version": version,
        "previous": previous,
    }
    fields.update(over)
    return sign_context_package(ContextPackage.model_validate(fields), gen.key)


def _publish(w: World, pkg: SignedContextPackage, actor: Actor | None = None) -> Any:
    return w.submit(actor or w.coordinator, "context.publish", {"package": pkg.wire()})


def test_context_package_has_every_field_and_is_signed__MW_13_3_a(tmp_path: Path) -> None:
    w = _world(tmp_path)
    v1 = _package(w, 1, None)
    full = v1.package.wire()
    for name in full:
        with pytest.raises(ValidationError):
            ContextPackage.model_validate({k: v for k, v in full.items() if k != name})
    with pytest.raises(ValidationError):  # version 1 has no previous, later ones must have one
        ContextPackage.model_validate({**full, "previous": X})
    with pytest.raises(ValidationError):
        ContextPackage.model_validate({**full, "version": 2})
    with pytest.raises(ValidationError):  # no free-form transcript can ride along (MW-13.2-d)
        ContextPackage.model_validate({**full, "chain_of_thought": "first I…"})
    with pytest.raises(ValidationError):
        ContextPackage.model_validate({**full, "source": {**full["source"], "to_seq": 0}})
    r = _publish(w, v1, w.workers[0])
    assert r.rejection is not None and r.rejection.code == "role_not_allowed"
    head = w.authority.head(w.group)[0]
    for over, code in (
        (
            {"source": {"group_id": w.group, "from_seq": 1, "to_seq": head + 1}},
            "invalid_event_range",
        ),
        ({"source": {"group_id": "g2", "from_seq": 1, "to_seq": 1}}, "invalid_event_range"),
        ({"mission_id": "m9"}, "unknown_mission"),
        ({"scope": ["b"]}, "unknown_work_item"),  # b belongs to m2
    ):
        r = _publish(w, _package(w, 1, None, **over))
        assert r.rejection is not None and r.rejection.code == code, over
    r = w.ok(w.coordinator, "context.publish", {"package": v1.wire()})
    (ev,) = r.events
    assert ev.type == "context.published" and ev.body["package_hash"] == v1.package_hash
    assert SignedContextPackage.model_validate(ev.body["package"]) == v1


def test_version_chain_verifies__MW_13_3_c(tmp_path: Path) -> None:
    w = _world(tmp_path)
    chain = [_package(w, 1, None)]
    w.ok(w.coordinator, "context.publish", {"package": chain[0].wire()})
    for v in (2, 3):
        pkg = _package(w, v, chain[-1].package_hash)  # covers the newer Events too
        w.ok(w.coordinator, "context.publish", {"package": pkg.wire()})
        chain.append(pkg)
    keys = {w.coordinator.agent_id: w.coordinator.public_key}
    assert verify_chain(chain) is None
    assert verify_chain(chain, keys) is None
    # the log alone proves the chain: every version, in order, each linking its predecessor
    events = w.authority.all_events(w.group)
    logged = [
        SignedContextPackage.model_validate(e.body["package"])
        for e in events
        if e.type == "context.published"
    ]
    assert logged == chain and verify_chain(logged, keys) is None
    assert [p.package.source.to_seq for p in chain] == sorted(
        p.package.source.to_seq for p in chain
    )
    # another scope is another chain, starting at version 1
    w.ok(w.coordinator, "context.publish", {"package": _package(w, 1, None, scope=[]).wire()})


def test_broken_chain_rejected__MW_13_3_c(tmp_path: Path) -> None:
    w = _world(tmp_path)
    v1 = _package(w, 1, None)
    v2 = _package(w, 2, v1.package_hash)
    v3 = _package(w, 3, v2.package_hash)
    stranger = Actor.generate("stranger")
    tampered = v2.model_copy(
        update={"package": v2.package.model_copy(update={"decisions": ["v2: skip verification"]})}
    )
    for chain, code in (
        ([v1, v3], "context_chain"),  # a skipped version
        ([v2, v3], "context_chain"),  # does not start at version 1
        ([v1, _package(w, 2, "cd" * 32)], "context_chain"),  # links something else
        ([v1, _package(w, 2, v1.package_hash, scope=[])], "context_chain"),  # another scope
        ([v1, tampered, v3], "context_signature"),
        ([], "empty_chain"),
    ):
        rej = verify_chain(chain)
        assert rej is not None and rej.code == code, chain
    rej = verify_chain([v1, v2], {w.coordinator.agent_id: SigningKey.generate().public_key})
    assert rej is not None and rej.code == "context_signature"
    # the Authority refuses the same breaks and writes nothing
    w.ok(w.coordinator, "context.publish", {"package": v1.wire()})
    head = w.authority.head(w.group)
    for pkg, code in (
        (v3, "context_chain"),
        (_package(w, 2, "cd" * 32), "context_chain"),
        (_package(w, 1, None), "context_chain"),  # a second version 1: a fork
        (tampered, "context_signature"),
        (_package(w, 2, v1.package_hash, generator=stranger), "context_signature"),
    ):
        r = _publish(w, pkg)
        assert r.status == "rejected" and r.rejection is not None, pkg
        assert r.rejection.code == code, (code, r.rejection)
    assert w.authority.head(w.group) == head
    w.ok(w.coordinator, "context.publish", {"package": v2.wire()})


def test_cross_mission_use_refused_without_promotion__MW_13_3_d(tmp_path: Path) -> None:
    w = _world(tmp_path)
    assert check_context_use(w.authority, w.group, "m1", X) is None
    rej = check_context_use(w.authority, w.group, "m2", X)
    assert rej is not None and rej.code == "cross_mission_content"
    assert "m1" not in str(rej.detail.values())  # the other Mission is not disclosed
    rej = check_context_use(w.authority, w.group, "m2", "cd" * 32)
    assert rej is not None and rej.code == "unknown_artifact"
    # the Authority enforces it too: a package for m2 citing X, a derived artifact in m2
    r = _publish(w, _package(w, 1, None, mission_id="m2", scope=["b"]))
    assert r.rejection is not None and r.rejection.code == "cross_mission_content"
    worker = w.workers[1]
    w.lease("b", worker)
    derived = signed(worker, "ef" * 32, mission_id="m2", work_item_id="b", sources=[X])
    w.uploaded("b", "ef" * 32)
    r = w.submit(worker, "artifact.publish", w.leased("b", manifest=derived.wire()))
    assert r.rejection is not None and r.rejection.code == "cross_mission_content"


def test_promotion_allows_use_with_verifiable_event__MW_13_3_d(tmp_path: Path) -> None:
    w = _world(tmp_path)
    other = Actor.generate("other-owner")  # a second Group of the same Organization
    coord = w.coordinator  # the operator creates it and hands it to its owner
    assert w.authority.submit(
        coord.command(
            "group.create", "g2", {"public_key": coord.public_key}, issued_at_ms=w.clock.now
        )
    ).accepted
    coord.membership_epochs["g2"] = 1
    roles = ["owner", "coordinator", "mission_owner"]
    assert w.authority.submit(
        coord.command(
            "member.add",
            "g2",
            {"agent_id": other.agent_id, "public_key": other.public_key, "roles": roles},
            issued_at_ms=w.clock.now,
        )
    ).accepted
    other.membership_epochs["g2"] = 1
    assert w.authority.submit(
        other.command("mission.create", "g2", {"mission_id": "mx"}, issued_at_ms=w.clock.now)
    ).accepted
    assert check_context_use(w.authority, "g2", "mx", X) is not None
    for actor, body, code in (
        (w.reviewer, {"artifact_hash": X, "classification": "internal"}, "role_not_allowed"),
        (
            w.coordinator,
            {"artifact_hash": "cd" * 32, "classification": "internal"},
            "unknown_artifact",
        ),
        (w.coordinator, {"artifact_hash": X, "classification": "secret"}, "invalid_body"),
        (w.coordinator, {"artifact_hash": X}, "invalid_body"),
    ):
        r = w.submit(actor, "artifact.promote", body)
        assert r.rejection is not None and r.rejection.code == code, body
    r = w.ok(w.coordinator, "artifact.promote", {"artifact_hash": X, "classification": "internal"})
    (ev,) = r.events
    assert ev.type == "artifact.promoted"
    assert ev.body["classification"] == "internal" and ev.body["approved_by"] == "coordinator"
    (prov,) = ev.body["provenance"]
    assert (prov["mission_id"], prov["work_item_id"], prov["producer"]) == ("m1", "a", "worker-0")
    prev = w.authority.all_events(w.group)[ev.seq - 2]
    assert check_event(ev, w.authority.public_key, prev.hash, w.coordinator.public_key) is None
    assert verify_log(w.authority.store, w.group, w.authority.public_key).head_seq == ev.seq
    # now usable by other Missions, in this Group and in the other one
    assert check_context_use(w.authority, w.group, "m2", X) is None
    assert check_context_use(w.authority, "g2", "mx", X) is None
    w.ok(
        w.coordinator,
        "context.publish",
        {"package": _package(w, 1, None, mission_id="m2", scope=["b"]).wire()},
    )


def test_non_member_cannot_fetch_cited_events__MW_13_3_b(tmp_path: Path) -> None:
    w = _world(tmp_path)
    pkg = _package(w, 1, None).package
    src = pkg.source
    got = events_for_member(w.authority, w.group, "worker-0", src.from_seq, src.to_seq)
    assert [e.seq for e in got] == list(range(src.from_seq, src.to_seq + 1))
    assert got == w.authority.all_events(w.group)[: src.to_seq]
    with pytest.raises(MembershipRequired) as exc:
        events_for_member(w.authority, w.group, "stranger", src.from_seq, src.to_seq)
    assert "stranger" in str(exc.value) and exc.value.group_id == w.group
    w.ok(w.coordinator, "member.remove", {"agent_id": "worker-1"})
    with pytest.raises(MembershipRequired):
        events_for_member(w.authority, w.group, "worker-1", 1, 2)
    with pytest.raises(UnknownGroupError):
        events_for_member(w.authority, "g9", "worker-0", 1, 1)
    with pytest.raises(ValueError):
        events_for_member(w.authority, w.group, "worker-0", 1, src.to_seq + 100)
