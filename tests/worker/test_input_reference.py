"""A WorkItem input given by reference (``{"$input_artifact": hash}``, issue 24 finding 4),
run through the real ``execute_work_item`` activity against a loopback Authority: the handler
gets the stored input itself; a missing, corrupt or non-JSON Artifact fails the WorkItem before
the handler runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from missionweave.artifacts import FilesystemStore
from missionweave.authority.client import AuthorityClient
from missionweave.protocol import input_json, input_reference
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput, OutcomeKind
from missionweave.worker import Submission, WorkContext
from missionweave.worker._execute import WorkItemExecutor
from tests.support.artifact_servers import corrupt
from tests.support.executor_harness import VerifyInput, grant, registry_of
from tests.support.world import World


async def _run(
    world: World, client: AuthorityClient, store: FilesystemStore, given: dict[str, Any]
) -> tuple[Any, list[VerifyInput]]:
    seen: list[VerifyInput] = []

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        seen.append(inp)
        return Submission(
            outputs={"report": {"files": len(inp.files)}},  # the contract's deliverable
            evidence=[ctx.evidence("hashes", method="m"), ctx.evidence("schema", method="m")],
        )

    worker = world.workers[0]
    work: ExecuteWorkItemInput = grant(world, "a", worker).model_copy(update={"input": given})
    executor = WorkItemExecutor(worker, client, registry_of(verify))
    return await ActivityEnvironment().run(executor.execute_work_item, work), seen


async def test_an_input_by_reference_reaches_the_handler_whole(
    world: World, client: AuthorityClient, tmp_path: Path
) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    files = [f"file-{i}.tar" for i in range(5000)]  # ~70 KB: more than a Mission carries inline
    ref = store.for_group(world.group).put(input_json({"files": files}), "application/json")
    out, seen = await _run(world, client, store, input_reference(ref.hash))
    assert out.kind is OutcomeKind.SUBMITTED, out.error
    assert seen == [VerifyInput(files=files)]


@pytest.mark.parametrize("content", [None, b"not json", b"[1, 2]", "corrupt"])
async def test_an_unusable_input_artifact_fails_before_the_handler(
    world: World, client: AuthorityClient, tmp_path: Path, content: bytes | str | None
) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    if content is None:  # never stored
        h = "0" * 64
    elif content == "corrupt":  # stored, then altered: its hash check fails (MW-13.1-d)
        h = store.for_group(world.group).put(b'{"files": []}').hash
        corrupt(store.for_group(world.group), h, b'{"files": ["x"]}')
    else:
        assert isinstance(content, bytes)
        h = store.for_group(world.group).put(content).hash
    out, seen = await _run(world, client, store, input_reference(h))
    assert out.kind is OutcomeKind.FAILED and not out.retryable
    assert seen == [] and f"input artifact {h}" in (out.error or "")
    assert world.item("a")["state"] == "failed"
