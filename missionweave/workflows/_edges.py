"""The agent's activity as the Mission workflow calls it: a typed reference, not a string.

Agents implement it (``WorkItemExecutor.execute_work_item`` in ``missionweave.worker._execute``,
registered under the same name on ``missionweave-agent-<agent_id>/<group_id>``, the agent's
inbox for the Mission's Group); the workflow never runs this body.
"""

from __future__ import annotations

from temporalio import activity

from ..protocol.temporal_contract import EXECUTE_WORK_ITEM, ExecuteWorkItemInput, WorkOutcome


@activity.defn(name=EXECUTE_WORK_ITEM)
async def execute_work_item(work: ExecuteWorkItemInput) -> WorkOutcome:
    """Offer ``work`` to an agent, or resume it there; returns the outcome with the
    Authority's Events (docs/design.md §4.3-6).

    Raises:
        NotImplementedError: always — it runs on the agent's task queue, never here.
    """
    raise NotImplementedError("execute_work_item runs on the agent's task queue")


__all__ = ["execute_work_item"]
