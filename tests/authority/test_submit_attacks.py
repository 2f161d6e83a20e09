"""Six ways a submission could carry content that is not its WorkItem's (issue 25, MW-13.3-d,
MW-13.2-a, MW-11.5-b), each refused with a structured rejection that writes nothing:

- a manifest for a hash another Mission published, with bytes never uploaded under this
  WorkItem's grant (``artifact.publish``) — the hash would then count as this Mission's;
- an output that names another Mission's Artifact, or a deliverable that names an Artifact
  not published in this WorkItem;
- Evidence whose ``subject`` is such a hash;
- an empty or oversized deliverable, an oversized output;
- duplicated (or too many) ``artifacts``;
- a former owner's late ``work.fail`` whose content is not well formed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from missionweave.authority import SubmitResult
from missionweave.authority.core._submission import MAX_INLINE_OUTPUT_BYTES, MAX_SUBMITTED_ARTIFACTS
from tests.support.artifact_servers import signed
from tests.support.world import World, evidence, make_leased_world

X = "ab" * 32  # published in Mission m1 by item a
NEVER = "cd" * 32  # never published anywhere


def _two_missions(tmp_path: Path) -> World:
    """m1: item ``a`` leased to worker-0, which published X; m2: item ``b`` leased to
    worker-1."""
    w = make_leased_world(tmp_path / "a.db")
    w.uploaded("a", X)
    w.ok(w.workers[0], "artifact.publish", w.leased("a", manifest=signed(w.workers[0], X).wire()))
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2", "title": "another"})
    w.ok(w.coordinator, "work.authorize", w.authorization("b", mission="m2"))
    w.lease("b", w.workers[1])
    return w


def _refused(w: World, r: SubmitResult, code: str, **detail: Any) -> None:
    """``r`` is rejected with ``code`` and ``detail``; nothing was written."""
    assert r.status == "rejected" and r.rejection is not None, r
    assert r.rejection.code == code, r.rejection
    assert not r.events
    for k, v in detail.items():
        assert r.rejection.detail.get(k) == v, r.rejection.detail


def _submit(w: World, wid: str, **body: Any) -> SubmitResult:
    worker = next(a for a in w.workers if a.agent_id == w.item(wid)["owner"])
    head = w.authority.head(w.group)
    r = w.submit(worker, "work.submit", w.leased(wid, **body))
    if not r.accepted:
        assert w.authority.head(w.group) == head
    return r


def test_a_manifest_for_another_missions_hash_is_refused__MW_13_3_d(tmp_path: Path) -> None:
    """m2 cannot claim m1's X by publishing a manifest for it without having uploaded the
    bytes (X would become m2's content) — refused exactly as a hash nobody holds; it may once
    X is promoted. Re-publishing in m1, by the same or another WorkItem, works."""
    w = _two_missions(tmp_path)
    bob = w.workers[1]
    mine = signed(bob, X, mission_id="m2", work_item_id="b").wire()
    head = w.authority.head(w.group)
    r = w.submit(bob, "artifact.publish", w.leased("b", manifest=mine))
    _refused(w, r, "content_not_uploaded", artifact_hash=X)
    nobody = w.submit(bob, "artifact.publish", w.leased("b", manifest=signed(
        bob, NEVER, mission_id="m2", work_item_id="b").wire()))  # fmt: skip
    assert r.rejection is not None and nobody.rejection is not None
    assert r.rejection.code == nobody.rejection.code
    assert r.rejection.reason == nobody.rejection.reason
    assert w.authority.head(w.group) == head
    # X did not become m2's: a submission naming it is still refused
    ev = [{**e, "artifacts": [X]} for e in evidence(bob.agent_id, "b")]
    _refused(w, _submit(w, "b", artifacts=[X], evidence=ev), "cross_mission_content")
    # the same Mission may publish it again
    w.ok(w.workers[0], "artifact.publish", w.leased("a", manifest=signed(w.workers[0], X).wire()))
    w.authorize("c")
    w.lease("c", w.workers[0])
    again = signed(w.workers[0], X, work_item_id="c").wire()
    w.ok(w.workers[0], "artifact.publish", w.leased("c", manifest=again))
    # promoted, any Mission may
    w.ok(w.coordinator, "artifact.promote", {"artifact_hash": X, "classification": "internal"})
    w.ok(bob, "artifact.publish", w.leased("b", manifest=mine))


def test_the_same_bytes_in_a_mission_of_another_group_may_be_published__MW_13_3_d(
    tmp_path: Path,
) -> None:
    """Each Group's blobs are its own: a Mission of g2 that produced the bytes m1 of g1
    published may publish them (refusing would tell g2 that another Group holds them)."""
    w = _two_missions(tmp_path)
    coord, bob = w.coordinator, w.workers[1]
    r = w.authority.submit(coord.command(
        "group.create", "g2",
        {"public_key": coord.public_key, "roles": ["owner", "coordinator", "mission_owner"]},
        issued_at_ms=w.clock.now,
    ))  # fmt: skip
    assert r.accepted, r.rejection
    coord.membership_epochs["g2"] = 1
    g1, w.group = w.group, "g2"
    body = {"agent_id": bob.agent_id, "public_key": bob.public_key, "roles": ["worker"]}
    w.ok(coord, "member.add", body)
    bob.membership_epochs["g2"] = 1
    w.ok(coord, "mission.create", {"mission_id": "m3", "title": "elsewhere"})
    w.ok(coord, "work.authorize", w.authorization("c", mission="m3"))
    w.lease("c", bob)
    theirs = signed(bob, X, group_id="g2", mission_id="m3", work_item_id="c").wire()
    w.uploaded("c", X)  # g2's own upload of the same bytes
    w.ok(bob, "artifact.publish", w.leased("c", manifest=theirs))
    w.group = g1  # in g1, m2 still may not claim m1's X without uploading it
    mine = signed(bob, X, mission_id="m2", work_item_id="b").wire()
    _refused(w, w.submit(bob, "artifact.publish", w.leased("b", manifest=mine)),
             "content_not_uploaded", artifact_hash=X)  # fmt: skip


def test_an_output_naming_an_artifact_is_checked_like_one__MW_13_3_d(tmp_path: Path) -> None:
    """An output whose value is a SHA-256 hash names an Artifact: another Mission's is
    ``cross_mission_content`` in any output; a deliverable naming one not published in this
    WorkItem (nor promoted) is ``artifact_not_published`` — another WorkItem's work does not
    stand for it. Other outputs may name this Mission's Artifacts, or a digest, as data."""
    w = _two_missions(tmp_path)
    ev = evidence(w.workers[1].agent_id, "b")
    r = _submit(w, "b", evidence=ev, outputs={"report": X})
    _refused(w, r, "cross_mission_content", artifact_hash=X)
    r = _submit(w, "b", evidence=ev, outputs={"report": {"rows": 1}, "source": X})
    _refused(w, r, "cross_mission_content", artifact_hash=X)
    # X was published under item a of Mission m1, not under c
    w.authorize("c")
    w.lease("c", w.workers[0])
    ev_c = evidence(w.workers[0].agent_id, "c")
    for h in (X, NEVER):
        r = _submit(w, "c", evidence=ev_c, outputs={"report": h})
        _refused(w, r, "artifact_not_published", artifact=h, output="report")
    data = {"report": {"rows": 1}, "input": X, "sha256": NEVER}
    assert _submit(w, "c", evidence=ev_c, outputs=data).accepted


def test_an_evidence_subject_naming_an_artifact_is_checked__MW_13_3_d(tmp_path: Path) -> None:
    """Evidence whose subject is a hash is about an Artifact: another Mission's is refused, so
    is one never published in this WorkItem; a subject that is a WorkItem id is not a hash."""
    w = _two_missions(tmp_path)
    bob = w.workers[1]
    report = {"report": {"rows": 1}}
    about_x = evidence(bob.agent_id, X)
    r = _submit(w, "b", evidence=about_x, outputs=report)
    _refused(w, r, "cross_mission_content", artifact_hash=X)
    about_never = evidence(bob.agent_id, NEVER)
    r = _submit(w, "b", evidence=about_never, outputs=report)
    _refused(w, r, "artifact_not_published", artifact=NEVER, criterion="hashes")
    assert _submit(w, "b", evidence=evidence(bob.agent_id, "b"), outputs=report).accepted


def test_a_deliverable_is_non_empty_and_an_output_bounded__MW_13_2_a(tmp_path: Path) -> None:
    """The deliverable ``report`` given as null, ``0``, ``""``, blanks, an invisible U+200B,
    ``{}`` or ``[]`` is missing; an output over :data:`MAX_INLINE_OUTPUT_BYTES` (deliverable or
    not) is ``invalid_body``."""
    w = make_leased_world(tmp_path / "a.db")
    ev = evidence(w.workers[0].agent_id, "a")
    for empty in (None, 0, False, "", "  ", "\u200b", " \ufeff\n", {}, []):
        r = _submit(w, "a", evidence=ev, outputs={"report": empty})
        _refused(w, r, "deliverable_missing", deliverable="report")
    big = "x" * MAX_INLINE_OUTPUT_BYTES
    for outputs in ({"report": big}, {"report": {"rows": 1}, "log": [big]}):
        r = _submit(w, "a", evidence=ev, outputs=outputs)
        name = next(k for k, v in outputs.items() if "x" in str(v))
        _refused(w, r, "invalid_body", field="outputs", output=name,
                 max_bytes=MAX_INLINE_OUTPUT_BYTES)  # fmt: skip
    assert _submit(w, "a", evidence=ev, outputs={"report": big[:1000]}).accepted


def test_submitted_artifacts_are_distinct_and_bounded__MW_13_2_a(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    ada = w.workers[0]
    w.uploaded("a", X)
    w.ok(ada, "artifact.publish", w.leased("a", manifest=signed(ada, X).wire()))
    ev = [{**e, "artifacts": [X]} for e in evidence(ada.agent_id, "a")]
    r = _submit(w, "a", evidence=ev, artifacts=[X] * 3)
    _refused(w, r, "invalid_body", field="artifacts", artifact=X)
    many = [f"{i:064x}" for i in range(MAX_SUBMITTED_ARTIFACTS + 1)]
    r = _submit(w, "a", evidence=ev, artifacts=many)
    _refused(w, r, "invalid_body", field="artifacts", max_items=MAX_SUBMITTED_ARTIFACTS)
    r = _submit(w, "a", evidence=ev, artifacts=[X])
    assert r.accepted and r.events[-1].body["artifacts"] == [X]


def test_a_late_failure_is_checked_before_it_is_recorded__MW_11_5_b(tmp_path: Path) -> None:
    """A former owner's ``work.fail`` is recorded for audit only if its content passes the
    checks the owner's would: Evidence well formed, no other Mission's Artifact."""
    w = _two_missions(tmp_path)
    ada = w.workers[0]
    old = w.leased("a")
    w.ok(ada, "work.checkpoint", w.leased("a", checkpoint={"step": 1}))
    w.start(ada, "a")  # a new lease: the old one's results are late
    head = w.authority.head(w.group)
    failed = evidence(ada.agent_id, "a", ("hashes",), "fail")
    for bad, code in [
        ({"evidence": "nope"}, "invalid_body"),
        ({"evidence": []}, "evidence_required"),
        ({"evidence": [{"subject": "a"}]}, "invalid_body"),
    ]:
        _refused(w, w.submit(ada, "work.fail", {**old, **bad}), code)
    assert w.authority.head(w.group) == head
    # m2's former owner failing with m1's content
    bob = w.workers[1]
    old_b = w.leased("b")
    w.ok(bob, "work.checkpoint", w.leased("b", checkpoint={"step": 1}))
    w.start(bob, "b")
    head = w.authority.head(w.group)
    cited = [{**e, "artifacts": [X]} for e in evidence(bob.agent_id, "b", ("hashes",), "fail")]
    r = w.submit(bob, "work.fail", {**old_b, "evidence": cited})
    _refused(w, r, "cross_mission_content", artifact_hash=X)
    assert w.authority.head(w.group) == head
    r = w.submit(ada, "work.fail", {**old, "evidence": failed})
    assert r.status == "recorded" and [e.type for e in r.events] == ["work.late_result_recorded"]
    # the owner's own failure is unchanged
    r = w.submit(ada, "work.fail", w.leased("a", evidence=failed))
    assert r.accepted and r.events[-1].type == "work.failed"


def test_an_accepted_results_evidence_subject_is_checked_too__MW_13_3_d(tmp_path: Path) -> None:
    """A Coordinator's ``work.accept_result`` Evidence naming another Mission's Artifact as its
    ``subject`` is refused like one it cites (an attack that got through)."""
    w = _two_missions(tmp_path)
    bob = w.workers[1]
    w.ok(bob, "work.submit", w.leased("b", evidence=evidence(bob.agent_id, "b"),
                                      outputs={"report": {"rows": 1}}))  # fmt: skip
    body = {"work_item_id": "b", "evidence": [{**e, "subject": X} for e in evidence("c", "b")]}
    head = w.authority.head(w.group)
    _refused(w, w.submit(w.coordinator, "work.accept_result", body), "cross_mission_content",
             artifact_hash=X)  # fmt: skip
    assert w.authority.head(w.group) == head
