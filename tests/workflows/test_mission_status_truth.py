"""What ``mission status`` says matches what happens (issue 29). While a handler runs, the
Mission's ``status`` query, ``mission status --json`` and the table say the WorkItem is
``active`` at its owner with its ownership epoch, phase and how long since it started — learnt
from the Authority's log when the agent signals its start, not from the activity's result at
the end (item 1; MW-11.4-a). A WorkItem that never started because its dependency failed for
good says so (item 5)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from missionweave.cli._artifacts import open_store
from missionweave.cli._common import CliError
from missionweave.cli._mission import load_spec
from missionweave.outcome import result_of
from missionweave.protocol import AgentCard, ProgressReport, WorkItemState
from missionweave.protocol.temporal_contract import REPORT_PROGRESS_SIGNAL, ProgressSignal
from missionweave.worker import AgentRuntime, HandlerRegistry, Submission, WorkContext, WorkerError
from missionweave.workflows import MissionWorkflow
from tests.support.contracts import contract as build_contract
from tests.support.mission_harness import (
    contract,
    mission_cli,
    mission_stack,
    step_registry,
    submission,
    work_items,
)
from tests.support.mission_outcome import item
from tests.support.waits import WAIT_S, until


async def test_a_running_item_shows_active_with_owner_and_epoch__MW_11_4_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    release = asyncio.Event()
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        await release.wait()  # no progress report: the start alone must show
        return submission(ctx, method="demo")

    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg, max_concurrency=1)
        spec = ms.spec("active1", [{"work_item_id": "a", "contract": contract().wire()}])
        handle = await ms.start(spec)
        try:
            await ms.wait_state("a", "active")

            async def active() -> Any:
                st = await handle.query(MissionWorkflow.status)
                a = item(st, "a")
                return a if a.state is WorkItemState.ACTIVE else None

            a = await until("the status query to say active", active, WAIT_S)
            assert (a.owner, a.ownership_epoch) == ("ada", 1)
            assert a.lease_id is not None
            assert a.detail.startswith("active at ada · started · since "), a.detail

            out = await mission_cli(dev_env, "mission", "status", "active1", "--json")
            assert out.exit_code == 0, out.output
            shown = json.loads(out.output)["items"][0]
            assert (shown["state"], shown["owner"], shown["ownership_epoch"]) == (
                "active",
                "ada",
                1,
            )
            out = await mission_cli(dev_env, "mission", "status", "active1")
            assert out.exit_code == 0 and "active at ada · started" in out.output, out.output

            # a claim from an agent the Authority does not name changes nothing
            await handle.signal(
                REPORT_PROGRESS_SIGNAL,
                ProgressSignal(
                    work_item_id="a", agent_id="mallory", report=ProgressReport(phase="mine")
                ),
            )
            st = await handle.query(MissionWorkflow.status)
            assert (item(st, "a").owner, item(st, "a").last_progress.phase) == ("ada", "started")
        finally:
            release.set()
        result = await asyncio.wait_for(handle.result(), WAIT_S)
    assert result.status == "completed"


async def test_a_dependent_of_a_failed_item_names_the_dependency(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        raise RuntimeError("kaboom")

    c = contract(retry={"max_attempts": 2, "initial_backoff_ms": 100})
    items = work_items({"a": [], "b": ["a"], "c": ["b"]}, c)
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", reg)
        handle = await ms.start(ms.spec("depfail1", items))
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), WAIT_S)
        res = result_of(info.value.cause)
        assert res is not None
        details = {i.work_item_id: (i.state.value, i.detail) for i in res.items}
        assert details["b"] == ("failed", "not started: dependency a failed for good")
        assert details["c"] == (
            "failed",
            "not started: dependency b did not start (a failed for good)",
        )
        st = await handle.query(MissionWorkflow.status)
        assert item(st, "b").detail == "not started: dependency a failed for good"


async def test_starting_a_finished_missions_id_again_says_what_to_do(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.agent("ada", step_registry())
        spec = ms.spec("again2", [{"work_item_id": "a", "contract": contract().wire()}])
        assert (await asyncio.wait_for(ms.start(spec), WAIT_S)) is not None
        handle = dev_env.client.get_workflow_handle("mission-again2")
        await asyncio.wait_for(handle.result(), WAIT_S)
        file = tmp_path / "again2.json"
        file.write_text(spec.model_dump_json())
        out = await mission_cli(dev_env, "mission", "start", str(file))
        assert out.exit_code != 0
        text = str(out.exception)  # in-process, the CLI's one-line error is raised
        assert "mission 'again2' already exists (workflow mission-again2, completed)" in text
        assert "new mission_id" in text, text
        assert "missionweave mission status again2" in text, text
        runs = [
            w.run_id async for w in dev_env.client.list_workflows('WorkflowId = "mission-again2"')
        ]
        assert len(runs) == 1  # the CLI refuses a second run: no FAILED row beside it


def test_validation_names_every_error_and_a_close_key(tmp_path: Path) -> None:
    """``mission start`` names every bad field, not the first and ``(and 1 more)``, and a
    close field name for a misspelled key (issue 29 item 4)."""
    item = {"work_item_id": "a", "contract": {**contract().wire(), "objective": None}}
    spec = {
        "group_id": "g",
        "mission_id": "m",
        "titel": "x",
        "items": [{**item, "dependancies": []}],
    }
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(spec))
    with pytest.raises(CliError) as info:
        load_spec(str(file))
    assert str(info.value) == (
        f"{file}: invalid MissionSpec: 3 errors: "
        "items.0.contract.objective: Input should be a valid string; "
        "items.0.dependancies: Extra inputs are not permitted (did you mean 'dependencies'?); "
        "titel: Extra inputs are not permitted (did you mean 'title'?)"
    )
    assert "more)" not in str(info.value)


async def test_a_changed_card_at_the_same_version_is_refused_and_the_miss_is_named(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """An agent whose card file gained a capability without a new ``version`` is told at start
    to raise it (the Group's log keeps the published card); a WorkItem needing that capability
    names the nearest miss in its detail (issue 29 item 2)."""
    async with mission_stack(dev_env, tmp_path) as ms:
        actor = await ms.stack.add_agent("ada", capabilities=["demo.step@1.0"])  # card v1
        changed = AgentCard(
            agent_id="ada",
            version=1,
            public_key=actor.public_key,
            capabilities=["demo.step@1.0", "demo.extra@1.0"],
            max_concurrency=1,
        )
        rt = AgentRuntime(
            changed,
            actor.key,
            groups=[ms.group],
            authority_url=ms.stack.url,
            temporal_client=dev_env.client,
            handlers=HandlerRegistry(),
            state_path=tmp_path / "ada.sqlite3",
        )
        with pytest.raises(WorkerError) as info:
            await asyncio.wait_for(rt.run(), WAIT_S)
        assert str(info.value) == (
            "the card file of agent ada differs from its published card version 1 "
            '(capabilities): a card is published once per version — raise "version" in the '
            "card file to 2 and start again"
        )

        c = build_contract(["demo.extra@1.0"]).wire()
        handle = await ms.start(ms.spec("miss1", [{"work_item_id": "x", "contract": c}]))

        async def missed() -> Any:
            st = await handle.query(MissionWorkflow.status)
            d = item(st, "x").detail
            return d if d.startswith("no eligible agent") and "(" in d else None

        detail = await until("the detail to name the nearest miss", missed, WAIT_S)
        assert detail.startswith("no eligible agent for "), detail
        assert detail.endswith(
            " (agent ada lacks capability demo.extra@1.0; its card is version 1)"
        ), detail
        await handle.cancel()


def test_a_missing_artifact_store_says_where_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default store is relative to the current directory: its absence names the path,
    where it came from, and ``--store`` / ``MISSIONWEAVE_DATA_DIR`` (issue 29 item 8)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MISSIONWEAVE_DATA_DIR", raising=False)
    with pytest.raises(CliError) as info:
        open_store(None, None, None, False)
    assert str(info.value) == (
        f"no artifact store at {tmp_path.resolve() / 'data' / 'artifacts'} (the default "
        "./data/artifacts, relative to the current directory): give the store's directory "
        "with --store DIR, or set MISSIONWEAVE_DATA_DIR to the data directory of "
        "`missionweave dev up`"
    )
