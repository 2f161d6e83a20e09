"""Slot isolation (MW-11.1-e): two WorkItems of two Missions running at once in two slots of one
agent never share their context, credentials (lease, capability token), checkpoints, tool
budgets (usage meters, as charged by the Authority) or side-effect keys."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from pydantic import BaseModel
from temporalio.testing import ActivityEnvironment

from missionweave.authority.client import AuthorityClient
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput, LeaseGrant, OutcomeKind
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.worker._execute import WorkItemExecutor
from missionweave.worker._slots import SlotBoard
from tests.support.contracts import contract
from tests.support.serving import LiveServer
from tests.support.world import World


class Files(BaseModel):
    files: list[str]


@pytest_asyncio.fixture
async def client(live: LiveServer, world: World) -> AsyncIterator[AuthorityClient]:
    async with AuthorityClient(live.url, signing_key=world.workers[0].key) as c:
        yield c


def _granted(w: World, mission: str, wid: str) -> ExecuteWorkItemInput:
    ada = w.workers[0]
    w.mission = mission
    w.authorize(wid)
    assert w.accept(ada, wid, w.offer(wid, ada)).accepted
    item = w.item(wid)
    r = w.ok(ada, "work.start", {"work_item_id": wid, "ownership_epoch": item["ownership_epoch"]})
    lease = {k: v for k, v in r.reply["lease"].items() if k != "renewals"}
    return ExecuteWorkItemInput(
        group_id=w.group,
        mission_id=mission,
        work_item_id=wid,
        contract=contract(),
        input={"files": [f"{wid}.tar"]},
        lease=LeaseGrant(**lease, capability_token=r.reply["capability_token"]),
    )


async def test_two_slots_running_at_once_share_nothing__MW_11_1_e(
    world: World, client: AuthorityClient
) -> None:
    world.ok(world.coordinator, "mission.create", {"mission_id": "m2", "title": "another"})
    works = [_granted(world, "m1", "apollo"), _granted(world, "m2", "zephyr")]
    board = SlotBoard(2)
    both_in = asyncio.Barrier(2)
    seen: dict[str, dict[str, Any]] = {}
    contexts: dict[str, WorkContext] = {}

    async def handler(ctx: WorkContext, inp: Files) -> Submission:
        calls = 1 if ctx.work_item_id == "apollo" else 3
        ctx.usage.add(tool_calls=calls)
        await ctx.save({"done": inp.files})
        await both_in.wait()  # both handlers are running now, each in its slot
        assert len(board.running()) == 2
        contexts[ctx.work_item_id] = ctx
        seen[ctx.work_item_id] = {
            "mission": ctx.mission_id,
            "files": inp.files,
            "checkpoint": ctx.checkpoint,
            "lease": ctx.lease.lease_id,
            "token": dict(ctx.capability_token),
            "tool_calls": ctx.usage.tool_calls,
            "key": ctx.idempotency_key("charge-card"),
            "attempt_key": ctx.attempt_key("charge-card", 1),
            "log": dict(ctx.logger.extra or {}),
        }
        await both_in.wait()  # neither ends before the other has looked
        evidence = [
            ctx.evidence("hashes", method="compare"),
            ctx.evidence("schema", method="schema"),
        ]
        return Submission(outputs={"report": {"n": len(inp.files)}}, evidence=evidence)

    registry = HandlerRegistry()
    registry.handler("dist.verify", version="1.0")(handler)
    executor = WorkItemExecutor(world.workers[0], client, registry, board=board)
    outs = await asyncio.gather(
        *(ActivityEnvironment().run(executor.execute_work_item, w) for w in works)
    )
    assert [o.kind for o in outs] == [OutcomeKind.SUBMITTED, OutcomeKind.SUBMITTED]

    a, z = seen["apollo"], seen["zephyr"]
    assert contexts["apollo"] is not contexts["zephyr"]
    assert contexts["apollo"].usage is not contexts["zephyr"].usage
    assert (a["mission"], z["mission"]) == ("m1", "m2")
    assert (a["files"], z["files"]) == (["apollo.tar"], ["zephyr.tar"])
    assert (a["checkpoint"], z["checkpoint"]) == (
        {"done": ["apollo.tar"]},
        {"done": ["zephyr.tar"]},
    )
    assert a["lease"] != z["lease"]
    assert a["token"] != z["token"] and a["token"]["lease_id"] == a["lease"]
    assert z["token"]["lease_id"] == z["lease"]
    assert (a["tool_calls"], z["tool_calls"]) == (1, 3)  # each slot's own tool budget meter
    assert a["key"] != z["key"] and a["attempt_key"] != z["attempt_key"]
    assert (a["log"]["work_item_id"], z["log"]["work_item_id"]) == ("apollo", "zephyr")
    # the Authority charged each WorkItem its own usage and kept its own checkpoint
    for wid, calls in (("apollo", 1), ("zephyr", 3)):
        item = world.authority.work_item(world.group, wid)
        assert item is not None and item["state"] == "submitted"
        assert f'"tool_calls":{calls}' in item["usage"], item["usage"]
        (other,) = {"apollo", "zephyr"} - {wid}
        assert wid in str(item["checkpoint"]) and other not in str(item["checkpoint"])
