"""The coordinator's ``charge_parent_usage`` against a real Authority over HTTP, two Groups
(MW-11.5-i, MW-10.4-d): it finds the child's ``mission.usage_forwarded`` Events in the child's
Group and charges each once in the parent's Group; a charge the parent's budget refuses writes
nothing and is returned, not raised. (End to end through the Mission workflow:
``tests/workflows/test_children_cross_group.py``.)"""

from __future__ import annotations

from pathlib import Path

from missionweave.activities import CoordinatorActivities
from missionweave.authority.client import AuthorityClient
from missionweave.protocol.temporal_contract import ChargeParentUsageInput, ParentLink
from tests.authority.test_children import G2, _usage, in_g2
from tests.support.serving import LiveServer
from tests.support.world import World, another_group, basis, evidence, make_world


def _child_charged(path: Path, parent_budget: int, calls: int = 7) -> tuple[World, int]:
    """A World at ``path`` with Mission ``root`` of g1 (budget ``parent_budget`` tool calls)
    and WorkItem ``p``, whose child Mission ``kid`` runs in g2; its WorkItem ``c`` submitted
    ``calls`` tool calls. The World and the sequence number of the one
    ``mission.usage_forwarded`` Event in g2."""
    w = make_world(path)
    coord, worker = w.coordinator, w.workers[0]
    another_group(w, G2, worker=worker, mission=None)
    w.ok(coord, "mission.create", {"mission_id": "root", "budget": {"tool_calls": parent_budget}})
    w.authorize("p", mission="root")
    w.ok(coord, "mission.create_child",
         {"work_item_id": "p", "child_mission_id": "kid", "child_group_id": G2})  # fmt: skip
    link = {"group_id": w.group, "mission_id": "root", "work_item_id": "p"}
    assert in_g2(w, coord, "mission.create", {"mission_id": "kid", "parent": link}).accepted
    contract = w.authorization("c", mission="kid")["contract"]
    item = {"work_item_id": "c", "mission_id": "kid", "contract": contract}
    assert in_g2(w, coord, "work.authorize", item).accepted
    r = in_g2(w, coord, "work.offer", {"work_item_id": "c", "candidates": [worker.agent_id],
              "expires_at_ms": w.clock.now + 30_000,
              "selection_basis": {worker.agent_id: basis(["dist.verify@1.0"])}})  # fmt: skip
    accept = {"work_item_id": "c", "offer_id": r.reply["offer_id"], "revision": 1}
    assert in_g2(w, worker, "work.accept_offer", accept).accepted
    lease = in_g2(w, worker, "work.start", {"work_item_id": "c", "ownership_epoch": 1}).reply[
        "lease"
    ]
    r = in_g2(w, worker, "work.submit", {
        "work_item_id": "c", "lease_id": lease["lease_id"], "ownership_epoch": 1,
        "usage": {"tool_calls": calls}, "evidence": evidence(worker.agent_id, "c"),
        "outputs": {"report": {"files": 1}},
    })  # fmt: skip
    assert r.accepted, r.rejection
    [seq] = [e.seq for e in w.authority.all_events(G2) if e.type == "mission.usage_forwarded"]
    return w, seq


async def _charge(w: World) -> dict[int, str]:
    server = LiveServer(w.authority, poll_interval_s=0.05)
    await server.start()
    try:
        async with AuthorityClient(
            server.url, signing_key=w.coordinator.key, clock=w.clock
        ) as client:
            acts = CoordinatorActivities(client, w.coordinator)
            link = ParentLink(workflow_id="-", group_id=w.group, mission_id="root",
                              work_item_id="p")  # fmt: skip
            res = await acts.charge_parent_usage(
                ChargeParentUsageInput(group_id=G2, mission_id="kid", parent=link)
            )
        return res.outcomes
    finally:
        await server.stop()


async def test_the_parent_is_charged_once_per_forwarded_event__MW_11_5_i__MW_10_4_d(
    tmp_path: Path,
) -> None:
    w, seq = _child_charged(tmp_path / "a.db", parent_budget=100)
    assert await _charge(w) == {seq: "charged"}
    assert _usage(w, w.group, "root")["tool_calls"] == 7  # type: ignore[index]
    assert await _charge(w) == {seq: "already_charged"}
    assert _usage(w, w.group, "root")["tool_calls"] == 7  # type: ignore[index]


async def test_a_charge_over_the_parents_budget_is_reported_not_raised__MW_11_5_j(
    tmp_path: Path,
) -> None:
    w, seq = _child_charged(tmp_path / "a.db", parent_budget=5)
    head = w.authority.head(w.group)
    assert await _charge(w) == {seq: "budget_exceeded"}
    assert w.authority.head(w.group) == head  # nothing written in the parent's Group
