"""Accepting and starting in one Update (``AgentCommandInput.then_start``): the workflow submits
the agent's ``work.accept_offer`` and ``work.start`` in that order, answers both verdicts and
runs the WorkItem (MW-10.3-c, MW-11.3-b); a ``then_start`` that is not the same agent's
``work.start`` for the same WorkItem is refused by the validator before it reaches history."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.protocol import Event
from missionweave.protocol.mission import AgentCommandInput
from missionweave.workflows import MissionWorkflow

from . import temporal_env
from .mission_harness import MissionStack, contract, mission_stack, step_registry, until

pytestmark = pytest.mark.asyncio(loop_scope="session")
dev_env = temporal_env.dev_env


def _events(ms: MissionStack, type: str) -> list[Event]:
    return [e for e in ms.stack.authority.events(ms.group) if e.type == type]


async def test_accept_then_start_in_one_update__MW_10_3_c__MW_11_3_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        ada = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"], max_concurrency=2)
        bob = await ms.stack.add_agent("bob", capabilities=["demo.step@1.0"], max_concurrency=2)
        await ms.stack.client.put_presence(bob, ms.group, 0, 0)  # ada is the one offered
        c = contract().wire()
        spec = ms.spec("one-update", [{"work_item_id": w, "contract": c} for w in ("a", "b")])
        handle = await ms.start(spec)
        offers = await until("a's offer", lambda: [
            e for e in _events(ms, "work.offered") if e.work_item_id == "a"])  # fmt: skip
        offer = offers[0]
        assert offer.body["candidates"] == ["ada"]
        accept = ada.command("work.accept_offer", ms.group, {
            "work_item_id": "a", "offer_id": offer.body["offer_id"],
            "revision": offer.body["revision"]})  # fmt: skip

        # refused before history: the start names another WorkItem, or is another agent's
        for wrong in (
            ada.command("work.start", ms.group, {"work_item_id": "b", "ownership_epoch": 1}),
            bob.command("work.start", ms.group, {"work_item_id": "a", "ownership_epoch": 1}),
        ):
            with pytest.raises(WorkflowUpdateFailedError) as exc:
                await handle.execute_update(
                    MissionWorkflow.accept_offer,
                    AgentCommandInput(command=accept, then_start=wrong),
                )  # fmt: skip
            assert isinstance(exc.value.cause, ApplicationError)
            assert exc.value.cause.type == "then_start_mismatch"
        assert _events(ms, "work.offer_accepted") == []

        # ada's runtime has free slots: it answers both offers with one Update each
        await ms.agent("ada", step_registry(), actor=ada)
        result = await handle.result()
        accepted = _events(ms, "work.offer_accepted")
        started = _events(ms, "work.started")
        history = await handle.fetch_history()
        verify_log(ms.stack.authority.conn, ms.group, ms.stack.authority.public_key)

    assert result.status == "completed"
    assert [i.state.value for i in result.items] == ["verified", "verified"]
    updates = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    ]
    assert [u.input.name for u in updates] == ["accept_offer", "accept_offer"]  # no start_work
    carried = [
        AgentCommandInput.model_validate_json(u.input.args.payloads[0].data) for u in updates
    ]
    assert all(c.then_start is not None for c in carried)
    # the Authority applied each acceptance, then the start carried with it, under ada's key
    assert sorted(e.command_id for e in accepted) == sorted(c.command.command_id for c in carried)
    assert sorted(e.command_id for e in started) == sorted(
        c.then_start.command_id for c in carried if c.then_start
    )
    assert {e.actor for e in started} == {"ada"}
    assert [e.body["lease"]["ownership_epoch"] for e in started] == [1, 1]
