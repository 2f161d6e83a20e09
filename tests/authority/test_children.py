"""Child Missions on a real Authority: only the child ``mission.create_child`` named moves its
parent WorkItem (MW-10.2-c), the parent link names the parent's Group and is verified, and
budget charges follow it across Groups by a verifiable Event (MW-10.4-d, MW-11.5-i)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from missionweave.authority import SubmitResult, verify_log
from missionweave.protocol import Actor
from tests.support.world import World, another_group, basis, evidence, make_leased_world, make_world

G2 = "g2"


def _child_approval(w: World, wid: str, child: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"work_item_id": wid, "evidence": evidence("coordinator", wid)}
    if child is not None:
        body["child_mission_id"] = child
    return body


def _usage(w: World, group: str, mission: str) -> dict[str, int] | None:
    rows = w.authority.query(
        "SELECT usage FROM mission_usage WHERE group_id=? AND mission_id=?", group, mission
    )
    return json.loads(rows[0]["usage"]) if rows else None


def test_child_approval_moves_only_the_item_blocked_for_that_child__MW_10_2_c(
    tmp_path: Path,
) -> None:
    w = make_leased_world(tmp_path / "a.db")
    worker = w.workers[0]
    # a Worker's own block: no child Mission at all
    w.ok(
        worker,
        "work.block",
        w.leased("a", resolution={"needs": "credentials"}, checkpoint={"step": 1}),
    )
    blocked_lease = w.item("a")
    for child in (None, "never-created"):
        for kind, extra in (
            ("mission.child_approved", {}),
            ("mission.child_failed", {"policy": "fail"}),
        ):
            r = w.submit(w.coordinator, kind, {**_child_approval(w, "a", child), **extra})
            assert r.status == "rejected", (kind, child)
            assert r.rejection is not None
            assert r.rejection.code == ("unknown_child" if child else "invalid_body")
    assert w.item("a") == blocked_lease  # still blocked, its blocked lease untouched
    assert [
        x["status"] for x in w.authority.query("SELECT status FROM leases WHERE kind='blocked'")
    ] == ["active"]

    # blocked by mission.create_child: not before the child Mission exists and completed
    w.authorize("b")
    w.offer("b", worker)
    w.ok(w.coordinator, "mission.create_child", {"work_item_id": "b", "child_mission_id": "kid"})
    assert w.item("b")["owner"] is None
    r = w.submit(w.coordinator, "mission.child_approved", _child_approval(w, "b", "kid"))
    assert r.rejection is not None and r.rejection.code == "child_not_completed"
    r = w.submit(w.coordinator, "mission.child_approved", _child_approval(w, "b", "other"))
    assert r.rejection is not None and r.rejection.code == "unknown_child"
    parent = {"group_id": w.group, "mission_id": w.mission, "work_item_id": "b"}
    w.ok(w.coordinator, "mission.create", {"mission_id": "kid", "title": "k", "parent": parent})
    r = w.submit(w.coordinator, "mission.child_failed", {"work_item_id": "b",
                 "child_mission_id": "kid", "policy": "fail"})  # fmt: skip
    assert r.rejection is not None and r.rejection.code == "child_not_failed"  # it runs
    w.authorize("kc", mission="kid")
    w.run_to_verified("kc", worker)
    w.ok(w.coordinator, "mission.complete", {"mission_id": "kid"})
    w.ok(w.coordinator, "mission.child_approved", _child_approval(w, "b", "kid"))
    assert w.item("b")["state"] == "verified"
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_parent_link_is_verified_at_child_creation__MW_10_4_d(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("p")
    good = {"group_id": w.group, "mission_id": w.mission, "work_item_id": "p"}
    # the WorkItem is not blocked for this child: any parent is refused
    for parent in (
        good,
        {**good, "work_item_id": "nope"},
        {"mission_id": "m1", "work_item_id": "p"},
    ):
        r = w.submit(w.coordinator, "mission.create", {"mission_id": "kid", "parent": parent})
        assert r.status == "rejected", parent
        assert r.rejection is not None
        assert r.rejection.code in ("invalid_parent", "invalid_body"), r.rejection
    w.ok(w.coordinator, "mission.create_child",
         {"work_item_id": "p", "child_mission_id": "kid", "child_group_id": G2})  # fmt: skip
    # named for Group g2: a child of that name in this Group is not the linked one
    r = w.submit(w.coordinator, "mission.create", {"mission_id": "kid", "parent": good})
    assert r.rejection is not None and r.rejection.code == "invalid_parent"


def in_g2(w: World, actor: Actor, type: str, body: dict[str, Any]) -> SubmitResult:
    return w.authority.submit(actor.command(type, G2, body, issued_at_ms=w.clock.now))


def test_child_in_another_group_charges_its_real_parent__MW_11_5_i__MW_10_4_d(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    coord, worker = w.coordinator, w.workers[0]
    another_group(w, G2, worker=worker, mission=None)
    budget = {"tool_calls": 1000}
    # g2 has an unrelated Mission under the parent's id, with a budget of its own
    assert in_g2(w, coord, "mission.create", {"mission_id": w.mission, "budget": budget}).accepted
    w.authorize("p")
    w.ok(coord, "mission.create_child",
         {"work_item_id": "p", "child_mission_id": "kid", "child_group_id": G2})  # fmt: skip
    link = {"group_id": w.group, "mission_id": w.mission, "work_item_id": "p"}
    r = in_g2(w, coord, "mission.create", {"mission_id": "kid", "parent": link})
    assert r.accepted, r.rejection
    [created] = r.events
    anchor = created.body["parent"]["anchor"]
    [cited] = [e for e in w.authority.all_events(w.group) if e.seq == anchor["seq"]]
    assert cited.type == "mission.child_created" and cited.hash == anchor["hash"]

    # a WorkItem of the child Mission, run in g2 with some usage
    contract = w.authorization("c", mission="kid")["contract"]
    item = {"work_item_id": "c", "mission_id": "kid", "contract": contract}
    assert in_g2(w, coord, "work.authorize", item).accepted
    chosen = {worker.agent_id: basis(["dist.verify@1.0"])}
    r = in_g2(w, coord, "work.offer", {"work_item_id": "c", "candidates": [worker.agent_id],
              "expires_at_ms": w.clock.now + 30_000, "selection_basis": chosen})  # fmt: skip
    assert r.accepted, r.rejection
    r = in_g2(w, worker, "work.accept_offer",
              {"work_item_id": "c", "offer_id": r.reply["offer_id"], "revision": 1})  # fmt: skip
    assert r.accepted, r.rejection
    r = in_g2(w, worker, "work.start", {"work_item_id": "c", "ownership_epoch": 1})
    assert r.accepted, r.rejection
    lease = r.reply["lease"]
    r = in_g2(w, worker, "work.submit", {
        "work_item_id": "c", "lease_id": lease["lease_id"], "ownership_epoch": 1,
        "usage": {"tool_calls": 7}, "evidence": evidence(worker.agent_id, "c"),
        "outputs": {"report": {"files": 1, "mismatches": 0}},
    })  # fmt: skip
    assert r.accepted, r.rejection

    assert _usage(w, G2, w.mission)["tool_calls"] == 0  # type: ignore[index]  # unrelated
    [forwarded] = [e for e in r.events if e.type == "mission.usage_forwarded"]
    assert forwarded.group_id == G2 and forwarded.body["parent"]["group_id"] == w.group
    assert forwarded.body["delta"]["tool_calls"] == 7

    # the parent's Group is charged by its own Command citing that Event, once
    source = {"group_id": G2, "seq": forwarded.seq, "hash": forwarded.hash}
    bad = w.submit(coord, "mission.charge_child_usage", {"source": {**source, "hash": "0" * 64}})
    assert bad.rejection is not None and bad.rejection.code == "unknown_source"
    ok = w.ok(coord, "mission.charge_child_usage", {"source": source})
    assert [e.type for e in ok.events] == ["mission.child_usage_charged"]
    again = w.submit(coord, "mission.charge_child_usage", {"source": source})
    assert again.rejection is not None and again.rejection.code == "already_charged"
    for g in (w.group, G2):
        verify_log(w.authority.store, g, w.authority.public_key)


def test_child_charge_reaches_its_parent_in_the_same_group__MW_11_5_i(tmp_path: Path) -> None:
    """Within one Group the whole ancestry is charged in the Command's transaction."""
    w = make_world(tmp_path / "a.db")
    w.ok(w.coordinator, "mission.create", {"mission_id": "root", "budget": {"tool_calls": 50}})
    w.authorize("p", mission="root")
    w.ok(w.coordinator, "mission.create_child", {"work_item_id": "p", "child_mission_id": "kid"})
    link = {"group_id": w.group, "mission_id": "root", "work_item_id": "p"}
    w.ok(w.coordinator, "mission.create", {"mission_id": "kid", "parent": link})
    w.ok(w.coordinator, "work.authorize", w.authorization("c", mission="kid"))
    w.lease("c", w.workers[0])
    w.ok(w.workers[0], "work.submit", w.leased("c", usage={"tool_calls": 9},
         **w.report("c", w.workers[0])))  # fmt: skip
    assert _usage(w, w.group, "root")["tool_calls"] == 9  # type: ignore[index]


