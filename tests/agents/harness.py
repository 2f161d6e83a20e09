"""Agents run inside a WorkItem for real: the ``execute_work_item`` activity in
``ActivityEnvironment`` against a :class:`~tests.support.world.World`'s Authority on loopback, with
a filesystem artifact store, and scripted Pydantic AI models that need no network.

:class:`Script` is a ``FunctionModel`` function: one :class:`ModelResponse` per step, the
messages the model was sent at each step kept for the test to read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.testing import ActivityEnvironment

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor
from missionweave.protocol.temporal_contract import (
    ExecuteWorkItemInput,
    LeaseGrant,
    WorkOutcome,
)
from missionweave.worker._execute import WorkItemExecutor
from tests.support.executor_harness import Handler, grant, registry_of
from tests.support.world import World

Step = Callable[[list[ModelMessage], AgentInfo], ModelResponse]

#: A contract the agent tests start from: two criteria, tools named, a short heartbeat.
AGENT_CONTRACT: dict[str, Any] = {
    "allowed_tools": ["search"],
    "budget": {"tool_calls": 100, "tokens": 100_000, "wall_clock_ms": 600_000},
    "timeouts": {
        "start_deadline_ms": 60_000,
        "lease_ms": 30_000,
        "heartbeat_ms": 300,
        "blocked_lease_ms": 120_000,
    },
}


@dataclass
class Script:
    """A scripted model: ``steps[i]`` answers the i-th request (0-based); ``seen`` keeps what
    each request carried and ``tools`` the tool names it was shown."""

    steps: list[Step]
    seen: list[list[ModelMessage]] = field(default_factory=list)
    tools: list[list[str]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools.append([t.name for t in info.function_tools])
        return self.steps[len(self.seen) - 1](messages, info)

    @property
    def requests(self) -> int:
        """Model requests made so far."""
        return len(self.seen)

    def model(self) -> FunctionModel:
        """The ``FunctionModel`` that answers with this script."""
        return FunctionModel(self, model_name="scripted")


def contract_over(**over: Any) -> dict[str, Any]:
    """:data:`AGENT_CONTRACT` with ``over`` on top (a shallow merge per field)."""
    return {**AGENT_CONTRACT, **over}


def agent_grant(w: World, wid: str, worker: Actor, input: dict[str, Any], **over: Any) -> Any:
    """Offer, accept and start ``wid`` on an agent contract; the activity input."""
    work = grant(w, wid, worker, **contract_over(**over))
    return work.model_copy(update={"input": input})


def restart(w: World, work: ExecuteWorkItemInput, worker: Actor) -> ExecuteWorkItemInput:
    """``work.start`` again for the owner of a paused ``work``: the activity input the
    workflow builds to resume it, with the checkpoint the Authority kept."""
    wid = work.work_item_id
    start = {"work_item_id": wid, "ownership_epoch": w.item(wid)["ownership_epoch"]}
    r = w.ok(worker, "work.start", start)
    lease = {k: v for k, v in r.reply["lease"].items() if k != "renewals"}
    grant = LeaseGrant(**lease, capability_token=r.reply["capability_token"])
    return work.model_copy(update={"lease": grant, "checkpoint": r.reply.get("checkpoint")})


async def execute(url: str, actor: Actor, work: ExecuteWorkItemInput, fn: Handler) -> WorkOutcome:
    """Run ``work`` as ``actor`` with handler ``fn`` (capability ``dist.verify@1.0``); its
    Artifacts go through the Authority at ``url`` (the ``live`` fixture serves the filesystem
    store ``tmp_path/artifacts``); the activity's outcome."""
    async with AuthorityClient(url, signing_key=actor.key) as client:
        executor = WorkItemExecutor(actor, client, registry_of(fn))
        result: WorkOutcome = await ActivityEnvironment().run(executor.execute_work_item, work)
        return result
