"""The coordinator's ``charge_parent_usage`` against a real Authority over HTTP, two Groups
(MW-11.5-i, MW-10.4-d): it finds the child's ``mission.usage_forwarded`` Events in the child's
Group and charges each once in the parent's Group, drawn from the allowance the parent's Group
reserved for the child at ``mission.create_child``, which the child's Group enforces: the
child cannot overrun its parent's budget (MW-11.5-j). (End to end through the Mission workflow:
``tests/workflows/test_children_cross_group.py``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from missionweave.activities import CoordinatorActivities
from missionweave.authority import SubmitResult
from missionweave.authority.client import AuthorityClient
from missionweave.protocol.temporal_contract import ChargeParentUsageInput, ParentLink
from tests.authority.test_children import G2, _usage, in_g2
from tests.support.serving import LiveServer
from tests.support.world import World, another_group, basis, evidence, make_world

#: The child's allowance besides tool calls: the parent's budget bounds wall-clock time by
#: default, so an allowance must name it too (``allowance_required``).
WALL = {"wall_clock_ms": 60_000}


def _child_created(path: Path, parent_budget: int, allowance: dict[str, Any]) -> World:
    """A World at ``path`` with Mission ``root`` of g1 (budget ``parent_budget`` tool calls)
    and WorkItem ``p`` blocked for child Mission ``kid`` of g2 with ``allowance``, ``kid``
    created in g2 with its WorkItem ``c`` leased to worker-0 (``w.leases["c"]``)."""
    w = make_world(path)
    coord, worker = w.coordinator, w.workers[0]
    another_group(w, G2, worker=worker, mission=None)
    w.ok(coord, "mission.create", {"mission_id": "root", "budget": {"tool_calls": parent_budget}})
    w.authorize("p", mission="root")
    w.ok(coord, "mission.create_child", {"work_item_id": "p", "child_mission_id": "kid",
         "child_group_id": G2, "allowance": allowance})  # fmt: skip
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
    r = in_g2(w, worker, "work.start", {"work_item_id": "c", "ownership_epoch": 1})
    w.leases["c"] = r.reply["lease"]
    return w


def _submit_in_g2(w: World, calls: int) -> SubmitResult:
    worker, lease = w.workers[0], w.leases["c"]
    return in_g2(w, worker, "work.submit", {
        "work_item_id": "c", "lease_id": lease["lease_id"], "ownership_epoch": 1,
        "usage": {"tool_calls": calls}, "evidence": evidence(worker.agent_id, "c"),
        "outputs": {"report": {"files": 1}},
    })  # fmt: skip


def _child_charged(path: Path, parent_budget: int, calls: int = 7) -> tuple[World, int]:
    """:func:`_child_created` with an allowance of 10 tool calls, whose WorkItem ``c``
    submitted ``calls`` tool calls. The World and the sequence number of the one
    ``mission.usage_forwarded`` Event in g2."""
    w = _child_created(path, parent_budget, {"tool_calls": 10, **WALL})
    r = _submit_in_g2(w, calls)
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
    """The allowance (10 tool calls) is reserved from the parent at ``mission.create_child``;
    the child's forwarded usage (7) is charged once, drawn from that reservation."""
    w, seq = _child_charged(tmp_path / "a.db", parent_budget=100)
    assert _usage(w, w.group, "root")["tool_calls"] == 10  # type: ignore[index]  # reserved
    assert await _charge(w) == {seq: "charged"}
    [ev] = [e for e in w.authority.all_events(w.group) if e.type == "mission.child_usage_charged"]
    assert ev.body["delta"]["tool_calls"] == 7 and ev.body["beyond_allowance"]["tool_calls"] == 0
    assert _usage(w, w.group, "root")["tool_calls"] == 10  # type: ignore[index]
    assert await _charge(w) == {seq: "already_charged"}
    assert _usage(w, w.group, "root")["tool_calls"] == 10  # type: ignore[index]


async def test_a_child_in_another_group_cannot_overrun_its_parents_budget__MW_11_5_j(
    tmp_path: Path,
) -> None:
    """A parent of 5 tool calls can give its child in another Group at most 5 (more is refused
    ``budget_exceeded`` in the parent's Group, none is refused ``allowance_required``); the
    child's Group holds the child to it: a submission of 7 tool calls is refused
    ``budget_exceeded`` there, naming the child Mission, writing nothing, and nothing is
    forwarded — the parent's usage never passes its budget."""
    for allowance, code in (({"tool_calls": 6, **WALL}, "budget_exceeded"),
                            (WALL, "allowance_required"), ({}, "allowance_required")):  # fmt: skip
        w = make_world(tmp_path / f"{code}-{len(allowance)}.db")
        another_group(w, G2, worker=w.workers[0], mission=None)
        w.ok(w.coordinator, "mission.create", {"mission_id": "root", "budget": {"tool_calls": 5}})
        w.authorize("p", mission="root")
        body = {"work_item_id": "p", "child_mission_id": "kid", "child_group_id": G2}
        w.judged(code, w.coordinator, "mission.create_child", {**body, "allowance": allowance})
    w = _child_created(tmp_path / "a.db", 5, {"tool_calls": 5, **WALL})
    assert _usage(w, w.group, "root")["tool_calls"] == 5  # type: ignore[index]
    head = w.authority.head(G2)
    r = _submit_in_g2(w, 7)
    assert r.rejection is not None and r.rejection.code == "budget_exceeded", r.rejection
    assert (r.rejection.detail["scope"], r.rejection.detail["mission_id"]) == ("mission", "kid")
    assert w.authority.head(G2) == head
    assert await _charge(w) == {}  # nothing forwarded
    r = _submit_in_g2(w, 5)  # within the allowance
    assert r.accepted, r.rejection
    [seq] = [e.seq for e in w.authority.all_events(G2) if e.type == "mission.usage_forwarded"]
    assert await _charge(w) == {seq: "charged"}
    assert _usage(w, w.group, "root")["tool_calls"] == 5  # type: ignore[index]