HUMAN = [
    {"id": "hashes", "description": "every file matches", "evidence_required": "compare"},
    {"id": "signoff", "kind": "human", "description": "the owner signs it off",
     "evidence_required": "an Approval"},
]  # fmt: skip


def _child_done(w: World, parent: str, kid: str, *, human: bool) -> dict[str, Any]:
    """Block ``parent`` (Mission ``root``) for child Mission ``kid``, run one WorkItem of
    ``kid`` to verified (its contract with a ``human`` criterion, granted by the MissionOwner,
    when ``human``) and complete ``kid``. The child WorkItem's submission (its Evidence
    cites its report Artifact)."""
    worker = w.workers[0]
    w.ok(w.coordinator, "mission.create_child", {"work_item_id": parent, "child_mission_id": kid})
    link = {"group_id": w.group, "mission_id": "root", "work_item_id": parent}
    w.ok(w.coordinator, "mission.create", {"mission_id": kid, "parent": link})
    wid = f"{kid}-w"
    over: dict[str, Any] = {"acceptance_criteria": HUMAN} if human else {}
    w.ok(w.coordinator, "work.authorize", w.authorization(wid, mission=kid, **over))
    w.lease(wid, worker)
    sub = w.report(wid, worker)
    w.ok(worker, "work.submit", w.leased(wid, **sub))
    if human:
        w.ok(w.coordinator, "approval.grant_result",
             {"work_item_id": wid, "review_digest": "ab" * 32})  # fmt: skip
    w.ok(w.coordinator, "work.accept_result", {"work_item_id": wid})
    w.ok(w.coordinator, "mission.complete", {"mission_id": kid})
    return sub


