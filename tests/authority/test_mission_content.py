"""Another Mission's content does not enter a Mission by default (MW-13.3-d): every place an
Artifact hash enters a Mission — a contract's ``inputs`` (``work.propose``, ``work.authorize``,
a revised contract in ``work.offer``), a submission's ``artifacts`` and its Evidence's
``artifacts`` (``work.submit``, ``work.fail``) — is checked like manifest sources and Context
Packages: published in this Mission or promoted, else ``cross_mission_content``, writing
nothing."""

from __future__ import annotations

from pathlib import Path

from missionweave.authority import SubmitResult
from tests.support.artifact_servers import signed
from tests.support.contracts import contract
from tests.support.world import World, evidence, make_leased_world

X = "ab" * 32  # published in Mission m1 by item a
EXTERNAL = "cd" * 32  # never published: an external input, no Mission's content


def _world(tmp_path: Path) -> World:
    """m1: item ``a`` leased to worker-0, which published X; m2: an empty Mission."""
    w = make_leased_world(tmp_path / "a.db")
    w.uploaded("a", X)
    w.ok(w.workers[0], "artifact.publish", w.leased("a", manifest=signed(w.workers[0], X).wire()))
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2", "title": "another"})
    return w


def _refused(w: World, r: SubmitResult, head: tuple[int, str]) -> None:
    assert r.status == "rejected" and r.rejection is not None, r
    assert r.rejection.code == "cross_mission_content", r.rejection
    assert r.rejection.detail["artifact_hash"] == X
    assert "m1" not in str(r.rejection.detail.values())  # the home Mission is not disclosed
    assert w.authority.head(w.group) == head  # nothing written


def test_contract_inputs_of_another_mission_refused__MW_13_3_d(tmp_path: Path) -> None:
    w = _world(tmp_path)
    head = w.authority.head(w.group)
    for kind in ("work.authorize", "work.propose"):
        body = w.authorization("b", mission="m2", inputs=["report.json", X])
        _refused(w, w.submit(w.coordinator, kind, body), head)
    # an external input and m1's own content are fine
    w.ok(w.coordinator, "work.authorize", w.authorization("b", mission="m2", inputs=[EXTERNAL]))
    w.ok(w.coordinator, "work.authorize", w.authorization("c", inputs=[X]))


def test_revised_contract_inputs_of_another_mission_refused__MW_13_3_d(tmp_path: Path) -> None:
    w = _world(tmp_path)
    w.ok(w.coordinator, "work.authorize", w.authorization("b", mission="m2"))
    head = w.authority.head(w.group)
    revised = contract(inputs=[X], revision=2).wire()
    r = w.submit(w.coordinator, "work.offer", w.offer_body("b", "worker-1", contract=revised))
    _refused(w, r, head)


def test_outputs_of_another_mission_refused__MW_13_3_d(tmp_path: Path) -> None:
    w = _world(tmp_path)
    w.ok(w.coordinator, "work.authorize", w.authorization("b", mission="m2"))
    worker = w.workers[1]
    w.lease("b", worker)
    head = w.authority.head(w.group)
    ev = evidence(worker.agent_id, "b")
    r = w.submit(worker, "work.submit", w.leased("b", evidence=ev, artifacts=[X]))
    _refused(w, r, head)
    cited = [{**e, "artifacts": [X]} for e in ev]
    r = w.submit(worker, "work.submit", w.leased("b", evidence=cited))
    _refused(w, r, head)
    r = w.submit(worker, "work.fail", w.leased("b", evidence=cited))
    _refused(w, r, head)
    # promoted, it may enter: the transfer is the verifiable artifact.promoted Event
    w.ok(w.coordinator, "artifact.promote", {"artifact_hash": X, "classification": "internal"})
    w.ok(worker, "work.submit", w.leased("b", evidence=cited, artifacts=[X], outputs={"report": X}))
