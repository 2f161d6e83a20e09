"""The Mission workflow end to end on the real Temporal dev server, with real agent runtimes and
a real Authority."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.protocol.temporal_contract import SelectCandidatesBatchResult
from missionweave.worker import AdmissionPolicy
from tests.support.mission_harness import (
    MissionStack,
    contract,
    mission_stack,
    step_registry,
    work_items,
)
from tests.support.mission_outcome import coordinator_steps, states
from tests.support.waits import until


@pytest.mark.parametrize("authority_process", [False, True], ids=["inline", "process"])
async def test_small_dag_completes_and_chain_verifies__MW_10_4_a(
    dev_env: WorkflowEnvironment, tmp_path: Path, authority_process: bool
) -> None:
    """Also with the Authority as its own process (``missionweave authority serve``), as the
    overhead benchmark runs it."""
    async with mission_stack(dev_env, tmp_path, authority_process=authority_process) as ms:
        await ms.agent("ada", step_registry())
        await ms.agent("bob", step_registry())
        spec = ms.spec("dag1", work_items({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}))
        handle = await ms.start(spec)
        result = await handle.result()
        assert result.status == "completed"
        assert states(result.items) == dict.fromkeys(["a", "b", "c", "d"], "verified")
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)


async def test_wide_dag_of_many_items_completes_in_parallel__MW_10_4_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Many agent updates and Authority batches interleave in one workflow: the Mission still
    completes and its history replays (a nondeterminism error here once came from local
    activities interleaving with update completions)."""
    from temporalio.worker import Replayer

    from missionweave.workflows import MissionWorkflow

    async with mission_stack(dev_env, tmp_path) as ms:
        for name in ("ada", "bob", "cyd"):
            await ms.agent(name, step_registry(), max_concurrency=4)
        c = contract().wire()
        items = [{"work_item_id": f"r{i}", "contract": c} for i in range(8)]
        items += [
            {"work_item_id": f"s{i}", "contract": c, "dependencies": [f"r{i % 8}"]}
            for i in range(24)
        ]
        handle = await ms.start(ms.spec("wide", items))
        result = await handle.result()
        assert result.status == "completed"
        assert all(i.state.value == "verified" for i in result.items)
        assert len({i.owner for i in result.items}) > 1  # spread over several agents
        history = await handle.fetch_history()
        await Replayer(
            workflows=[MissionWorkflow], data_converter=dev_env.client.data_converter
        ).replay_workflow(history)
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)


async def test_work_waits_at_the_coordinator_not_in_declines__MW_10_3_b__MW_10_3_e(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """One agent, one slot and a queue of one, six independent WorkItems eligible at once: the
    first ranking offers two (the free slot and the queue place its Presence shows) and keeps
    four at the coordinator (``saturated``) instead of offering them into declines; they are
    offered as runs end, and the Mission completes."""
    async with mission_stack(dev_env, tmp_path) as ms:
        # a short declared duration: admission control lets one wait in the queue
        ada = await ms.agent(
            "ada",
            step_registry(estimate_ms=1_000),
            max_concurrency=1,
            admission=AdmissionPolicy(max_queue_depth=1),
        )
        await until("ada's Presence", lambda: _present(ms, "ada"))
        assert ada.ready.is_set()
        c = contract().wire()
        policy = {"offer_ttl_ms": 60_000, "reoffer_backoff_ms": 300}
        items = [{"work_item_id": f"w{i}", "contract": c} for i in range(6)]
        spec = ms.spec("room", items, offer_policy=policy)
        handle = await ms.start(spec)
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.status == "completed"
    assert [i.state.value for i in result.items] == ["verified"] * 6
    first = next(r for r in coordinator_steps(history, "select_candidates") if b'"saturated"' in r)
    ranked = SelectCandidatesBatchResult.model_validate_json(first).results
    assert [bool(r.candidates) for r in ranked] == [True, True, False, False, False, False]
    assert [r.saturated for r in ranked] == [False, False, True, True, True, True]


async def _present(ms: MissionStack, agent_id: str) -> bool:
    return agent_id in await ms.stack.client.presence(ms.group)


async def test_a_decline_goes_to_the_next_candidate__MW_10_3_b__MW_10_3_e(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """ada is ranked first (same facts as bob, and "ada" < "bob") but has no handler for the
    capability her card claims: inside the offer's activity her admission control declines
    with a structured reason, and the workflow offers the WorkItem to bob."""
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", step_registry("other.skill"))  # card: demo.step, handler: none
        await ms.agent("bob", step_registry())
        await until("both Presences", lambda: _all_present(ms, ["ada", "bob"]))
        handle = await ms.start(ms.spec("decline", work_items({"a": []})))
        result = await handle.result()
        log = [e for e in ms.stack.authority.events(ms.group) if e.work_item_id == "a"]
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
    assert result.status == "completed"
    offers = [e.body["candidates"] for e in log if e.type == "work.offered"]
    assert offers == [["ada"], ["bob"]]
    (declined,) = [e for e in log if e.type == "work.offer_declined"]
    assert (declined.actor, declined.body["reason"]) == ("ada", "capability")
    (a,) = result.items
    assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", "bob", 1)


async def test_an_urgent_items_bounded_set_yields_exactly_one_owner__MW_10_3_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """An urgent WorkItem is offered to a bounded candidate set at once — one
    ``execute_work_item`` per candidate; the first acceptance at the Authority wins, the
    others find the offer withdrawn, and exactly one owner runs it."""
    async with mission_stack(dev_env, tmp_path) as ms:
        for name in ("ada", "bob", "cy"):
            await ms.agent(name, step_registry())
        await until("three Presences", lambda: _all_present(ms, ["ada", "bob", "cy"]))
        c = contract(urgency="urgent").wire()
        handle = await ms.start(ms.spec("urgent", [{"work_item_id": "a", "contract": c}]))
        result = await handle.result()
        history = await handle.fetch_history()
        log = [e for e in ms.stack.authority.events(ms.group) if e.work_item_id == "a"]
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
    assert result.status == "completed"
    (offer,) = [e for e in log if e.type == "work.offered"]
    assert sorted(offer.body["candidates"]) == ["ada", "bob", "cy"]
    queues = sorted(
        e.activity_task_scheduled_event_attributes.task_queue.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "execute_work_item"
    )
    assert queues == [f"missionweave-agent-{n}/{ms.group}" for n in ("ada", "bob", "cy")]
    (accepted,) = [e for e in log if e.type == "work.offer_accepted"]
    (started,) = [e for e in log if e.type == "work.started"]
    (withdrawn,) = [e for e in log if e.type == "offer.withdrawn"]
    assert started.actor == accepted.actor
    assert sorted(withdrawn.body["candidates"]) == sorted({"ada", "bob", "cy"} - {accepted.actor})
    (a,) = result.items
    assert (a.state.value, a.owner, a.ownership_epoch) == ("verified", accepted.actor, 1)


async def _all_present(ms: MissionStack, agents: list[str]) -> bool:
    present = await ms.stack.client.presence(ms.group)
    return all(a in present for a in agents)
