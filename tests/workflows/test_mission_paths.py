"""Failure and control paths of the Mission workflow end to end, on the REAL Temporal dev server
with real agent runtimes and a real Authority: pause/resume, block/unblock, cancel, and a lease
timeout with reassignment and a late result (docs/design.md §4 "Failure paths")."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from missionweave.protocol.temporal_contract import (
    CancelInput,
    UnblockInput,
)
from missionweave.worker import AgentRuntime, HandlerRegistry, Pause, Submission, WorkContext
from missionweave.workflows import MissionWorkflow
from tests.support.mission_harness import (
    SHORT_LEASE,
    MissionStack,
    agent_card,
    contract,
    mission_stack,
    submission,
    work_items,
)
from tests.support.mission_outcome import ending, item, result, states, types, wait_status
from tests.support.waits import WAIT_S

# ------------------------------------------------------------------------------ status


async def test_status_shows_outputs_and_a_current_detail(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The ``status`` query (``mission status``) carries each WorkItem's outputs, not only the
    workflow's result, and its detail says what the WorkItem is now."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        await ctx.guard()
        return submission(ctx, files=132)

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        spec = ms.spec("status1", work_items({"a": []}))
        handle = await ms.start(spec)
        assert (await result(handle)).status == "completed"
        st = await handle.query(MissionWorkflow.status)
        (a,) = st.items
        assert a.outputs == {"result": {"item": "a", "files": 132}}
        assert a.outputs_omitted_bytes == 0
        assert (a.state.value, a.detail) == ("verified", "verified")


# -------------------------------------------------------------------------- pause/resume


async def test_pause_then_resume_from_checkpoint__MW_11_3_g(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A handler checkpoints and pauses on its first run; the WorkItem re-enters its queue and
    the next run resumes from the checkpoint (cooperative preemption, MW-11.3-g)."""
    seen: list[tuple[int, dict[str, Any] | None]] = []
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission | Pause:
        seen.append((ctx.ownership_epoch, ctx.checkpoint))
        if ctx.checkpoint is None:
            await ctx.save({"done": 1})
            return ctx.pause({"done": 2})
        await ctx.guard()
        return submission(ctx, resumed_from=ctx.checkpoint["done"])

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("pause1", work_items({"a": []})))
        res = await result(handle)
        (a,) = res.items
        assert (res.status, a.state.value) == ("completed", "verified")
        assert a.outputs["result"]["resumed_from"] == 2
        # Both runs under the same ownership: pausing keeps the owner (spec 10.2 checkpoint).
        assert seen == [(1, None), (1, {"done": 2})]
        assert (a.owner, a.ownership_epoch, a.attempts) == ("ada", 1, 0)
        log = types(ms.events("a"))
        assert log.count("work.started") == 2
        assert log.index("work.checkpointed") < log.index("work.submitted")
        assert "work.failed" not in log


# --------------------------------------------------------------------------- block/unblock


