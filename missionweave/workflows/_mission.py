"""The ``Mission`` workflow: a WorkItem DAG, offers, leases, execution and review on Temporal.

Every state change goes through the Group Authority as a Command; the workflow folds the
Authority's Events with the one reducer, never its own guess. Agents talk to the Authority
themselves, inside the ``execute_work_item`` activity that is their offer; Updates are for
people and tools only. See docs/design.md §4–§5, docs/missions.md and docs/architecture.md.

:class:`MissionWorkflow` holds ``run``, the main loop and every update, signal and query; the
work is done by the parts it holds, each a plain class over the shared :class:`~._board.Board`:

- :class:`~._commands.Commands`, the Command port: intents queued with their callbacks, sent
  in batches (``submit_commands``), verdicts applied;
- :class:`~._authorize.Authorizations`: ``work.authorize`` and new WorkItems and edges;
- :class:`~._work.Offers`: ranking, offers and one :class:`~._work.Execution` per WorkItem and
  agent;
- :class:`~._review.Reviews`: one :class:`~._review.ReviewCase` per submission, steps 1–5;
- :class:`~._children.Children`: child Missions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from ..outcome import INVALID_MISSION, MISSION_EXISTS, all_errors, mission_failure
    from ..protocol import CommandType, GraphError, RejectionCode, WorkGraph, transition_for
    from ..protocol.temporal_contract import (
        AUTHORIZE_WORK_UPDATE,
        MISSION_WORKFLOW_TYPE,
        REPORT_PROGRESS_SIGNAL,
        ApprovalInput,
        AuthorizeWorkInput,
        CancelInput,
        ChildOutcome,
        CommandVerdict,
        MissionResult,
        MissionSpec,
        MissionStatus,
        ProgressSignal,
        SubmitCommandsResult,
        UnblockInput,
    )
    from ._authorize import Authorizations
    from ._board import Board
    from ._children import CHILD_FINISHED_SIGNAL, Children, ChildStart
    from ._commands import Commands
    from ._input_bounds import spec_input_problem
    from ._plan import finished, plan
    from ._publish import Publisher
    from ._result import RESULT_BUDGET, mission_result
    from ._review import Reviews
    from ._review import refuse as _refuse
    from ._run import IDLE
    from ._started import StartCheck, needs_confirmation
    from ._state import ItemState, MissionState, continue_as_new_args, stand_in_spec
    from ._status import failure_notes, failure_reason, mission_status
    from ._work import Offers

_TRANSITION_UNBLOCK = transition_for(CommandType.WORK_UNBLOCK)
assert _TRANSITION_UNBLOCK is not None

#: The states ``unblock`` may be asked in: the state table's (spec 10.2), not a copy of it.
_UNBLOCK_FROM = frozenset(s for s in _TRANSITION_UNBLOCK.sources if s is not None)


async def _despite_cancel(step: Callable[[], Awaitable[object]]) -> None:
    """Await ``step()``; if Temporal's cancel request interrupts it, once more (a workflow is
    cancelled once): for what follows a decided outcome."""
    try:
        await step()
    except asyncio.CancelledError:
        await step()


def _chain() -> str:
    """This chain of runs (continue-as-new keeps it; a new start under the same workflow id
    does not): the random end of its first run id (a UUIDv7 begins with its time)."""
    return workflow.info().first_execution_run_id.replace("-", "")[-12:]


@workflow.defn(name=MISSION_WORKFLOW_TYPE)
class MissionWorkflow:
    """One Mission. Input: a :class:`MissionSpec` (plain JSON); result: :class:`MissionResult`.

    Updates (people and tools): ``unblock``, ``cancel``, ``authorize_work`` and ``approve``
    (``approve`` carries a MissionOwner's signed Command, see :mod:`._review`).
    Signals: ``report_progress``, ``child_finished``. Query: ``status``.
    Local activities (the coordinator's steps): ``select_candidates``, ``submit_commands``,
    ``review_submissions`` and ``work_item_events``; ``execute_work_item`` on each agent's
    task queue (:mod:`._work`).
    """

    @workflow.init
    def __init__(
        self, spec: MissionSpec | dict[str, Any], resume: MissionState | None = None
    ) -> None:
        # `temporal workflow start --input-file mission.json` passes one argument for two
        # parameters: the SDK then drops the type hints and the spec arrives as a plain dict.
        # The hint admits a dict too, so that a spec that does not validate reaches this
        # validation (and fails the workflow from `run`) rather than failing the decoding of
        # the arguments, a workflow *task* failure Temporal retries forever.
        self.invalid: str | None = None
        self.readable = True  # the spec validated
        try:
            spec = MissionSpec.model_validate(spec)
            if resume is not None:
                resume = MissionState.model_validate(resume)
        except ValidationError as exc:
            self.invalid = f"invalid MissionSpec: {all_errors(exc, MissionSpec)}"
            stand_in = stand_in_spec(spec, workflow.info().workflow_id)
            self.readable, spec, resume = False, stand_in, None
        self.state = resume or MissionState(
            spec=spec, items={i.work_item_id: ItemState(spec=i) for i in spec.items}
        )
        graph = WorkGraph()
        try:
            graph.add(  # archived WorkItems are nodes without edges: nothing waits on them
                {
                    **{w: [] for w in self.state.archived},
                    **{w: it.spec.dependencies for w, it in self.state.items.items()},
                },
                {w: it.spec.contract.dependency_strategy for w, it in self.state.items.items()},
            )
        except GraphError as exc:
            self.invalid = f"invalid Mission: {exc}"
        if resume is None and self.invalid is None:  # inputs no continue-as-new could carry
            self.invalid = spec_input_problem(spec)
        # the parts (docs/architecture.md): each reads the board and sends through the port
        self.board = board = Board(self.state, graph)
        self.commands = Commands(board, top_up=lambda n: self.authorizations.top_up(n))
        self.authorizations = Authorizations(board, self.commands)
        self.offers = Offers(board, self.commands, review=lambda it: self.reviews.review(it))
        self.reviews = Reviews(board, self.commands, self.offers, self.authorizations.authorize)
        self.children = Children(board, self.commands, mission=MissionWorkflow.run)
        self.publisher = Publisher()
        self.exists: str | None = None  # the Authority holds this Mission already

    # ------------------------------------------------------------------------------ run

    @workflow.run
    async def run(
        self, spec: MissionSpec | dict[str, Any], resume: MissionState | None = None
    ) -> MissionResult:
        """Drive the Mission to its end; see :mod:`missionweave.outcome`.

        Raises:
            ApplicationError: non-retryable, the Mission did not complete: ``MissionFailed``
                or ``MissionCancelled`` (details: the :class:`MissionResult`),
                ``InvalidMission`` (a spec that does not validate or an invalid graph; its
                message names the field) or ``MissionExists`` (the Authority holds this
                Mission already: the id of a finished Mission was started again).
        """
        if self.invalid:
            await self._refuse_start(INVALID_MISSION, self.invalid, with_result=self.readable)
        self.publisher.publish(self.state, self.board)
        if not self.state.created:
            # Under an id of this chain of runs: another run started later with the same
            # workflow id (a finished Mission's) is answered `mission_exists`, not this
            # run's verdict.
            s = self.state.spec
            self.commands.intent(
                CommandType.MISSION_CREATE,
                {
                    "mission_id": s.mission_id,
                    "title": s.title,
                    **({"parent": s.parent.model_dump()} if s.parent else {}),
                    **({"budget": s.budget.model_dump(mode="json")} if s.budget else {}),
                },
                self._created,
                suffix="@" + _chain(),
            )
            # in dependency order, a batch at a time as they are sent (Commands.flush)
            self.authorizations.unauthorized = self.board.graph.topological_order()
        cancelled = False
        try:
            await self._drive()
        except asyncio.CancelledError:
            # Temporal's cancel request (`temporal workflow cancel`, `handle.cancel()`): the
            # Authority cancels the Mission too, and the execution ends Canceled
            why = workflow.cancellation_reason() or "Temporal cancel request"
            await self._end("cancelled", CommandType.MISSION_CANCEL, why)
            cancelled = self.state.status == "cancelled"
        # the outcome is decided: a cancel request arriving now changes nothing
        await _despite_cancel(lambda: workflow.wait_condition(workflow.all_handlers_finished))
        result = self._result()
        if self.state.spec.parent is not None:
            parent = self.state.spec.parent
            await _despite_cancel(lambda: self.children.report_to_parent(parent, result))
        if cancelled:  # Canceled carries no details: the status query has the result
            raise CancelledError(f"mission {result.mission_id} cancelled: {result.reason}")
        if result.status != "completed":
            raise mission_failure(result)  # the execution fails: its status says what happened
        return result

    def _created(self, v: CommandVerdict) -> None:
        self.state.created = v.accepted
        if v.rejection is not None and v.rejection.code == RejectionCode.MISSION_EXISTS:
            self.exists = (
                f"mission {self.state.spec.mission_id} exists already at the Authority: a "
                f"Mission's id is never started again ({v.rejection.reason}); start it "
                "under a new mission_id, or see it with `missionweave mission status "
                f"{self.state.spec.mission_id}`"
            )

    async def _drive(self) -> None:
        """The main loop: submit, plan, offer, review and wait, until the Mission ends."""
        board, commands, state = self.board, self.commands, self.state
        while True:
            await commands.flush()
            if self.exists is not None:
                await self._refuse_start(MISSION_EXISTS, self.exists, with_result=False)
            self.reviews.start_round()
            self.reviews.advance()  # a verified review WorkItem or an Approval moves a review on
            if state.cancel_reason is not None and state.status == "running":
                await self._end("cancelled", CommandType.MISSION_CANCEL, state.cancel_reason)
                return
            p = plan(state, board.graph, board.now(), board.attention, board.runs)
            board.attention.difference_update(p.settled)
            for wid, at in p.retry_at.items():  # a failed one's backoff starts now
                board.run(wid).retry_at(at)
            for wid, detail in failure_notes(state, p).items():
                board.run(wid).note(detail)
            reason = failure_reason(state, p)
            if reason is not None:
                await self._end("failed", CommandType.MISSION_FAIL, reason)
                return
            # Temporal suggests continuing as new: start nothing more, let what is in flight
            # finish, then continue as new (an activity of a closed run would be lost)
            draining = board.draining()
            if not draining:
                for wid in p.children:
                    self.children.create(state.items[wid])
                for wid in p.resume:
                    self.offers.resume(state.items[wid])
                for wid in p.review:
                    self.reviews.review_lost(state.items[wid])
            if p.offer and not draining:
                await self.offers.select_and_offer(p.offer)
                # Nobody could take them: plan again, or their retry time (set by the ranking,
                # after this plan) gets no timer and they wait for good.
                if not commands.queue:
                    continue
            if commands.queue:
                continue
            if finished(state):
                await self._end("completed", CommandType.MISSION_COMPLETE, "")
                return
            if self._can_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                # A handler that finished meanwhile may have queued a Command: continuing as
                # new now would orphan it.
                if self._can_continue_as_new():
                    workflow.continue_as_new(args=continue_as_new_args(self.state))
                continue
            self.publisher.publish(self.state, self.board)
            board.wake = False
            timeout = None
            if p.next_deadline_ms is not None:
                timeout = timedelta(milliseconds=max(1, p.next_deadline_ms - board.now()))
            try:
                # every reason to act: a change, a Command to send, reviews to start, or a
                # continue-as-new Temporal suggests that nothing in flight holds back any more
                await workflow.wait_condition(
                    lambda: (
                        board.wake
                        or bool(commands.queue)
                        or self.reviews.due()
                        or self._can_continue_as_new()
                    ),
                    timeout=timeout,
                )
            except TimeoutError:
                pass

    async def _refuse_start(self, kind: str, why: str, *, with_result: bool) -> None:
        """End a run that must not go on before anything started (an invalid spec, a Mission
        the Authority holds already): status ``failed`` in the query and search attributes,
        then a non-retryable ``ApplicationError`` of type ``kind`` naming ``why``, with the
        Mission's result in its details when ``with_result``."""
        self.state.status, self.state.end_reason = "failed", why
        if kind == MISSION_EXISTS:  # this run is not the Mission
            self.publisher.withdraw()
        else:
            for wid, item in self.state.items.items():
                if not item.detail:
                    self.board.run(wid).note(f"not authorized: {why}")
            self.publisher.publish(self.state, self.board)
        await workflow.wait_condition(workflow.all_handlers_finished)
        details = [self._result().model_dump(mode="json")] if with_result else []
        raise ApplicationError(why, *details, type=kind, non_retryable=True)

    # --------------------------------------------------------------- updates from people

    @workflow.update
    async def unblock(self, inp: UnblockInput) -> CommandVerdict:
        """Resolve a blocked WorkItem (MW-11.4-c)."""
        cid = self.commands.intent(
            CommandType.WORK_UNBLOCK,
            {"work_item_id": inp.work_item_id, "resolution": inp.resolution},
        )
        await workflow.wait_condition(lambda: cid in self.commands.answered)
        return self.commands.answered[cid]

    @unblock.validator
    def _check_unblock(self, inp: UnblockInput) -> None:
        item = self.state.items.get(inp.work_item_id)
        if item is None or item.state not in _UNBLOCK_FROM:
            raise _refuse(RejectionCode.NOT_BLOCKED, f"WorkItem {inp.work_item_id} is not blocked")

    @workflow.update
    async def cancel(self, inp: CancelInput) -> str:
        """Cancel the Mission; every unfinished WorkItem is cancelled (spec 10.2)."""
        self.state.cancel_reason = inp.reason
        self.board.wake = True
        await workflow.wait_condition(lambda: self.state.status != "running")
        return self.state.status

    @cancel.validator
    def _check_cancel(self, inp: CancelInput) -> None:
        if self.state.status != "running":
            raise _refuse(
                RejectionCode.MISSION_CLOSED, f"the Mission is already {self.state.status}"
            )

    @workflow.update(name=AUTHORIZE_WORK_UPDATE)
    async def authorize_work(self, inp: AuthorizeWorkInput) -> SubmitCommandsResult:
        """Add WorkItems and edges while the Mission runs (MW-10.4-a)."""
        return await self.authorizations.authorize_work(inp)

    @authorize_work.validator
    def _check_authorize(self, inp: AuthorizeWorkInput) -> None:
        self.authorizations.check(inp)

    @workflow.update
    async def approve(self, inp: ApprovalInput) -> CommandVerdict:
        """A MissionOwner's decision on a reviewed result (MW-13.2-b step 5): its own signed
        ``approval.grant_result`` or ``approval.deny_result`` (:meth:`~._review.Reviews.approve`).
        ``missionweave approve`` sends it."""
        return await self.reviews.approve(inp)

    @approve.validator
    def _check_approve(self, inp: ApprovalInput) -> None:
        self.reviews.check_approve(inp)

    @workflow.signal(name=REPORT_PROGRESS_SIGNAL)
    def report_progress(self, sig: ProgressSignal) -> None:
        """Structured progress from the owner (MW-11.4-a), shown by the ``status`` query."""
        item = self.state.items.get(sig.work_item_id)
        if item is None:
            return
        flight = self.board.runs.get(item.work_item_id, IDLE)
        if item.owner == sig.agent_id:
            self.board.run(item.work_item_id).progress(sig.report)
        elif needs_confirmation(item, flight, sig):  # a claim: the Authority's log decides
            key = StartCheck(item.work_item_id)
            if key not in self.board.tasks:
                self.board.spawn(key, lambda: self.offers.confirm_start(item, sig))

    @workflow.signal(name=CHILD_FINISHED_SIGNAL)
    def child_finished(self, out: ChildOutcome) -> None:
        """A child Mission reports its outcome; the parent item follows (spec 10.2)."""
        self.children.finished(out)

    @workflow.query
    def status(self) -> MissionStatus:
        """Per item: state, owner, epoch, lease, attempts, current detail and small outputs
        (:func:`~._status.mission_status`)."""
        return mission_status(self.state, self.board.now())

    # ------------------------------------------------------------------------ the end

    async def _end(self, status: str, command: str, reason: str) -> None:
        """Send the Mission's end to the Authority and take its status. An end already under
        way (Temporal's cancel request arrived meanwhile) is finished instead."""
        if self.board.ending is None:
            self.board.ending = (status, reason)
            for key, task in list(self.board.tasks.items()):
                if not isinstance(key, ChildStart):
                    task.cancel()  # offers and executions in flight: the Authority ends them
            body: dict[str, Any] = {"mission_id": self.state.spec.mission_id}
            if reason:
                body["reason"] = reason
            self.commands.intent(command, body)
        await self.commands.flush()
        self.state.status, self.state.end_reason = self.board.ending
        self.publisher.publish(self.state, self.board)

    def _can_continue_as_new(self) -> bool:
        return (
            workflow.info().is_continue_as_new_suggested()
            and not self.board.tasks
            and not self.commands.queue
            and not any(f.running or f.reviewing for f in self.board.runs.values())
        )

    def _result(self) -> MissionResult:
        """The Mission's result, within Temporal's payload limit
        (:func:`~._result.mission_result`)."""
        return mission_result(self.state)


__all__ = ["RESULT_BUDGET", "MissionWorkflow"]
