"""The agent runtime end to end: a real Authority on loopback, the Temporal time-skipping test
server, and ``StandInMissionWorkflow`` — a stand-in for the real Mission workflow, used only to
exercise the runtime's Update sending (``accept_offer`` / ``decline_offer`` / ``start_work``) and
retries. It forwards each agent Command to the Authority through an activity and, after an
accepted start, runs ``execute_work_item`` on the owner's task queue."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import WorkflowUpdateFailedError
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor, AgentCard, DeclineReason, SigningKey, WorkContract
from missionweave.protocol.mission import (
    AgentCommandInput,
    CommandVerdict,
    ExecuteWorkItemInput,
    LeaseGrant,
    OutcomeKind,
    ProgressSignal,
    WorkOutcome,
    agent_task_queue,
    mission_workflow_id,
)
from missionweave.worker import (
    AgentRuntime,
    SessionError,
    UpdateRetry,
    UpdateSender,
    command_verdict,
    load_handlers,
)

from . import serving
from .serving import LiveServer, eventually
from .world import World, contract

live = serving.live
world = serving.world

TEST_SERVER = str(Path(sys.executable).with_name("temporal-test-server"))
STAND_IN_QUEUE = "stand-in-coordinator"


class StandInItem(BaseModel):
    contract: WorkContract
    input: dict[str, Any] = {}


class StandInSpec(BaseModel):
    group_id: str
    mission_id: str
    items: dict[str, StandInItem]


class Forwarder:
    """The stand-in's only activity: submit an agent's signed Command to the Authority."""

    def __init__(self, url: str) -> None:
        self.url = url

    @activity.defn(name="forward_command")
    async def forward_command(self, inp: AgentCommandInput) -> CommandVerdict:
        async with AuthorityClient(self.url) as client:
            return command_verdict(await client.submit(inp.command))


@workflow.defn(name="StandInMission")
class StandInMissionWorkflow:
    """Stand-in for the Mission workflow (tests only): the three agent Updates, forwarded."""

    @workflow.init
    def __init__(self, spec: StandInSpec) -> None:
        self.spec = spec
        self.outcomes: dict[str, WorkOutcome] = {}
        self.updates: list[str] = []
        self.progress: list[str] = []
        self.done = False
        self.tasks: list[asyncio.Task[None]] = []

    @workflow.run
    async def run(self, spec: StandInSpec) -> dict[str, WorkOutcome]:
        await workflow.wait_condition(lambda: self.done)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.outcomes

    async def _forward(self, inp: AgentCommandInput) -> CommandVerdict:
        self.updates.append(inp.command.type)
        return await workflow.execute_activity(
            "forward_command", inp, result_type=CommandVerdict,
            start_to_close_timeout=timedelta(seconds=30),
        )  # fmt: skip

    @workflow.update
    async def accept_offer(self, inp: AgentCommandInput) -> CommandVerdict:
        return await self._forward(inp)

    @workflow.update
    async def decline_offer(self, inp: AgentCommandInput) -> CommandVerdict:
        return await self._forward(inp)

    @workflow.update
    async def start_work(self, inp: AgentCommandInput) -> CommandVerdict:
        verdict = await self._forward(inp)
        if verdict.accepted:
            wid = str(inp.command.body["work_item_id"])
            item = self.spec.items[wid]
            lease = {k: v for k, v in verdict.reply["lease"].items() if k != "renewals"}
            work = ExecuteWorkItemInput(
                group_id=self.spec.group_id, mission_id=self.spec.mission_id, work_item_id=wid,
                contract=item.contract, input=item.input,
                checkpoint=verdict.reply.get("checkpoint"),
                lease=LeaseGrant(**lease, capability_token=verdict.reply["capability_token"]),
            )  # fmt: skip
            self.tasks.append(asyncio.create_task(self._execute(wid, work, inp.command.actor)))
        return verdict

    async def _execute(self, wid: str, work: ExecuteWorkItemInput, owner: str) -> None:
        self.outcomes[wid] = await workflow.execute_activity(
            "execute_work_item", work, result_type=WorkOutcome, task_queue=agent_task_queue(owner),
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(milliseconds=work.contract.timeouts.lease_ms),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )  # fmt: skip

    @workflow.signal
    def report_progress(self, sig: ProgressSignal) -> None:
        self.progress.append(sig.report.phase)

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def seen(self) -> dict[str, Any]:
        return {"updates": self.updates, "progress": self.progress,
                "outcomes": {k: v.kind.value for k, v in self.outcomes.items()}}  # fmt: skip


# ------------------------------------------------------------------------------ the tests


async def stand_in_env() -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=TEST_SERVER, data_converter=pydantic_data_converter
    )


def runtime(w: World, live: LiveServer, env: WorkflowEnvironment, state: Path) -> AgentRuntime:
    worker = w.workers[0]
    card = AgentCard(agent_id=worker.agent_id, public_key=worker.public_key,
                     capabilities=["dist.verify@1.2"], max_concurrency=2)  # fmt: skip
    return AgentRuntime(
        card, worker.key, groups=[w.group], authority_url=live.url, temporal_client=env.client,
        handlers=load_handlers("tests.worker_handlers"), state_path=state,
        tick=timedelta(milliseconds=200),
        update_retry=UpdateRetry(initial_backoff=timedelta(milliseconds=50),
                                 max_backoff=timedelta(milliseconds=200), max_attempts=100),
    )  # fmt: skip


def events_of(w: World, type: str) -> list[Any]:
    return [e for e in w.authority.all_events(w.group) if e.type == type]


async def test_runtime_answers_offers_starts_and_executes__MW_10_3_d(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    """Offers are answered through admission control with the accept/decline Updates (retried
    while the workflow is unreachable), queued work is started with ``start_work``, the workflow
    runs ``execute_work_item`` on the agent's task queue, and the projection rebuilds from the
    log after the state file is deleted (MW-10.3-d/e, MW-11.1-b/c, MW-11.3-b)."""
    world.authorize("a", required_capabilities=["dist.verify@1.0"])
    world.authorize("b", required_capabilities=["gpu.render@1.0"])
    spec = StandInSpec(group_id=world.group, mission_id=world.mission, items={
        "a": StandInItem(contract=contract(required_capabilities=["dist.verify@1.0"]),
                         input={"files": ["x.tar", "y.tar", "z.tar"]}),
        "b": StandInItem(contract=contract(required_capabilities=["gpu.render@1.0"]))})  # fmt: skip
    state = tmp_path / "agent" / "worker-0.db"
    async with await stand_in_env() as env:
        async with Worker(
            env.client, task_queue=STAND_IN_QUEUE, workflows=[StandInMissionWorkflow],
            activities=[Forwarder(live.url).forward_command],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):  # fmt: skip
            rt = runtime(world, live, env, state)
            async with rt:
                assert events_of(world, "agent.card_published")  # published once, at start
                assert rt.actor.membership_epochs == {world.group: 1}  # learnt from the log
                world.offer("a", world.workers[0])
                # The Mission's workflow is not running yet: the accept Update is retried.
                await eventually(lambda: rt.sender.retries >= 1, timeout_s=10)
                handle = await env.client.start_workflow(
                    StandInMissionWorkflow.run, spec, id=mission_workflow_id(world.mission),
                    task_queue=STAND_IN_QUEUE,
                )  # fmt: skip
                world.offer("b", world.workers[0])
                await eventually(lambda: world.authority.work_item(world.group, "a")["state"]
                                 == "submitted", timeout_s=20)  # fmt: skip
                (declined,) = events_of(world, "work.offer_declined")
                assert declined.body["reason"] == DeclineReason.CAPABILITY
                assert declined.body["detail"]["missing"] == ["gpu.render@1.0"]
                await eventually(lambda: not rt.board.busy(), timeout_s=10)

                async def outcome_recorded() -> bool:
                    # the Authority sees the submission before the workflow sees the activity's
                    # result: wait for the workflow too
                    got = await handle.query(StandInMissionWorkflow.seen)
                    return bool(got["outcomes"])

                await eventually(outcome_recorded, timeout_s=10)
                seen = await handle.query(StandInMissionWorkflow.seen)
                assert sorted(seen["updates"]) == ["work.accept_offer", "work.decline_offer",
                                                   "work.start"]  # fmt: skip
                assert seen["outcomes"] == {"a": OutcomeKind.SUBMITTED.value}
                assert seen["progress"] == ["verifying"]  # the report_progress signal
                assert rt.state is not None
                before = rt.state.projection()["work_items"]
            await handle.signal(StandInMissionWorkflow.finish)
            outcomes = await handle.result()
    out = outcomes["a"]
    assert out.kind is OutcomeKind.SUBMITTED and out.outputs == {"files": 3}
    assert out.verdict is not None and out.verdict.accepted
    started = events_of(world, "work.started")[0].body["lease"]
    assert started["agent_id"] == "worker-0" and started["session_epoch"] == 2

    # Delete the local state; a new runtime rebuilds the same work queue from the log.
    for f in state.parent.glob("worker-0.db*"):
        f.unlink()
    async with await stand_in_env() as env, runtime(world, live, env, state) as again:
        assert again.state is not None
        assert again.state.projection()["work_items"] == before
        assert len(events_of(world, "agent.card_published")) == 1  # not republished


class _Busy:
    """A Temporal client stand-in whose workflow answers ResourceExhausted twice."""

    def __init__(self) -> None:
        self.calls = 0

    def get_workflow_handle(self, workflow_id: str) -> _Busy:
        return self

    async def execute_update(self, update: str, arg: Any, **kw: Any) -> CommandVerdict:
        self.calls += 1
        if self.calls <= 2:
            raise RPCError("too many updates in flight", RPCStatusCode.RESOURCE_EXHAUSTED, b"")
        return CommandVerdict(command_id=kw["id"], status="accepted")


async def test_update_retried_on_resource_exhausted() -> None:
    """At most 10 updates are in flight per workflow: the 11th is refused with
    ResourceExhausted, and the agent retries the same update id with backoff."""
    busy = _Busy()
    sender = UpdateSender(busy, retry=UpdateRetry(initial_backoff=timedelta(milliseconds=1)))  # type: ignore[arg-type]
    cmd = Actor.generate("w").command("work.start", "g1", {"work_item_id": "a"})
    verdict = await sender.send("m1", "start_work", cmd)
    assert verdict.accepted and verdict.command_id == cmd.command_id
    assert busy.calls == 3 and sender.retries == 2


class _Refusing(_Busy):
    """A workflow whose update validator refuses (it never reaches history)."""

    def __init__(self, type: str) -> None:
        super().__init__()
        self.type = type

    async def execute_update(self, update: str, arg: Any, **kw: Any) -> CommandVerdict:
        self.calls += 1
        raise WorkflowUpdateFailedError(ApplicationError("not the current offer", type=self.type))


@pytest.mark.parametrize(("type", "code"), [("ValueError", "update_rejected"),
                                            ("stale_offer", "stale_offer")])  # fmt: skip
async def test_validator_refusal_is_a_rejected_verdict_not_retried(type: str, code: str) -> None:
    refusing = _Refusing(type)
    sender = UpdateSender(refusing)  # type: ignore[arg-type]
    cmd = Actor.generate("w").command("work.accept_offer", "g1", {"work_item_id": "a"})
    verdict = await sender.send("m1", "accept_offer", cmd)
    assert verdict.status == "rejected" and verdict.rejection is not None
    assert verdict.rejection.code == code and refusing.calls == 1


async def test_runtime_refuses_to_start_without_membership(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    stranger = SigningKey.generate()
    card = AgentCard(agent_id="stranger", public_key=stranger.public_key)
    rt = AgentRuntime(card, stranger, groups=[world.group], authority_url=live.url,
                      temporal_client=_Busy(),  # type: ignore[arg-type]
                      handlers=load_handlers("tests.worker_handlers"),
                      state_path=tmp_path / "s.db")  # fmt: skip
    with pytest.raises(SessionError, match="unknown_actor") as err:
        async with rt:
            pass
    # it says what to run (issue 11, item 13)
    assert (
        f"group add --key OWNER.pem --group GROUP --agent-id stranger --public-key "
        f"{stranger.public_key}" in str(err.value)
    )


async def test_a_stop_during_start_up_ends_the_runtime_though_the_authority_is_silent(
    tmp_path: Path,
) -> None:
    """An Authority that accepts connections and never answers (a frozen host): the runtime
    is stuck opening its session, and ``stop()`` (Ctrl-C in ``missionweave worker``) still
    ends ``run()`` — nothing runs yet that would need a graceful end."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # read nothing, answer nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    key = SigningKey.generate()
    rt = AgentRuntime(AgentCard(agent_id="ada", public_key=key.public_key), key,
                      groups=["g1"], authority_url=f"http://127.0.0.1:{port}",
                      temporal_client=_Busy(),  # type: ignore[arg-type]
                      handlers=load_handlers("tests.worker_handlers"),
                      state_path=tmp_path / "s.db")  # fmt: skip
    try:
        run = asyncio.create_task(rt.run())
        for _ in range(200):  # until the runtime is connected and waiting for an answer
            if accepted:
                break
            await asyncio.sleep(0.05)
        assert accepted and not run.done()
        await rt.stop()
        await asyncio.wait_for(run, 10)  # a bound on a hang, not a speed assertion
        assert not rt.ready.is_set()
    finally:
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()
