"""The agent runtime end to end: a real Authority on loopback, the Temporal time-skipping test
server, and the stand-in Mission of :mod:`tests.worker.stand_in`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from missionweave.authority import now_ms
from missionweave.protocol import AgentCard, DeclineReason, SigningKey
from missionweave.protocol.temporal_contract import (
    OfferTerms,
    OutcomeKind,
    mission_workflow_id,
)
from missionweave.worker import AgentRuntime, SessionError, load_handlers
from tests.support.contracts import contract
from tests.support.serving import LiveServer
from tests.support.waits import WAIT_S
from tests.support.world import World
from tests.worker.stand_in import (
    StandInItem,
    StandInMissionWorkflow,
    StandInSpec,
    agent_runtime,
    stand_in_env,
    stand_in_worker,
    start_stand_in,
)

# ------------------------------------------------------------------------------ the tests


def events_of(w: World, type: str) -> list[Any]:
    return [e for e in w.authority.all_events(w.group) if e.type == type]


async def test_runtime_answers_offers_starts_and_executes__MW_10_3_d(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    """Each offer reaches the runtime as an ``execute_work_item`` activity: admission control
    declines what it cannot do with a structured reason, accepts and starts the rest itself
    with the Authority, runs the handler under the lease, and returns the outcome with the
    Authority's Events; the projection rebuilds from the log after the state file is deleted
    (MW-10.3-d/e, MW-11.1-b/c, MW-11.3-b)."""
    world.authorize("a", required_capabilities=["dist.verify@1.0"])
    world.authorize("b", required_capabilities=["gpu.render@1.0"])
    w0 = world.workers[0]
    offers = {
        w: OfferTerms(
            offer_id=world.offer(w, w0), revision=1, expires_at_ms=world.clock.now + 30_000
        )
        for w in "ab"
    }
    spec = StandInSpec(
        group_id=world.group,
        mission_id=world.mission,
        agent_id=w0.agent_id,
        items={
            "a": StandInItem(
                contract=contract(required_capabilities=["dist.verify@1.0"]),
                input={"files": ["x.tar", "y.tar", "z.tar"]},
                offer=offers["a"],
            ),
            "b": StandInItem(
                contract=contract(required_capabilities=["gpu.render@1.0"]), offer=offers["b"]
            ),
        },
    )
    state = tmp_path / "agent" / "worker-0.db"
    async with stand_in_worker() as env:
        rt = agent_runtime(world, live.url, env.client, state)
        async with rt:
            assert events_of(world, "agent.card_published")  # published once, at start
            assert rt.actor.membership_epochs == {world.group: 1}  # learnt from the log
            handle = await start_stand_in(env, spec, mission_workflow_id(world.mission))
            with env.auto_time_skipping_disabled():
                outcomes = await asyncio.wait_for(handle.result(), WAIT_S)
                seen = await handle.query(StandInMissionWorkflow.seen)
            assert rt.state is not None
            before = rt.state.projection()["work_items"]
    (declined,) = events_of(world, "work.offer_declined")
    assert declined.body["reason"] == DeclineReason.CAPABILITY
    assert declined.body["detail"]["missing"] == ["gpu.render@1.0"]
    assert outcomes["b"].kind is OutcomeKind.DECLINED
    assert [e.type for e in outcomes["b"].events] == ["work.offer_declined"]
    out = outcomes["a"]
    assert out.kind is OutcomeKind.SUBMITTED and out.outputs == {"report": {"files": 3}}
    assert out.verdict is not None and out.verdict.accepted
    # every Event the agent's Commands produced, for the workflow's one reducer
    types = [e.type for e in out.events]
    assert types[:2] == ["work.offer_accepted", "work.started"] and "work.submitted" in types
    # the report_progress signal: the handler's own report; it ended before the runtime's
    # "started" announcement was due (STARTED_SIGNAL_AFTER_S: a quick WorkItem costs the
    # Mission no signal of its own, issue 26)
    assert seen["progress"] == ["verifying"]
    started = events_of(world, "work.started")[0].body["lease"]
    assert started["agent_id"] == "worker-0" and started["session_epoch"] == 2
    assert [w["work_item_id"] for w in before] == ["a"]  # only its own WorkItems

    # Delete the local state; a new runtime rebuilds the same projection from the log.
    for f in state.parent.glob("worker-0.db*"):
        f.unlink()
    async with (
        await stand_in_env() as env,
        agent_runtime(world, live.url, env.client, state) as again,
    ):
        assert again.state is not None
        assert again.state.projection()["work_items"] == before
        assert len(events_of(world, "agent.card_published")) == 1  # not republished


class _NoTemporal:
    """A Temporal client stand-in for runtimes that never get as far as their Worker."""

    def get_workflow_handle(self, workflow_id: str) -> Any:
        raise AssertionError("not reached")


async def test_runtime_refuses_to_start_without_membership(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    stranger = SigningKey.generate()
    card = AgentCard(agent_id="stranger", public_key=stranger.public_key)
    rt = AgentRuntime(
        card,
        stranger,
        groups=[world.group],
        authority_url=live.url,
        temporal_client=_NoTemporal(),  # type: ignore[arg-type]
        handlers=load_handlers("tests.support.worker_handlers"),
        state_path=tmp_path / "s.db",
    )
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
    rt = AgentRuntime(
        AgentCard(agent_id="ada", public_key=key.public_key),
        key,
        groups=["g1"],
        authority_url=f"http://127.0.0.1:{port}",
        temporal_client=_NoTemporal(),  # type: ignore[arg-type]
        handlers=load_handlers("tests.support.worker_handlers"),
        state_path=tmp_path / "s.db",
    )
    try:
        run = asyncio.create_task(rt.run())
        for _ in range(200):  # until the runtime is connected and waiting for an answer
            if accepted:
                break
            await asyncio.sleep(0.05)
        assert accepted and not run.done()
        await rt.stop()
        await asyncio.wait_for(run, WAIT_S)  # a bound on a hang, not a speed assertion
        assert not rt.ready.is_set()
    finally:
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()


async def test_every_command_of_the_runtime_is_issued_on_its_clock(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    """The runtime's clock stamps every Command it signs, ``session.open`` and the card
    included: an Authority an hour behind the wall clock (as a time-skipping server falls
    behind it over a long run) would refuse Commands stamped by the wall clock ``clock_skew``
    (found under load: a time-skipping test's runtime could not open its session)."""
    world.clock.now = now_ms() - 3_600_000
    async with stand_in_worker() as env:
        rt = agent_runtime(world, live.url, env.client, tmp_path / "s.db", clock=world.clock)
        async with rt:
            assert rt.actor.session_epoch >= 1
            assert events_of(world, "agent.card_published")
    opened = events_of(world, "agent.session_opened")[-1]
    assert abs(opened.recorded_at_ms - world.clock.now) < 600_000
