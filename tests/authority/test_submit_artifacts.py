"""A submission names Artifacts that exist (issue 25 item 9, MW-13.2-a/c): each was published
in this WorkItem's conversation (or promoted in the Group) and Evidence references it; Evidence
cites only the submission's Artifacts; every deliverable of the contract is present
(an output of its name, or a submitted Artifact with its media type or schema). A former owner's
late result is checked the same before it is recorded. A refusal writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.artifact_servers import signed
from tests.support.world import World, evidence, make_leased_world

X = "ab" * 32  # published under WorkItem a's lease
NEVER = "cd" * 32  # never published anywhere


def _refused(w: World, body: dict[str, Any], code: str, **detail: Any) -> None:
    head = w.authority.head(w.group)
    r = w.submit(w.workers[0], "work.submit", w.leased("a", **body))
    assert r.rejection is not None and r.rejection.code == code, r.rejection
    assert r.status == "rejected" and not r.events
    for k, v in detail.items():
        assert r.rejection.detail[k] == v, r.rejection.detail
    assert w.authority.head(w.group) == head
    assert w.item("a")["state"] == "active"


def test_a_submission_names_only_published_artifacts_with_evidence__MW_13_2_a(
    tmp_path: Path,
) -> None:
    w = make_leased_world(tmp_path / "a.db")
    ada = w.workers[0]
    w.uploaded("a", X)
    w.ok(ada, "artifact.publish", w.leased("a", manifest=signed(ada, X).wire()))
    with_x = [{**e, "artifacts": [X]} for e in evidence(ada.agent_id, "a")]
    never = [{**e, "artifacts": [NEVER]} for e in with_x]
    _refused(w, {"artifacts": [NEVER], "evidence": never}, "artifact_not_published", artifact=NEVER)
    _refused(w, {"artifacts": [X], "evidence": evidence(ada.agent_id, "a")},
             "artifact_without_evidence", artifact=X)  # fmt: skip
    # Evidence cites only what is submitted
    _refused(w, {"artifacts": [], "evidence": with_x}, "artifact_not_submitted", artifact=X,
             criterion="hashes")  # fmt: skip
    r = w.submit(ada, "work.submit", w.leased("a", artifacts=[X], evidence=with_x))
    assert r.accepted, r.rejection
    assert r.events[-1].body["artifacts"] == [X]


def test_every_deliverable_is_present__MW_13_2_a(tmp_path: Path) -> None:
    """The contract's deliverable ``report`` (application/json, no schema): an empty submission
    is ``deliverable_missing``; a submitted Artifact of another media type does not stand for
    it; one of its media type, or an output of its name, does."""
    w = make_leased_world(tmp_path / "a.db")
    ada = w.workers[0]
    ev = evidence(ada.agent_id, "a")
    _refused(w, {"evidence": ev}, "deliverable_missing", deliverable="report")
    _refused(w, {"evidence": ev, "outputs": {"other": 1}}, "deliverable_missing")
    text = "ef" * 32
    manifest = signed(ada, text, media_type="text/plain", schema_id=None).wire()
    w.uploaded("a", text)
    w.ok(ada, "artifact.publish", w.leased("a", manifest=manifest))
    with_text = [{**e, "artifacts": [text]} for e in ev]
    _refused(w, {"artifacts": [text], "evidence": with_text}, "deliverable_missing")
    w.uploaded("a", X)
    w.ok(ada, "artifact.publish", w.leased("a", manifest=signed(ada, X).wire()))
    both = [{**e, "artifacts": [text, X]} for e in ev]
    r = w.submit(ada, "work.submit", w.leased("a", artifacts=[text, X], evidence=both))
    assert r.accepted, r.rejection


def test_an_inline_output_is_a_deliverable__MW_13_2_a(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    ev = evidence(w.workers[0].agent_id, "a")
    report = {"report": {"ok": True}}  # non-empty: ``{}`` is no deliverable
    r = w.submit(w.workers[0], "work.submit", w.leased("a", evidence=ev, outputs=report))
    assert r.accepted, r.rejection


def test_another_items_artifact_is_not_this_submissions__MW_13_2_a(tmp_path: Path) -> None:
    """Published under WorkItem a, it cannot be submitted as WorkItem b's output."""
    w = make_leased_world(tmp_path / "a.db")
    ada, bob = w.workers
    w.uploaded("a", X)
    w.ok(ada, "artifact.publish", w.leased("a", manifest=signed(ada, X).wire()))
    w.authorize("b")
    w.lease("b", bob)
    ev = [{**e, "artifacts": [X]} for e in evidence(bob.agent_id, "b")]
    r = w.submit(bob, "work.submit", w.leased("b", artifacts=[X], evidence=ev))
    assert r.rejection is not None and r.rejection.code == "artifact_not_published"


def test_a_late_result_is_checked_before_it_is_recorded__MW_11_5_b(tmp_path: Path) -> None:
    """A former owner's result naming an Artifact never published is refused (nothing
    written); a well-formed one is recorded for audit."""
    w = make_leased_world(tmp_path / "a.db")
    ada = w.workers[0]
    old = w.leased("a")
    w.ok(ada, "work.checkpoint", w.leased("a", checkpoint={"step": 1}))
    w.start(ada, "a")  # a new lease: the old one's results are late
    never = [{**e, "artifacts": [NEVER]} for e in evidence(ada.agent_id, "a")]
    head = w.authority.head(w.group)
    r = w.submit(ada, "work.submit", {**old, "artifacts": [NEVER], "evidence": never})
    assert r.status == "rejected" and r.rejection is not None
    assert r.rejection.code == "artifact_not_published"
    assert w.authority.head(w.group) == head
    r = w.submit(ada, "work.submit", {**old, "evidence": evidence(ada.agent_id, "a")})
    assert r.status == "rejected" and r.rejection is not None
    assert r.rejection.code == "deliverable_missing"
    ok = {**old, "evidence": evidence(ada.agent_id, "a"), "outputs": {"report": {"ok": True}}}
    r = w.submit(ada, "work.submit", ok)
    assert r.status == "recorded" and [e.type for e in r.events] == ["work.late_result_recorded"]
