"""A Mission against an attacker of its Command ids, on the real Temporal dev server."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor
from missionweave.protocol.temporal_contract import mission_workflow_id
from tests.support.mission_harness import mission_stack, step_registry, work_items


async def test_command_id_poisoning_cannot_stop_a_mission(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The coordinator's Command ids are predictable (``mission-<id>/c<n>``). A stranger who
    takes them first — in throwaway Groups, or as a member of the same Group — no longer
    makes the victim's ``mission.create`` and ``work.authorize`` fail: ids are the actor's own
    in its Group, and only an operator creates a Group."""
    async with mission_stack(dev_env, tmp_path) as ms:
        taken = [f"{mission_workflow_id('victim-1')}/c{n}" for n in range(1, 8)]
        stranger = Actor.generate("mallory")
        async with AuthorityClient(ms.stack.url) as anon:
            for i, cid in enumerate(taken):
                r = await anon.submit(
                    stranger.command(
                        "group.create",
                        f"junk-{i}",
                        {"public_key": stranger.public_key},
                        command_id=cid,
                    )
                )
                assert r.rejection is not None and r.rejection.code == "operator_required"
        insider = await ms.stack.add_agent("insider", ["mission_owner"])
        for i, cid in enumerate(taken):
            r = await ms.stack.client.submit(
                insider.command(
                    "mission.create",
                    ms.group,
                    {"mission_id": f"insider-{i}", "title": "squat"},
                    command_id=cid,
                )
            )
            assert r.accepted, r.rejection
        await ms.agent("ada", step_registry())
        spec = ms.spec("victim-1", work_items({"v-a": [], "v-b": ["v-a"]}))
        result = await (await ms.start(spec)).result()
        assert result.status == "completed", result
        assert {i.state.value for i in result.items} == {"verified"}
        assert not ms.stack.authority.query("SELECT 1 FROM groups WHERE group_id LIKE 'junk-%'")
        verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
