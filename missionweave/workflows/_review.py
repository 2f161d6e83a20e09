"""Review of submitted WorkItems in the spec's order (MW-13.2-b): :class:`Reviews`, a part of the
Mission workflow. Every step's result is kept in the item's :class:`ReviewRecord`
(``MissionState.reviews``) and shown in the Mission's result.

1. ``integrity`` and 2. ``deterministic`` — the coordinator's ``review_submissions`` step
   (a local activity, :mod:`missionweave.activities._review`): Artifact integrity and output
   schemas, then Evidence for every criterion and the registered checks.
3. ``semantic`` — when the contract has ``semantic`` or ``qualitative`` criteria, the workflow
   authorizes a review WorkItem ``<item>:review`` whose input is a :class:`ReviewRequest` and
   whose criteria carry the same ids; it is offered only to agents holding the Mission's reviewer
   capability and the ``reviewer`` role, never to the submitter. The workflow waits for it to be
   verified; the reviewer's Evidence is the step's Evidence, and any result but ``pass`` fails
   the step.
4. ``verdict`` — the combined result of the steps so far.
5. ``approval`` — when the contract has ``human`` criteria and the verdict passed: the workflow
   waits for the ``approve`` update carrying a MissionOwner's signed ``approval.grant_result``
   (or ``approval.deny_result``) naming the digest of steps 1–4; the Authority checks the
   signature and the role, and a refused Command leaves the WorkItem waiting.

Then ``work.accept_result`` (every step passed) or ``work.fail`` (with every step's Evidence).
Steps 1–2 of each submission are a :class:`ReviewCase` (queued, in the coordinator's step,
answered), sent in rounds of one ``review_submissions`` step. Waiting (steps 3 and 5) is plain
state in the :class:`ReviewRecord` (its ``stage``), advanced by the main loop, so a Mission
waiting days for an Approval may continue as new. Steps 3–5 as data: :mod:`._review_steps`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..protocol import RejectionCode, WorkItemState
    from ..protocol.review_decision import decision_command, verdict_step
    from ..protocol.temporal_contract import (
        ApprovalInput,
        CommandVerdict,
        DecisionSlot,
        OfferAfter,
        ReviewBatch,
        ReviewInput,
        ReviewResult,
    )
    from ._board import Board
    from ._commands import Commands
    from ._plan import offers_after
    from ._review_steps import (
        APPROVAL_COMMANDS,
        SEMANTIC_KINDS,
        approval_since_review,
        approval_step,
        awaits_approval,
        criteria,
        final_if_passed,
        review_digest,
        review_id,
        review_work_item,
        semantic_step,
    )
    from ._state import ItemState, ReviewRecord, ReviewStage, name_items
    from ._steps import coordinator_activity
    from ._work import Offers, Wanted


def refuse(code: RejectionCode, message: str) -> ApplicationError:
    """An update validator's refusal; agents see ``code`` as the rejection code (the error's
    ``type``, the code's wire string)."""
    return ApplicationError(message, type=code.value, non_retryable=True)


class Checks(enum.Enum):
    """Where steps 1–2 of a :class:`ReviewCase` are."""

    QUEUED = enum.auto()  # for the next round
    SENT = enum.auto()  # in the round's coordinator step
    ANSWERED = enum.auto()  # :attr:`ReviewCase.result` holds the step's answer


@dataclass
class ReviewCase:
    """Steps 1–2 of one submission: what the coordinator's step checks, and its answer."""

    input: ReviewInput
    checks: Checks = Checks.QUEUED
    result: ReviewResult | None = None


@dataclass(frozen=True)
class ReviewRound:
    """In flight: one ``review_submissions`` step (one at a time)."""


@dataclass(frozen=True)
class LostReview:
    """In flight: the review of a submission the Authority holds whose activity's result was
    lost."""

    work_item_id: str


