"""End to end on the real Temporal dev server: the research-and-summarise example
(``examples/missions/research.yaml``, handlers ``examples.agents.research``) runs as a Mission
whose WorkItems are Pydantic AI agents on offline models; it completes verified, and the log
shows what each WorkItem was charged in tokens and tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from temporalio.testing import WorkflowEnvironment

from missionweave.agents import CONVERSATION_MEDIA_TYPE
from missionweave.protocol.temporal_contract import MissionSpec
from missionweave.worker import load_handlers
from tests.support.mission_harness import mission_stack

ROOT = Path(__file__).resolve().parents[2]


async def test_the_research_mission_of_two_agents_completes_verified__MW_13_2_a(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    raw = yaml.safe_load((ROOT / "examples" / "missions" / "research.yaml").read_text())
    async with mission_stack(dev_env, tmp_path) as ms:
        caps = ["research.gather@1.0", "research.write@1.0"]
        await ms.agent("researcher-1", load_handlers("examples.agents.research"), capabilities=caps)
        spec = MissionSpec.model_validate({**raw, "group_id": ms.group})
        result = await (await ms.start(spec)).result()
        events = ms.events()
        gather_usage = json.loads(
            ms.stack.authority.work_item(ms.group, "research-1:gather")["usage"]
        )

    assert result.status == "completed"
    assert {i.work_item_id: i.state.value for i in result.items} == {
        "research-1:gather": "verified",
        "research-1:write": "verified",
    }
    # the log: after each model response, the WorkItem's charged tokens and tool calls
    charged = {
        e.work_item_id: e.body["checkpoint"]["agent"]
        for e in events
        if e.type == "work.progress_reported" and "agent" in e.body.get("checkpoint", {})
    }
    gather, write = charged["research-1:gather"], charged["research-1:write"]
    assert gather["tool_calls"] == 3 and gather["requests"] == 4  # a search per keyword
    assert write["tool_calls"] == 0 and write["requests"] == 1
    assert gather["tokens"] > 0 and write["tokens"] > 0
    assert gather_usage["tokens"] == gather["tokens"]  # the Authority charged just that
    assert gather_usage["tool_calls"] == 3
    # the summary states the gathered facts, read from the dependency's Artifact
    submitted = {e.work_item_id: e.body for e in events if e.type == "work.submitted"}
    summary = json.loads(
        ms.artifacts.for_group(ms.group).get(submitted["research-1:write"]["outputs"]["summary"])
    )
    assert "ownership epoch" in summary["text"] and "Budgets cover" in summary["text"]
    published = [json.dumps(e.body) for e in events if e.type == "artifact.published"]
    assert sum(CONVERSATION_MEDIA_TYPE in m for m in published) == 5  # a checkpoint a response
