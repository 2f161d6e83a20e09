"""A child Mission in another Group charges its real parent, end to end (MW-11.5-i, MW-10.4-d):
on the REAL Temporal dev server with a real Authority, coordinator and agent runtime.

The parent Mission ``root`` runs in Group g1 with a budget; its WorkItem ``p`` is carried out
by the child Mission ``kid`` in Group g2, whose one WorkItem an agent that is a member of g2
only executes, charging tool calls. The Authority charges the child's ancestry inside g2 and
stops at the Group's edge with ``mission.usage_forwarded`` (no cross-Group transaction); the
coordinator then charges the parent in g1 with ``mission.charge_child_usage`` citing those
Events, before the parent hears of the child's outcome — drawn from the allowance (the child's
own budget) reserved from the parent's budget at ``mission.create_child``, which g2 enforces.
A Mission of g2 that happens to be named ``root`` is charged nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from missionweave.activities import CoordinatorActivities
from missionweave.authority import verify_log
from missionweave.dev import OWNER_ROLES, enroll, ensure_group
from missionweave.protocol import Actor
from missionweave.protocol.temporal_contract import ChargeParentUsageInput, ParentLink
from missionweave.worker import AgentRuntime, HandlerRegistry, Submission, WorkContext
from tests.support.mission_harness import (
    MissionStack,
    agent_card,
    contract,
    mission_stack,
    submission,
)
from tests.support.mission_outcome import result, states
from tests.workflows.test_mission_paths_plan import child_result

G2 = "g2"
#: Tool calls the child's WorkItem charges.
CALLS = 7
#: The child's allowance (its own budget), reserved from the parent's 100 tool calls.
ALLOWANCE = 20


def _charging() -> HandlerRegistry:
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        ctx.usage.add(tool_calls=CALLS)  # charged with the submission
        await ctx.guard()
        return submission(ctx)

    return reg


async def _agent_in_g2(ms: MissionStack, agent_id: str) -> None:
    """An agent runtime that is a member of g2 only (it opens its session and publishes its
    card itself)."""
    stack = ms.stack
    actor = Actor.generate(agent_id)
    await enroll(stack.client, stack.coordinator, G2, actor, ("worker",), clock=stack.clock)
    card = agent_card(actor, version=1)
    rt = AgentRuntime(
        card,
        actor.key,
        groups=[G2],
        authority_url=stack.url,
        temporal_client=ms.env.client,
        handlers=_charging(),
        state_path=ms.tmp / f"{agent_id}.sqlite3",
        clock=ms.clock,
    )
    ms.runtimes.append(rt)
    ms.tasks.append(asyncio.create_task(rt.run()))


def _usage(ms: MissionStack, group: str, mission: str) -> dict[str, int] | None:
    rows = ms.stack.authority.query(
        "SELECT usage FROM mission_usage WHERE group_id=? AND mission_id=?", group, mission
    )
    return json.loads(rows[0]["usage"]) if rows and rows[0]["usage"] else None


async def test_a_child_in_another_group_charges_its_real_parent__MW_11_5_i__MW_10_4_d(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        stack = ms.stack
        await ensure_group(stack.client, stack.coordinator, G2, OWNER_ROLES, clock=stack.clock)
        # an unrelated Mission of g2 under the parent's id, which must not be charged
        await stack.client.submit(
            stack.coordinator.command(
                "mission.create", G2, {"mission_id": "root", "budget": {"tool_calls": 100}},
                issued_at_ms=stack.clock(),
            )
        )  # fmt: skip
        await _agent_in_g2(ms, "gina")
        kid = {
            "group_id": G2,
            "mission_id": "kid",
            "title": "the child in g2",
            "items": [{"work_item_id": "c1", "contract": contract().wire()}],
            "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
            "budget": {"tool_calls": ALLOWANCE},  # reserved from root's budget (MW-11.5-j)
        }
        spec = ms.spec(
            "root",
            [{"work_item_id": "p", "contract": contract().wire(), "child_mission": kid}],
            budget={"tool_calls": 100},
        )
        res = await result(await ms.start(spec))
        assert res.status == "completed", res.reason
        assert states(res.items) == {"p": "verified"}
        assert (await child_result(dev_env, "kid")).status == "completed"

        auth = stack.authority
        for g in (ms.group, G2):
            verify_log(auth.store, g, auth.public_key)
        g1_log, g2_log = auth.all_events(ms.group), auth.all_events(G2)
        forwarded = [e for e in g2_log if e.type == "mission.usage_forwarded"]
        assert forwarded, "the child's usage never left its Group"
        assert {e.body["child_mission_id"] for e in forwarded} == {"kid"}
        assert {(e.body["parent"]["group_id"], e.body["parent"]["mission_id"])
                for e in forwarded} == {(ms.group, "root")}  # fmt: skip
        assert sum(e.body["delta"]["tool_calls"] for e in forwarded) == CALLS
        charged = [e for e in g1_log if e.type == "mission.child_usage_charged"]
        sources = [{"group_id": G2, "seq": e.seq, "hash": e.hash} for e in forwarded]
        assert [e.body["source"] for e in charged] == sources
        # the parent's budget holds the child's allowance, which its usage was drawn from;
        # g2's unrelated "root" none of it
        (created,) = [e for e in g1_log if e.type == "mission.child_created"]
        assert created.body["allowance"]["tool_calls"] == ALLOWANCE
        assert (_usage(ms, ms.group, "root") or {}).get("tool_calls") == ALLOWANCE
        assert sum(e.body["beyond_allowance"]["tool_calls"] for e in charged) == 0
        assert (_usage(ms, G2, "root") or {}).get("tool_calls", 0) == 0
        assert (_usage(ms, G2, "kid") or {}).get("tool_calls") == CALLS
        # charged before the parent heard of the outcome
        approved = next(e for e in g1_log if e.type == "mission.child_approved")
        assert all(e.seq < approved.seq for e in charged)

        # charging again changes nothing: each forwarded Event is applied once
        acts = CoordinatorActivities(stack.client, stack.coordinator)
        link = ParentLink(workflow_id="-", group_id=ms.group, mission_id="root", work_item_id="p")
        again = await acts.charge_parent_usage(
            ChargeParentUsageInput(group_id=G2, mission_id="kid", parent=link)
        )
        assert set(again.outcomes.values()) == {"already_charged"}
        assert sorted(again.outcomes) == [e.seq for e in forwarded]
        assert (_usage(ms, ms.group, "root") or {}).get("tool_calls") == ALLOWANCE