def test_a_child_result_is_held_to_accept_results_rules__MW_10_2_c(tmp_path: Path) -> None:
    """A parent WorkItem with a ``human`` criterion becomes ``verified`` through its child
    Mission only as ``work.accept_result`` would verify it: the child did work, a MissionOwner
    approved it, the Evidence answers every criterion and cites no other Mission's Artifact.
    Each refusal writes nothing."""
    w = make_world(tmp_path / "a.db")
    coord = w.coordinator
    w.ok(coord, "mission.create", {"mission_id": "root", "title": "root"})
    w.ok(coord, "work.authorize", w.authorization("p", mission="root", acceptance_criteria=HUMAN))
    w.authorize("other")  # a WorkItem of Mission m1, not related to root
    w.run_to_verified("other", w.workers[1])
    foreign = w.authority.query(
        "SELECT artifact_hash FROM artifacts WHERE mission_id=?", w.mission
    )[0]["artifact_hash"]

    def approval(kid: str, ev: list[dict[str, Any]]) -> dict[str, Any]:
        return {"work_item_id": "p", "child_mission_id": kid, "evidence": ev}

    full = evidence("coordinator", "p", ("hashes", "signoff"))
    # a child that completed with no work at all
    w.ok(coord, "mission.create_child", {"work_item_id": "p", "child_mission_id": "idle"})
    link = {"group_id": w.group, "mission_id": "root", "work_item_id": "p"}
    w.ok(coord, "mission.create", {"mission_id": "idle", "parent": link})
    w.ok(coord, "mission.complete", {"mission_id": "idle"})
    w.judged("child_not_completed", coord, "mission.child_approved", approval("idle", full))
    # a child whose work nobody approved
    _child_done(w, "p", "unapproved", human=False)
    w.judged("approval_required", coord, "mission.child_approved", approval("unapproved", full))
    # an approved child: the Evidence must answer every criterion, citing no other Mission
    sub = _child_done(w, "p", "kid", human=True)
    [own] = sub["artifacts"]
    partial = evidence("coordinator", "p", ("hashes",))
    w.judged("evidence_missing", coord, "mission.child_approved", approval("kid", partial))
    stolen = [{**e, "artifacts": [foreign]} for e in full]
    w.judged("cross_mission_content", coord, "mission.child_approved", approval("kid", stolen))
    assert w.item("p")["state"] == "blocked"
    cites_child = [{**e, "artifacts": [own]} for e in full]
    w.judged(None, coord, "mission.child_approved", approval("kid", cites_child))
    assert w.item("p")["state"] == "verified"
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_the_parent_links_mission_id_is_checked__MW_10_4_d(tmp_path: Path) -> None:
    """A child's parent link names the right Group and WorkItem but another Mission: refused
    ``invalid_parent`` (the WorkItem is not that Mission's), writing nothing."""
    w = make_world(tmp_path / "a.db")
    w.ok(w.coordinator, "mission.create", {"mission_id": "elsewhere", "title": "another"})
    w.authorize("p")
    w.ok(w.coordinator, "mission.create_child", {"work_item_id": "p", "child_mission_id": "kid"})
    good = {"group_id": w.group, "mission_id": w.mission, "work_item_id": "p"}
    for wrong in ("elsewhere", "no-such-mission"):
        w.judged("invalid_parent", w.coordinator, "mission.create",
                 {"mission_id": "kid", "parent": {**good, "mission_id": wrong}})  # fmt: skip
    w.judged(None, w.coordinator, "mission.create", {"mission_id": "kid", "parent": good})
