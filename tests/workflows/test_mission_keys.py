"""MW-16-f through the Mission workflow, on the real Temporal dev server with a real agent
runtime and Authority: an offer the workflow makes begins its ownership epoch under ``mwk2_``
keys — the acceptance records ``key_version`` 2 in ``work.offer_accepted`` — and the handler's
keys fold in the Group. (A history from before, replayed, keeps ``mwk1_``:
``GROUP_KEYS_PATCH``, ``tests/workflows/test_mission_replay.py``.)"""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from missionweave.protocol import idempotency_key
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from tests.support.mission_harness import mission_stack, submission, work_items
from tests.support.mission_outcome import result, states


async def test_a_new_epoch_begins_under_group_keys__MW_16_f(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    keys: list[tuple[str, str, str, int]] = []
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, object]) -> Submission:
        keys.append((ctx.idempotency_key("charge"), ctx.group_id, ctx.mission_id,
                     ctx.ownership_epoch))  # fmt: skip
        return submission(ctx, method="demo")

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("keys1", work_items({"a": []})))
        done = await result(handle)
        assert states(done.items) == {"a": "verified"}
        (accepted,) = [e for e in ms.events("a") if e.type == "work.offer_accepted"]
    assert accepted.body["key_version"] == 2
    ((key, group, mission, epoch),) = keys
    assert key == idempotency_key(mission, "a", epoch, "charge", key_version=2, group_id=group)
    assert key.startswith("mwk2_")
