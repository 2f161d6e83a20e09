"""``missionweave mission graph`` draws the DAG as it is, edges added while the Mission ran
included (MW-10.4-a): a handler adds a WorkItem and an edge into a WorkItem that was waiting,
through the ``authorize_work`` Update (``WorkContext.authorize_work``); the command, run as a
user runs it against the embedded stack, shows those edges, and ``mission status --json``
lists them as the WorkItem's ``dependencies``."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from missionweave.dev import EmbeddedStack
from missionweave.outcome import start_mission
from missionweave.protocol import AgentCard, SigningKey
from missionweave.protocol.temporal_contract import (
    MissionSpec,
    WorkItemSpec,
)
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from tests.support.cli_processes import amw
from tests.support.mission_harness import contract, step_registry
from tests.support.mission_outcome import states

M = "dag-1"
GROW, LAST, ADDED = f"{M}:grow", f"{M}:last", f"{M}:added"


def _registry() -> HandlerRegistry:
    """``demo.step`` and ``graph.grow``: adds ``ADDED`` (after ``GROW``) and the edge
    ``ADDED → LAST``, so ``LAST``, authorized with ``GROW`` as its only dependency, now also
    waits for ``ADDED``."""
    reg = step_registry()

    @reg.handler("graph.grow", version="1.0")
    async def grow(ctx: WorkContext, input: dict[str, object]) -> Submission:
        added = WorkItemSpec(work_item_id=ADDED, contract=contract(), dependencies=[GROW])
        verdicts = await ctx.authorize_work([added], edges=[(ADDED, LAST)])
        assert all(v.accepted for v in verdicts), verdicts
        return Submission(
            outputs={"result": {"added": ADDED}},
            evidence=[ctx.evidence("done", method="authorize_work")],
        )

    return reg


def _edges(mermaid: str) -> set[tuple[str, str]]:
    """The ``(dependency, dependent)`` WorkItem ids of a ``mission graph`` flowchart."""
    nodes = dict(re.findall(r'^  (w\d+)\["([^<]+)<br/>', mermaid, flags=re.M))
    return {
        (nodes[a], nodes[b]) for a, b in re.findall(r"^  (w\d+) --> (w\d+)$", mermaid, flags=re.M)
    }


async def test_mission_graph_shows_edges_added_at_run_time__MW_10_4_a(tmp_path: Path) -> None:
    key = SigningKey.generate()
    card = AgentCard(
        agent_id="ada",
        public_key=key.public_key,
        max_concurrency=2,
        capabilities=["demo.step@1.0", "graph.grow@1.0"],
    )
    async with EmbeddedStack(
        tmp_path, temporal_port=0, authority_port=0, headless=True, group="g1"
    ) as stack:
        await stack.start_agent(card, key, _registry())
        spec = MissionSpec.model_validate(
            {
                "group_id": "g1",
                "mission_id": M,
                "title": "a DAG that grows",
                "items": [
                    {"work_item_id": GROW, "contract": contract(("graph.grow@1.0",)).wire()},
                    {"work_item_id": LAST, "contract": contract().wire(), "dependencies": [GROW]},
                ],
                "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
            }
        )
        handle = await start_mission(stack.client, spec)
        result = await handle.result()
        assert result.status == "completed", result
        assert states(result.items) == {
            GROW: "verified",
            LAST: "verified",
            ADDED: "verified",
        }
        env = {**os.environ, "TEMPORAL_ADDRESS": stack.temporal_target}
        graph = await amw("mission", "graph", M, env=env)
        assert graph.returncode == 0, graph.stderr
        assert _edges(graph.stdout) == {(GROW, LAST), (GROW, ADDED), (ADDED, LAST)}, graph.stdout
        status = await amw("mission", "status", M, "--json", env=env)
        assert status.returncode == 0, status.stderr
        deps = {i["work_item_id"]: i["dependencies"] for i in json.loads(status.stdout)["items"]}
        assert deps == {GROW: [], LAST: [GROW, ADDED], ADDED: [GROW]}
        # the result keeps them too: a closed Mission's graph is drawn from it
        assert {i.work_item_id: i.dependencies for i in result.items} == deps
