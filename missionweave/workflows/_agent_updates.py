"""The agents' Updates of the Mission workflow, as a mixin: ``accept_offer`` (optionally with
``then_start``), ``decline_offer`` and ``start_work``. Each carries the agent's own signed
Command; the validator refuses stale or impossible requests before they reach history, the
handler enqueues the Command for the main loop's next Authority batch and answers the verdict
(docs/design.md §4.4-5, MW-10.3-c/e, MW-11.3-b).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..protocol import Command, WorkItemState
    from ..protocol.mission import AgentCommandInput, BatchEntry, CommandVerdict
    from ._review import refuse as _refuse
    from ._state import ItemState

if TYPE_CHECKING:
    from ._state import MissionState

S = WorkItemState


class AgentUpdatesMixin:
    """The agent-facing part of :class:`~missionweave.workflows.MissionWorkflow`."""

    if TYPE_CHECKING:
        s: MissionState
        queue: list[BatchEntry]
        tasks: dict[str, asyncio.Task[None]]
        wake: bool

        async def _execute(self, item: ItemState) -> None: ...

    def _enqueue(self, command: Command) -> str:
        cid = command.command_id
        if cid not in self.s.verdicts and not any(
            e.command is not None and e.command.command_id == cid for e in self.queue
        ):
            self.queue.append(BatchEntry(command=command))
        return cid

    async def _forward(self, cmd_input: AgentCommandInput) -> CommandVerdict:
        cid = self._enqueue(cmd_input.command)
        await workflow.wait_condition(lambda: cid in self.s.verdicts)
        return self.s.verdicts[cid]

    def _started(self, verdict: CommandVerdict, wid: str) -> None:
        """After a ``work.start`` verdict: run the WorkItem when the Authority granted it."""
        item = self.s.items[wid]
        if verdict.accepted and item.state is S.ACTIVE and wid not in self.tasks:
            self.tasks[wid] = asyncio.create_task(self._execute(item))

    def _validate_agent(self, cmd_input: AgentCommandInput, type: str,
                        states: set[WorkItemState]) -> ItemState:  # fmt: skip
        cmd = cmd_input.command
        if cmd.command_id in self.s.verdicts:
            return self.s.items[str(cmd.body.get("work_item_id"))]
        if cmd.type != type:
            raise _refuse("wrong_command_type", f"expected a {type} Command, got {cmd.type}")
        if cmd.group_id != self.s.spec.group_id:
            raise _refuse("wrong_group", f"the Mission's Group is {self.s.spec.group_id}")
        item = self.s.items.get(str(cmd.body.get("work_item_id")))
        if item is None:
            raise _refuse("unknown_work_item", "unknown WorkItem")
        if item.state not in states:
            raise _refuse("stale_request", f"WorkItem {item.work_item_id} is {item.state.value}")
        return item

    @workflow.update
    async def accept_offer(self, cmd: AgentCommandInput) -> CommandVerdict:
        """An agent accepts an offer with its signed ``work.accept_offer`` (MW-10.3-c); with
        ``then_start``, it also starts at once (MW-11.3-b): both go in one Authority batch, in
        that order, and the start's verdict is the answer's ``start``."""
        start = cmd.then_start
        if start is None:
            return await self._forward(cmd)
        cid, sid = self._enqueue(cmd.command), self._enqueue(start)
        await workflow.wait_condition(lambda: cid in self.s.verdicts and sid in self.s.verdicts)
        self._started(self.s.verdicts[sid], str(start.body.get("work_item_id")))
        return self.s.verdicts[cid].model_copy(update={"start": self.s.verdicts[sid]})

    @accept_offer.validator
    def _check_accept(self, cmd: AgentCommandInput) -> None:
        self._check_then_start(cmd)
        item = self._validate_agent(
            cmd, "work.accept_offer", {S.OFFERED, S.OPEN, S.FAILED, S.QUEUED, S.BLOCKED, S.ACTIVE}
        )
        # The agent may see the offer on the Group stream before this workflow has applied
        # the Authority's verdict on it: while an offer is in flight, the Authority judges.
        if item.offer_pending or cmd.command.command_id in self.s.verdicts:
            return
        if item.state is not S.OFFERED:
            raise _refuse("stale_request", f"WorkItem {item.work_item_id} is {item.state.value}")
        if cmd.command.actor not in item.offer_candidates:
            raise _refuse("not_a_candidate", "not a candidate of the current offer")

    def _check_then_start(self, cmd: AgentCommandInput) -> None:
        start, accept = cmd.then_start, cmd.command
        if start is None or start.command_id in self.s.verdicts:
            return
        if start.type != "work.start":
            raise _refuse("wrong_command_type", f"then_start must be work.start, got {start.type}")
        if (start.group_id, start.actor, start.body.get("work_item_id")) != (
            accept.group_id, accept.actor, accept.body.get("work_item_id")
        ):  # fmt: skip
            raise _refuse("then_start_mismatch",
                          "then_start must be the same agent's, for the same WorkItem")  # fmt: skip

    @workflow.update
    async def decline_offer(self, cmd: AgentCommandInput) -> CommandVerdict:
        """An agent declines with a structured reason (MW-10.3-e)."""
        verdict = await self._forward(cmd)
        self.wake = True
        return verdict

    @decline_offer.validator
    def _check_decline(self, cmd: AgentCommandInput) -> None:
        item = self._validate_agent(
            cmd, "work.decline_offer", {S.OFFERED, S.OPEN, S.FAILED, S.QUEUED, S.BLOCKED, S.ACTIVE}
        )
        if item.state is not S.OFFERED and not item.offer_pending:
            raise _refuse("stale_request", f"WorkItem {item.work_item_id} is {item.state.value}")

    @workflow.update
    async def start_work(self, cmd: AgentCommandInput) -> CommandVerdict:
        """The owner starts: the Authority grants a lease, then ``execute_work_item`` runs on
        the owner's task queue (MW-11.3-b)."""
        verdict = await self._forward(cmd)
        self._started(verdict, str(cmd.command.body.get("work_item_id")))
        return verdict

    @start_work.validator
    def _check_start(self, cmd: AgentCommandInput) -> None:
        item = self._validate_agent(cmd, "work.start", {S.QUEUED, S.OFFERED})
        # Agents learn of their acceptance from the Group stream, possibly before this
        # workflow has applied it: an owner not yet known here is for the Authority to judge.
        if cmd.command.command_id in self.s.verdicts or item.state is S.OFFERED:
            return
        if cmd.command.actor != item.owner:
            raise _refuse("not_owner", "only the owner may start the WorkItem")


__all__ = ["AgentUpdatesMixin"]