async def test_block_then_unblock_resumes_from_checkpoint__MW_11_4_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``ctx.block`` checkpoints and names the resolution; the Mission shows the item blocked;
    the ``unblock`` Update puts it back in the owner's queue and the owner resumes from the
    checkpoint (MW-11.4-c, spec 10.2 ``work.block`` / ``work.unblock``)."""
    seen: list[dict[str, Any] | None] = []
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        seen.append(ctx.checkpoint)
        if ctx.checkpoint is None:
            ctx.block({"needs": "credentials"}, {"phase": "waiting", "rows": 7})
        await ctx.guard()
        return submission(ctx, rows=ctx.checkpoint["rows"])

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("block1", work_items({"a": []})))
        st = await wait_status(handle, lambda s: item(s, "a").state.value == "blocked")
        assert st.status == "running"
        assert item(st, "a").owner == "ada"
        blocked = [e for e in ms.events("a") if e.type == "work.blocked"]
        assert [e.body["resolution"] for e in blocked] == [{"needs": "credentials"}]

        verdict = await handle.execute_update(
            MissionWorkflow.unblock,
            UnblockInput(work_item_id="a", resolution={"credentials": "vault:ref/7"}),
        )
        assert verdict.accepted, verdict
        (unblocked,) = [e.body for e in verdict.events if e.type == "work.unblocked"]
        assert unblocked["state"] == "queued"
        assert unblocked["resolution"] == {"credentials": "vault:ref/7"}

        res = await result(handle)
        assert res.status == "completed"
        (a,) = res.items
        assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", "ada", 1)
        assert a.outputs["result"]["rows"] == 7
        assert seen == [None, {"phase": "waiting", "rows": 7}]
        log = types(ms.events("a"))
        assert log.index("work.blocked") < log.index("work.unblocked") < log.index("work.submitted")


# ---------------------------------------------------------------------------------- cancel


async def test_cancel_cancels_every_unfinished_item__spec_10_2_mission_cancelled(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The ``cancel`` Update on a Mission with running, queued-behind and verified items:
    every unfinished WorkItem is cancelled in the Authority (spec 10.2, last row), the running
    handlers are stopped, the verified item stays verified and the result is ``cancelled``."""
    running: set[str] = set()
    stopped: set[str] = set()
    all_stopped = asyncio.Event()
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        if not input.get("wait"):
            return submission(ctx)
        running.add(ctx.work_item_id)
        try:
            await asyncio.Event().wait()  # until cancelled; the runtime keeps the lease
        except asyncio.CancelledError:
            stopped.add(ctx.work_item_id)
            if stopped == {"slow1", "slow2"}:
                all_stopped.set()
            raise
        raise AssertionError("unreachable")

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        await ms.agent("bob", reg)
        c = contract().wire()
        spec = ms.spec(
            "cancel1",
            [
                {"work_item_id": "fast", "contract": c},
                {"work_item_id": "slow1", "contract": c, "input": {"wait": True}},
                {"work_item_id": "slow2", "contract": c, "input": {"wait": True}},
                {"work_item_id": "after", "contract": c, "dependencies": ["slow1"]},
            ],
        )
        handle = await ms.start(spec)
        await ms.wait_state("slow1", "active")
        await ms.wait_state("slow2", "active")
        st = await wait_status(handle, lambda s: item(s, "fast").state.value == "verified")
        assert item(st, "after").state.value == "open"

        assert (
            await handle.execute_update(MissionWorkflow.cancel, CancelInput(reason="operator stop"))
            == "cancelled"
        )
        res = await result(handle)
        assert res.status == "cancelled"
        cancelled = dict.fromkeys(["slow1", "slow2", "after"], "cancelled")
        assert states(res.items) == {"fast": "verified", **cancelled}
        # Temporal marks Canceled only on its own cancel request (a workflow cannot request
        # its own): Failed, with MissionCancelled and the result in its details (issue 11.1)
        end = await ending(handle)
        assert (end.status, end.failure, end.non_retryable) == ("FAILED", "MissionCancelled", True)
        assert (end.mission_status, end.open_items) == ("cancelled", 0)

        auth = ms.stack.authority
        for wid, state in [
            ("fast", "verified"),
            ("slow1", "cancelled"),
            ("slow2", "cancelled"),
            ("after", "cancelled"),
        ]:
            row = auth.work_item(ms.group, wid)
            assert row is not None and row["state"] == state, (wid, row)
        log = ms.events()
        cancelled = {e.work_item_id: e.body for e in log if e.type == "work.cancelled"}
        assert cancelled == {
            w: {"state": "cancelled", "reason": "mission_cancelled"}
            for w in ("slow1", "slow2", "after")
        }
        ends = [e for e in log if e.type.startswith("mission.") and e.type != "mission.created"]
        assert [(e.type, e.body["reason"]) for e in ends] == [
            ("mission.cancelled", "operator stop")
        ]
        # the running handlers are stopped: their leases were revoked with the items
        await asyncio.wait_for(all_stopped.wait(), WAIT_S)
        assert running == stopped == {"slow1", "slow2"}


# ------------------------------------------------------------------ lease timeout, late result


