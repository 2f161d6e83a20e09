"""The Command port of the Mission workflow: every coordinator Command goes out through it.

A part states an intent (:meth:`Commands.intent`) with a deterministic id and, when the verdict
matters to it, the callback that takes the verdict; the main loop sends what is queued in
batches, one ``submit_commands`` local activity per batch (:meth:`Commands.flush`), folds the
accepted Events into the state and calls each intent's callback. A coordinator step that
issued a Command itself (``select_candidates``, ``review_submissions``) hands its verdict to
:meth:`Commands.issued`, which does the same. A person's signed Command (``approve``) is
forwarded unchanged (:meth:`Commands.forward`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..protocol import Command
    from ..protocol.temporal_contract import (
        BatchEntry,
        CommandVerdict,
        CoordinatorIntent,
        SubmitCommandsInput,
    )
    from ._board import Board
    from ._state import name_items
    from ._steps import coordinator_activity

#: Commands per ``submit_commands`` step.
MAX_BATCH = 100

#: What a part does with the Authority's verdict on its intent (applied already).
OnVerdict = Callable[[CommandVerdict], None]


def _item_ids(batch: list[BatchEntry]) -> list[str]:
    """The WorkItems a batch of Commands concerns, in order."""
    out = []
    for e in batch:
        body = e.intent.body if e.intent else e.command.body if e.command else {}
        if "work_item_id" in body:
            out.append(str(body["work_item_id"]))
    return out


class Commands:
    """The coordinator's Commands to the Authority, queued and answered.

    Attributes:
        queue: Commands not sent yet, in order.
        answered: the verdict on each coordinator intent sent in this run, by command id (the
            ``unblock`` and ``authorize_work`` updates answer from here).
    """

    def __init__(self, board: Board, top_up: Callable[[int], None]) -> None:
        """``top_up(n)`` queues up to ``n`` more Commands before each batch (the spec's
        ``work.authorize``, a batch at a time)."""
        self._board = board
        self._top_up = top_up
        self.queue: list[BatchEntry] = []
        self.answered: dict[str, CommandVerdict] = {}
        self._then: dict[str, OnVerdict] = {}

    def new_id(self) -> str:
        """A new coordinator Command id: deterministic, unique within the Mission."""
        state = self._board.state
        state.next_command += 1
        return f"{workflow.info().workflow_id}/c{state.next_command}"

    def intent(
        self, type: str, body: dict[str, Any], then: OnVerdict | None = None, *, suffix: str = ""
    ) -> str:
        """Queue a coordinator Command with a deterministic id (``suffix`` appended) and the
        workflow's time as its issue time; ``then`` takes its verdict. Returns its id."""
        cid = self.new_id() + suffix
        self.queue.append(
            BatchEntry(
                intent=CoordinatorIntent(
                    command_id=cid, type=type, body=body, issued_at_ms=self._board.now()
                )
            )
        )
        if then is not None:
            self._then[cid] = then
        return cid

    def issued(self, verdict: CommandVerdict, then: OnVerdict | None = None) -> None:
        """Take the verdict on a coordinator Command a step issued itself: apply its Events,
        then ``then``."""
        if verdict.status != "rejected":
            self._board.apply(verdict.events)
        if then is not None:
            self._then[verdict.command_id] = then
        self._answer(verdict)
        self._board.wake = True

    def _answer(self, verdict: CommandVerdict) -> None:
        self.answered[verdict.command_id] = verdict
        then = self._then.pop(verdict.command_id, None)
        if then is not None:
            then(verdict)

    def enqueue(self, command: Command) -> str:
        """Queue a person's signed Command (``approve``) for the next batch, once."""
        cid = command.command_id
        if cid not in self._board.state.verdicts and not any(
            e.command is not None and e.command.command_id == cid for e in self.queue
        ):
            self.queue.append(BatchEntry(command=command))
        return cid

    async def forward(self, command: Command) -> CommandVerdict:
        """Submit a person's signed Command and answer the Authority's verdict (a retried
        update is answered from :attr:`MissionState.verdicts`, not submitted twice)."""
        cid = self.enqueue(command)
        state = self._board.state
        await workflow.wait_condition(lambda: cid in state.verdicts)
        return state.verdicts[cid]

    async def flush(self) -> None:
        """Submit queued Commands in batches of :data:`MAX_BATCH` and apply the verdicts.

        Raises:
            asyncio.CancelledError: Temporal's cancel request; the batch cut short is queued
                again (the same ids: sent again, answered idempotently).
        """
        board = self._board
        while True:
            self._top_up(MAX_BATCH - len(self.queue))
            if not self.queue:
                return
            batch, self.queue = self.queue[:MAX_BATCH], self.queue[MAX_BATCH:]
            try:
                result = await coordinator_activity(
                    CoordinatorActivities.submit_commands,
                    SubmitCommandsInput(group_id=board.state.spec.group_id, entries=batch),
                    start_to_close=timedelta(seconds=30),
                    items=len(batch),
                    summary=f"{len(batch)} command(s) to the Authority"
                    + (f" for {named}" if (named := name_items(_item_ids(batch))) else ""),
                )
            except asyncio.CancelledError:
                self.queue = batch + self.queue
                raise
            for entry, verdict in zip(batch, result.verdicts, strict=True):
                if verdict.status != "rejected":
                    board.apply(verdict.events)
                if entry.command is not None:
                    board.state.remember(verdict)
                else:
                    self._answer(verdict)
            board.wake = True


__all__ = ["MAX_BATCH", "Commands", "OnVerdict"]
