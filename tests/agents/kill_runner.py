"""``python -m tests.agents.kill_runner SPEC.json``: run one WorkItem's agent (``resume_agent``)
as ``execute_work_item`` in this process, which kills itself (SIGKILL) when the model is asked
for step ``kill_at``: an agent process that dies mid-run, reporting nothing."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from missionweave.agents import agent_handler
from missionweave.protocol import Actor, SigningKey
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput
from tests.agents.harness import execute
from tests.agents.resume_agent import StepModel, research_agent


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    actor = Actor(spec["agent_id"], SigningKey.from_file(spec["key"]))
    actor.session_epoch = spec["session_epoch"]
    actor.membership_epochs.update(spec["membership_epochs"])
    work = ExecuteWorkItemInput.model_validate_json(spec["work"])
    fn = agent_handler(research_agent(StepModel(kill_at=spec["kill_at"]), []), prompt="research")
    out = asyncio.run(execute(spec["url"], actor, work, fn))
    print("finished", out.kind)  # only when it was not killed


if __name__ == "__main__":
    main(sys.argv[1])