@asynccontextmanager
async def agent_on_own_thread(
    ms: MissionStack, agent_id: str, handlers: HandlerRegistry
) -> AsyncIterator[AgentRuntime]:
    """An :class:`AgentRuntime` on its own thread and event loop — a separate "process" whose
    handler can freeze it whole (a blocking call: no Temporal heartbeat, no lease renewal,
    nothing) while the test, the coordinator and the other agents run on. Stopped on exit."""
    actor = await ms.stack.add_agent(
        agent_id, ["worker"], capabilities=["demo.step@1.0"], max_concurrency=1
    )
    card = agent_card(actor)
    target = ms.env.client.service_client.config.target_host
    namespace = ms.env.client.namespace
    box: dict[str, Any] = {}
    up = threading.Event()

    async def main() -> None:
        client = await Client.connect(
            target, namespace=namespace, data_converter=pydantic_data_converter
        )
        rt = AgentRuntime(
            card,
            actor.key,
            groups=[ms.group],
            authority_url=ms.stack.url,
            temporal_client=client,
            handlers=handlers,
            state_path=ms.tmp / f"{agent_id}.sqlite3",
        )
        stop = asyncio.Event()
        box["loop"], box["rt"], box["stop"] = asyncio.get_running_loop(), rt, stop
        try:
            async with rt:
                up.set()
                await stop.wait()
        finally:
            up.set()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to the test below
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"agent {agent_id}", daemon=True)
    thread.start()
    try:
        assert await asyncio.to_thread(up.wait, WAIT_S), f"{agent_id} did not start"
        assert "error" not in box, box.get("error")
        yield box["rt"]
    finally:
        if "loop" in box:
            box["loop"].call_soon_threadsafe(box["stop"].set)
        await asyncio.to_thread(thread.join, WAIT_S)
        assert not thread.is_alive(), f"{agent_id} did not stop"
        assert "error" not in box, box.get("error")


async def test_lease_timeout_reassigns_and_late_result_is_only_recorded__MW_11_5_a__MW_11_5_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The first owner freezes mid-work (no heartbeat, no renewal) past its 2 s lease: the
    Mission reassigns the WorkItem from its last checkpoint to another agent with ownership
    epoch 2, which completes it (MW-11.5-a). When the frozen agent thaws, its late submission is
    recorded by the Authority as ``work.late_result_recorded`` and completes nothing
    (MW-11.5-b)."""
    entered, thaw = threading.Event(), threading.Event()
    seen: list[tuple[str, int, dict[str, Any] | None]] = []
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        seen.append((ctx.agent_id, ctx.ownership_epoch, ctx.checkpoint))
        if ctx.agent_id == "ada":
            await ctx.save({"rows_done": 40})
            entered.set()
            # Blocks ada's whole event loop — a frozen process: its runtime can neither
            # heartbeat to Temporal nor renew the lease with the Authority.
            thaw.wait(WAIT_S)
            return submission(ctx, by="ada")  # the late result
        await ctx.guard()
        return submission(ctx, by=ctx.agent_id)

    c = contract(timeouts=SHORT_LEASE)
    async with mission_stack(dev_env, tmp_path) as ms:
        async with agent_on_own_thread(ms, "ada", reg):
            try:
                handle = await ms.start(
                    ms.spec("lease1", [{"work_item_id": "a", "contract": c.wire()}])
                )
                assert await asyncio.to_thread(entered.wait, WAIT_S)
                await ms.agent("bob", reg)

                res = await result(handle)
                assert res.status == "completed"
                (a,) = res.items
                assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", "bob", 2)
                assert a.outputs["result"]["by"] == "bob"
                # bob resumed from ada's last durable checkpoint (MW-11.5-a)
                assert seen == [("ada", 1, None), ("bob", 2, {"rows_done": 40})]

                thaw.set()  # ada wakes up and submits with its old lease
                loop = asyncio.get_running_loop()
                end = loop.time() + WAIT_S
                while "work.late_result_recorded" not in types(ms.events("a")):
                    assert loop.time() < end, types(ms.events("a"))
                    await asyncio.sleep(0.1)
            finally:
                thaw.set()  # before the runtime is stopped: a frozen loop cannot stop

        log = ms.events("a")
        starts = [e.body["lease"] for e in log if e.type == "work.started"]
        assert [(s["agent_id"], s["ownership_epoch"]) for s in starts] == [("ada", 1), ("bob", 2)]
        closed = [e.body for e in log if e.type == "ownership.closed"]
        assert [(b["owner"], b["ownership_epoch"], b["reason"]) for b in closed] == [
            ("ada", 1, "lease_expired")
        ]
        (late,) = [e for e in log if e.type == "work.late_result_recorded"]
        assert late.actor == "ada"
        assert late.body["lease_id"] == starts[0]["lease_id"]
        assert late.body["ownership_epoch"] == 1
        # it completed nothing: one submission (bob's), one verdict, and the item is bob's
        assert [e.actor for e in log if e.type == "work.submitted"] == ["bob"]
        accepted = [e.body for e in log if e.type == "work.result_accepted"]
        assert [(b["owner"], b["ownership_epoch"]) for b in accepted] == [("bob", 2)]
        assert log[-1].type == "work.late_result_recorded"
        row = ms.stack.authority.work_item(ms.group, "a")
        assert row is not None
        assert (row["state"], row["owner"], row["ownership_epoch"]) == ("verified", "bob", 2)
