"""``missionweave.dev.EmbeddedStack`` in-process: a Mission with an in-process agent, the Group
bootstrap that is idempotent across restarts, and a coordinator key the Group does not know."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus

from missionweave.dev import EmbeddedStack, StackError, workflow_ui_url
from missionweave.protocol import AgentCard, SigningKey
from missionweave.protocol.temporal_contract import (
    COORDINATOR_TASK_QUEUE,
    MissionSpec,
    mission_workflow_id,
)
from missionweave.workflows import MissionWorkflow
from tests.support.cli_processes import mission_spec
from tests.support.mission_harness import contract, step_registry


def _stack(data: Path) -> EmbeddedStack:
    return EmbeddedStack(data, temporal_port=0, authority_port=0, headless=True, group="g1")


async def test_embedded_stack_runs_a_mission_then_restarts_on_its_data(tmp_path: Path) -> None:
    key = SigningKey.generate()
    card = AgentCard(
        agent_id="ada", public_key=key.public_key, capabilities=["demo.step@1.0"], max_concurrency=1
    )
    async with _stack(tmp_path) as stack:
        assert stack.running and stack.temporal.running
        assert stack.coordinator.membership_epochs["g1"] == 1
        assert stack.mission_url("s1") is None  # headless
        runtime = await stack.start_agent(card, key, step_registry())
        assert runtime.ready.is_set()
        items = [
            {"work_item_id": "s1:a", "contract": contract().wire()},
            {"work_item_id": "s1:b", "contract": contract().wire(), "dependencies": ["s1:a"]},
        ]
        spec = MissionSpec.model_validate(mission_spec("s1", "one step", items, group="g1"))
        handle = await stack.client.start_workflow(
            MissionWorkflow.run,
            args=[spec, None],
            id=mission_workflow_id("s1"),
            task_queue=COORDINATOR_TASK_QUEUE,
            static_summary=spec.title,
        )
        result = await handle.result()
        assert result.status == "completed"
        assert [(i.work_item_id, i.state.value, i.owner) for i in result.items] == [
            ("s1:a", "verified", "ada"),
            ("s1:b", "verified", "ada"),
        ]
    assert not stack.running and not stack.temporal.running
    with pytest.raises(StackError, match="not running"):
        _ = stack.client

    # The same data directory: the Group, the member and the Mission's history are found.
    async with _stack(tmp_path) as again:
        events = await again.authority_client.events("g1", after_sequence=0, limit=1000)
        assert [e.type for e in events].count("group.created") == 1
        assert await again.add_member("ada", key.public_key) == "present"
        assert await again.add_member("ada", key.public_key, ["worker", "reviewer"]) == "updated"
        desc = await again.client.get_workflow_handle(mission_workflow_id("s1")).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED
        await again.stop()
        await again.stop()  # twice is fine


async def test_a_coordinator_key_the_group_does_not_know_is_refused(tmp_path: Path) -> None:
    async with _stack(tmp_path):
        pass
    # A lost Authority key is not silently replaced: the log it signed would no longer verify.
    authority_key = tmp_path / "authority.key"
    kept = authority_key.read_bytes()
    authority_key.unlink()
    stack = _stack(tmp_path)
    with pytest.raises(StackError, match=r"authority\.key is missing but .*authority\.db exists"):
        await stack.start()
    assert not authority_key.exists() and not stack.running
    authority_key.write_bytes(kept)

    SigningKey.generate().to_file(tmp_path / "keys" / "coordinator.pem")
    stack = _stack(tmp_path)
    with pytest.raises(StackError, match="records another public key for 'coordinator'"):
        await stack.start()
    assert not stack.running and not stack.temporal.running


def test_workflow_ui_url_quotes_ids() -> None:
    assert workflow_ui_url("http://h:8233/", "default", "mission-a/b c") == (
        "http://h:8233/namespaces/default/workflows/mission-a%2Fb%20c"
    )


async def test_one_data_directory_serves_one_stack_at_a_time(tmp_path: Path) -> None:
    """A second stack on a directory in use is refused, naming the holder, before it starts
    anything; once the first stops, the directory is free again."""
    first = _stack(tmp_path)
    await first.start()
    try:
        second = _stack(tmp_path)
        holder = rf"in use by another MissionWeave stack \(pid {os.getpid()}\)"
        with pytest.raises(StackError, match=holder):
            await second.start()
        assert not second.running and not second.temporal.running
    finally:
        await first.stop()
    async with _stack(tmp_path) as again:
        assert again.running