class Reviews:
    """The reviews of one Mission's submissions (see the module).

    ``offers`` offers the dependents a round's accepted results make eligible;
    ``authorize`` queues ``work.authorize`` for a new WorkItem (a review WorkItem, step 3).
    """

    def __init__(
        self,
        board: Board,
        commands: Commands,
        offers: Offers,
        authorize: Callable[[ItemState], str],
    ) -> None:
        self._board = board
        self._commands = commands
        self._offers = offers
        self._authorize = authorize
        #: Steps 1–2 under way, by WorkItem, in the order they were asked for.
        self._cases: dict[str, ReviewCase] = {}

    def _record(self, item: ItemState) -> ReviewRecord:
        """``item``'s review record, made on its first review."""
        return self._board.state.reviews.setdefault(item.work_item_id, ReviewRecord())

    # ------------------------------------------------------------------ steps 1 and 2

    async def review(self, item: ItemState) -> None:
        """Review a submission (MW-13.2-b): steps 1–2 in the coordinator's activity, then a
        review WorkItem for semantic criteria (step 3) or straight to the verdict (step 4).
        Only an Approval recorded from now on decides step 5
        (:func:`~._review_steps.approval_since_review`)."""
        self._board.run(item.work_item_id).reviewing = True
        record = self._record(item)
        record.stage = record.review_item = record.digest = None
        record.since_seq = item.w.seq
        slot = DecisionSlot(
            command_id=self._commands.new_id(),
            issued_at_ms=self._board.now(),
            final_if_passed=final_if_passed(item),
        )
        wid = item.work_item_id
        case = self._cases[wid] = ReviewCase(
            ReviewInput(
                group_id=self._board.state.spec.group_id,
                mission_id=self._board.state.spec.mission_id,
                work_item_id=wid,
                contract=item.spec.contract,
                outputs=item.outputs,
                artifacts=item.artifacts,
                evidence=item.evidence,
                review_of=item.review_of,
                decision=slot,
            )
        )
        await workflow.wait_condition(lambda: case.checks is Checks.ANSWERED)
        if self._cases.get(wid) is case:
            del self._cases[wid]
        result = case.result
        assert result is not None
        if result.verdict is not None:  # the step issued the decision (steps 1–4), applied
            return
        self._record(item).steps = list(result.steps)
        if result.passed and item.review_of is None and criteria(item, SEMANTIC_KINDS):
            self._request_review(item)
        else:
            self._verdict(item)

    def due(self) -> bool:
        """Submissions wait for a round, and none is under way."""
        return ReviewRound() not in self._board.tasks and any(
            c.checks is Checks.QUEUED for c in self._cases.values()
        )

    def start_round(self) -> None:
        """Review what was submitted since the last round, in one ``review_submissions``
        local activity (one at a time: submissions arriving meanwhile make the next round).
        The same step offers the dependents whose results it accepts (issue 26): a
        dependency hop costs one coordinator step, not a review and then a ranking."""
        if not self.due():
            return
        batch = [c for c in self._cases.values() if c.checks is Checks.QUEUED]
        for c in batch:
            c.checks = Checks.SENT
        follow: Wanted = []
        if not self._board.draining():
            accepting = [
                c.input.work_item_id
                for c in batch
                if c.input.decision and c.input.decision.final_if_passed
            ]
            board = self._board
            follow = offers_after(board.state, board.graph, board.now(), accepting, board.runs)
        self._board.spawn(ReviewRound(), lambda: self._round(batch, follow))

    async def _round(self, batch: list[ReviewCase], follow: Wanted) -> None:
        requests = self._offers.requests(follow)
        try:
            try:
                done = await coordinator_activity(
                    CoordinatorActivities.review_submissions,
                    ReviewBatch(
                        reviews=[c.input for c in batch],
                        then_offer=[
                            OfferAfter(after=after, request=req)
                            for (_, after), req in zip(follow, requests, strict=True)
                        ],
                    ),
                    start_to_close=timedelta(minutes=5),
                    items=len(batch) + len(follow),
                    summary="review "
                    + name_items([c.input.work_item_id for c in batch])
                    + (f", offer {name_items([w for w, _ in follow])}" if follow else ""),
                )
            except BaseException:
                self._offers.done(follow)
                raise
            for case, res in zip(batch, done.results, strict=True):
                case.result, case.checks = res, Checks.ANSWERED
                if res.verdict is not None:  # the step decided: its Events before the offers'
                    item = self._board.state.items[case.input.work_item_id]
                    record = self._record(item)
                    record.steps, record.stage = list(res.steps), None
                    self._commands.issued(res.verdict, _decided(self._board, item.work_item_id))
            await self._offers.offered(follow, done.offers or [None] * len(follow))
        finally:
            self._board.wake = True

    def review_lost(self, item: ItemState) -> None:
        """Review a submission the Authority holds whose activity's result was lost."""

        async def lost() -> None:
            try:
                await self.review(item)
            finally:
                self._board.wake = True

        self._board.spawn(LostReview(item.work_item_id), lost)

    # ------------------------------------------------------------------------- step 3

    def _request_review(self, item: ItemState) -> None:
        """Authorize the review WorkItem of ``item`` and wait for it (step 3)."""
        board = self._board
        record = self._record(item)
        rid = review_id(board.state, item, record)
        review = review_work_item(item, rid, board.state.spec)
        board.graph.add({rid: []}, {rid: review.spec.contract.dependency_strategy})
        board.state.items[rid] = review
        board.attention.add(rid)
        self._authorize(review)
        record.review_item, record.stage = rid, ReviewStage.SEMANTIC
        run = self._board.run(item.work_item_id)
        run.reviewing = False
        run.note(f"awaiting reviewer Evidence from {rid}")

    # ------------------------------------------------------------------ steps 4 and 5

    def _verdict(self, item: ItemState) -> None:
        """Step 4: the combined verdict; then the Approval when a criterion is ``human``."""
        record = self._record(item)
        record.steps.append(verdict_step(record.steps))
        if record.steps[-1].passed and awaits_approval(item):
            record.stage = ReviewStage.APPROVAL
            run = self._board.run(item.work_item_id)
            run.reviewing = False
            record.digest = review_digest(record.steps)
            run.note(f"awaiting a MissionOwner's approval of review {record.digest[:16]}")
            return
        self._decide(item, record.steps[-1].passed)

    def _decide(self, item: ItemState, passed: bool) -> None:
        """``work.accept_result`` or ``work.fail`` with every step's Evidence."""
        record = self._record(item)
        record.stage = None
        self._board.run(item.work_item_id).reviewing = True
        type_, body = decision_command(item.work_item_id, record.steps, passed, self._board.now())
        self._commands.intent(type_, body, _decided(self._board, item.work_item_id))

    def advance(self) -> None:
        """Move waiting reviews on (called by the main loop after every batch): a verified
        review WorkItem gives step 3, a MissionOwner's recorded decision gives step 5."""
        state = self._board.state
        for item in list(state.items.values()):  # in authorization order: Command ids follow it
            record = state.reviews.get(item.work_item_id)
            if record is None or record.stage is None:
                continue
            if item.state is not WorkItemState.SUBMITTED:  # cancelled or failed meanwhile
                record.stage = None
            elif record.stage is ReviewStage.SEMANTIC:
                review = state.items.get(record.review_item or "")
                if review is not None and review.state is WorkItemState.VERIFIED:
                    record.steps.append(semantic_step(item, review))
                    record.stage = None
                    self._verdict(item)
            elif (a := approval_since_review(item, record)) is not None and (
                a.get("ownership_epoch") == item.ownership_epoch
            ):
                record.steps.append(approval_step(item, record, a, self._board.now()))
                self._decide(item, record.steps[-1].passed)

    # ------------------------------------------------------------------ the approve update

    async def approve(self, inp: ApprovalInput) -> CommandVerdict:
        """A MissionOwner's decision on a reviewed result (MW-13.2-b step 5): its own signed
        ``approval.grant_result`` or ``approval.deny_result``. The Authority checks the
        signature, the ``mission_owner`` role and the state; a refused Command leaves the
        WorkItem waiting. ``missionweave approve`` sends it."""
        return await self._commands.forward(inp.command)

    def check_approve(self, inp: ApprovalInput) -> None:
        """The ``approve`` update's validator.

        Raises:
            ApplicationError: the Command is not an Approval of this Mission's WorkItem
                awaiting one, or names another review record."""
        cmd = inp.command
        if cmd.command_id in self._board.state.verdicts:
            return
        if cmd.type not in APPROVAL_COMMANDS:
            raise refuse(
                RejectionCode.WRONG_COMMAND_TYPE,
                f"expected approval.grant_result or approval.deny_result, got {cmd.type}",
            )
        if cmd.group_id != self._board.state.spec.group_id:
            raise refuse(
                RejectionCode.WRONG_GROUP,
                f"the Mission's Group is {self._board.state.spec.group_id}",
            )
        item = self._board.state.items.get(str(cmd.body.get("work_item_id")))
        if item is None:
            raise refuse(RejectionCode.UNKNOWN_WORK_ITEM, "unknown WorkItem")
        record = self._board.state.reviews.get(item.work_item_id)
        if record is None or record.stage is not ReviewStage.APPROVAL:
            raise refuse(
                RejectionCode.NOT_AWAITING_APPROVAL,
                f"WorkItem {item.work_item_id} is not awaiting approval",
            )
        if cmd.body.get("review_digest") != record.digest:
            raise refuse(
                RejectionCode.STALE_REVIEW,
                f"the review record of {item.work_item_id} is {record.digest}",
            )


def _decided(board: Board, wid: str) -> Callable[[CommandVerdict], None]:
    """The verdict on a review's decision (``work.accept_result`` or ``work.fail``) ends it."""

    def then(v: CommandVerdict) -> None:
        if wid in board.state.items:
            board.run(wid).reviewing = False

    return then


__all__ = [
    "LostReview",
    "ReviewCase",
    "ReviewRound",
    "Reviews",
    "refuse",
]
