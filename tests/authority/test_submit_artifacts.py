"""A submission names Artifacts that exist: each was published in this WorkItem's conversation
(or promoted in the Group) and Evidence references it (MW-13.2-a/c). A refusal writes
nothing."""

from __future__ import annotations

from pathlib import Path

from tests.artifact_servers import signed
from tests.world import evidence, make_leased_world

X = "ab" * 32  # published under WorkItem a's lease
NEVER = "cd" * 32  # never published anywhere


def test_a_submission_names_only_published_artifacts_with_evidence__MW_13_2_a(
    tmp_path: Path,
) -> None:
    w = make_leased_world(tmp_path / "a.db")
    ada = w.workers[0]
    w.ok(ada, "artifact.publish", w.leased("a", manifest=signed(ada, X).wire()))
    with_x = [{**e, "artifacts": [X]} for e in evidence(ada.agent_id, "a")]
    head = w.authority.head(w.group)
    for artifacts, ev, code in (
        ([NEVER], [{**e, "artifacts": [NEVER]} for e in with_x], "artifact_not_published"),
        ([X], evidence(ada.agent_id, "a"), "artifact_without_evidence"),
    ):
        r = w.submit(ada, "work.submit", w.leased("a", artifacts=artifacts, evidence=ev))
        assert r.rejection is not None and r.rejection.code == code, r.rejection
        assert r.rejection.detail["artifact"] == artifacts[0]
        assert w.authority.head(w.group) == head
    r = w.submit(ada, "work.submit", w.leased("a", artifacts=[X], evidence=with_x))
    assert r.accepted, r.rejection
    assert r.events[-1].body["artifacts"] == [X]


def test_another_items_artifact_is_not_this_submissions__MW_13_2_a(tmp_path: Path) -> None:
    """Published under WorkItem a, it cannot be submitted as WorkItem b's output."""
    w = make_leased_world(tmp_path / "a.db")
    ada, bob = w.workers
    w.ok(ada, "artifact.publish", w.leased("a", manifest=signed(ada, X).wire()))
    w.authorize("b")
    w.lease("b", bob)
    ev = [{**e, "artifacts": [X]} for e in evidence(bob.agent_id, "b")]
    r = w.submit(bob, "work.submit", w.leased("b", artifacts=[X], evidence=ev))
    assert r.rejection is not None and r.rejection.code == "artifact_not_published"
