"""The whole cooperative preemption chain on the real Temporal dev server (MW-11.3-g), the
schedule disclosure it produces (MW-11.2-a/b) and a Group priority set in the log reaching the
agent's scheduler (MW-11.1-d).

One agent with one slot works in two Groups. A long WorkItem of Group ``ops`` (the harness's
Group) holds the slot; a WorkItem of Group ``lab`` is accepted and waits. When it has waited the
scheduler's bound, the scheduler asks the long handler to pause → its ``should_pause()`` turns
true → it returns ``ctx.pause(state)`` → ``work.checkpoint`` releases the lease and its slot →
the ``lab`` item starts and completes → the long WorkItem, back in its Group's queue, is started
again from its checkpoint and completes.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.outcome import mission_result
from missionweave.protocol import AgentCard, Event
from missionweave.protocol.temporal_contract import MissionSpec
from missionweave.worker import AgentRuntime, HandlerRegistry, Pause, Submission, WorkContext
from tests.support.mission_harness import MissionStack, contract, mission_stack
from tests.support.waits import WAIT_S, until

LAB = "lab"


def _spec(ms: MissionStack, group: str, mission: str, wid: str, cap: str) -> MissionSpec:
    return MissionSpec.model_validate(
        {
            "group_id": group,
            "mission_id": mission,
            "title": f"test {mission}",
            "items": [{"work_item_id": wid, "contract": contract((cap,)).wire()}],
            "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
        }
    )


def _events(ms: MissionStack, group: str) -> list[Event]:
    auth = ms.stack.authority
    verify_log(auth.store, group, auth.public_key)
    return list(auth.all_events(group))


async def _second_group(ms: MissionStack, agent_id: str, public_key: str) -> None:
    """Group ``lab``: the coordinator owns it; the agent is a worker there too."""
    st, coord = ms.stack, ms.stack.coordinator
    r = await st.client.submit(
        coord.command(
            "group.create",
            LAB,
            {"public_key": coord.public_key, "roles": ["owner", "coordinator", "mission_owner"]},
            issued_at_ms=st.clock(),
        )
    )
    assert r.accepted, r.rejection
    coord.membership_epochs[LAB] = 1
    r = await st.client.submit(
        coord.command(
            "member.add",
            LAB,
            {"agent_id": agent_id, "public_key": public_key, "roles": ["worker"]},
            issued_at_ms=st.clock(),
        )
    )
    assert r.accepted, r.rejection


async def test_the_scheduler_preempts_at_a_checkpoint_and_the_item_resumes__MW_11_3_g(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    order: list[str] = []
    runs: list[dict[str, Any] | None] = []
    reg = HandlerRegistry()

    @reg.handler("demo.long", version="1.0", estimate_ms=1_000)
    async def long(ctx: WorkContext, input: dict[str, Any]) -> Submission | Pause:
        runs.append(ctx.checkpoint)
        if ctx.checkpoint is None:
            order.append("long started")
            while True:  # steps of work; a safe point between two
                if ctx.should_pause():
                    order.append("long paused")
                    return ctx.pause({"progress": 7})
                await asyncio.sleep(0.05)
        order.append("long resumed")
        return Submission(
            outputs={"result": {"resumed_from": ctx.checkpoint["progress"]}},
            evidence=[ctx.evidence("done", method="demo")],
        )

    @reg.handler("demo.quick", version="1.0", estimate_ms=1_000)
    async def quick(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        order.append("quick ran")
        return Submission(
            outputs={"result": {"ok": True}}, evidence=[ctx.evidence("done", method="demo")]
        )

    caps = ("demo.long@1.0", "demo.quick@1.0")
    async with mission_stack(dev_env, tmp_path) as ms:
        actor = await ms.stack.add_agent("ada", capabilities=caps, max_concurrency=1)
        await _second_group(ms, "ada", actor.public_key)
        card = AgentCard(
            agent_id="ada",
            version=2,
            public_key=actor.public_key,
            capabilities=list(caps),
            max_concurrency=1,
        )
        rt = AgentRuntime(
            card,
            actor.key,
            groups=[ms.group, LAB],
            authority_url=ms.stack.url,
            temporal_client=dev_env.client,
            handlers=reg,
            state_path=tmp_path / "ada.sqlite3",
            max_wait=timedelta(seconds=2),
            tick=timedelta(milliseconds=200),
        )
        ms.runtimes.append(rt)
        ms.tasks.append(asyncio.create_task(rt.run()))
        await until("the agent is ready", rt.ready.is_set)
        # the lab Group's priority, set by its owner (policy) in its log, reaches the agent's
        # scheduler as that Group's weight (MW-11.1-d): high (× 2) × 3
        r = await ms.stack.client.submit(
            ms.stack.coordinator.command(
                "group.set_priority",
                LAB,
                {"priority_class": "high", "weight": 3},
                issued_at_ms=ms.stack.clock(),
            )
        )
        assert r.accepted, r.rejection
        await until("the weight is applied", lambda: rt.scheduler.weight(LAB) == 6.0)
        assert rt.scheduler.weight(ms.group) == 1.0

        long_h = await ms.start(_spec(ms, ms.group, "m-long", "long", "demo.long@1.0"))
        await until("the long item runs", lambda: "long started" in order)
        quick_h = await ms.start(_spec(ms, LAB, "m-quick", "quick", "demo.quick@1.0"))

        quick_res = await asyncio.wait_for(mission_result(quick_h), WAIT_S)
        long_res = await asyncio.wait_for(mission_result(long_h), WAIT_S)
        assert (quick_res.status, long_res.status) == ("completed", "completed"), (
            order,
            quick_res.model_dump_json()[:1500],
            long_res.model_dump_json()[:1500],
        )
        assert long_res.items[0].outputs["result"]["resumed_from"] == 7
        # the chain, in order: asked → paused at its checkpoint → slot to the waiting Group's
        # item → the paused item resumed from its checkpoint
        assert order == ["long started", "long paused", "quick ran", "long resumed"]
        assert runs == [None, {"progress": 7}]
        ops = [e for e in _events(ms, ms.group) if e.work_item_id == "long"]
        kinds = [e.type for e in ops]
        assert kinds.count("work.started") == 2 and "work.failed" not in kinds
        first, again = [i for i, k in enumerate(kinds) if k == "work.started"]
        assert first < kinds.index("work.checkpointed") < again < kinds.index("work.submitted")
        assert ops[kinds.index("lease.released")].seq < ops[again].seq  # the slot was freed
        (owner,) = {e.body["owner"] for e in ops if e.type == "work.offer_accepted"}
        assert owner == "ada"  # paused and resumed under the same ownership

        # what the lab Group was told while its item waited: a schedule, and nothing of ops
        lab = _events(ms, LAB)
        told = [e for e in lab if e.type == "work.schedule_disclosed"]
        assert told and told[0].work_item_id == "quick"
        text = json.dumps([e.body for e in told])
        assert not [s for s in (ms.group, "m-long", 'long"') if s in text], text
        window = told[0].body["start_window"]
        assert (
            window["earliest_ms"] <= window["latest_ms"] <= told[0].body["completion_estimate_ms"]
        )
