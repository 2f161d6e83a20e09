"""Review of submitted WorkItems in the spec's order (MW-13.2-b): :class:`Reviews`, a part of the
Mission workflow. Every step's result is kept in ``ItemState.review`` and shown in the Mission's
result.

1. ``integrity`` and 2. ``deterministic`` — the coordinator's ``review_submission`` activity
   (:mod:`missionweave.activities._review`): Artifact integrity and output schemas, then
   Evidence for every criterion and the registered checks.
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
state in :class:`ItemState` (``review_stage``), advanced by the main loop, so a Mission waiting
days for an Approval may continue as new.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..protocol import (
        AcceptanceCriterion,
        Budget,
        CommandType,
        Deliverable,
        EventType,
        Evidence,
        RejectionCode,
        WorkContract,
        WorkItemState,
        digest,
    )
    from ..protocol.review_decision import decision_command, verdict_step
    from ..protocol.temporal_contract import (
        ApprovalInput,
        CommandVerdict,
        DecisionSlot,
        OfferAfter,
        ReviewBatch,
        ReviewInput,
        ReviewRequest,
        ReviewResult,
        ReviewStep,
        WorkItemSpec,
    )
    from ._board import Board
    from ._commands import Commands
    from ._plan import offers_after
    from ._state import ItemState, ReviewStage, name_items
    from ._steps import coordinator_activity
    from ._work import Offers, Wanted

#: Criterion kinds a reviewer agent judges (step 3).
SEMANTIC_KINDS = frozenset({"semantic", "qualitative"})
#: The MissionOwner's Commands on a reviewed result (step 5) → whether they grant it.
APPROVAL_COMMANDS = {
    CommandType.APPROVAL_GRANT_RESULT: True,
    CommandType.APPROVAL_DENY_RESULT: False,
}
_MAX_ID = 128


def refuse(code: str, message: str) -> ApplicationError:
    """An update validator's refusal; agents see ``code`` as the rejection code."""
    return ApplicationError(message, type=code, non_retryable=True)


def review_digest(steps: list[ReviewStep]) -> str:
    """SHA-256 hex of the canonical review record (steps 1–4) a MissionOwner approves."""
    return digest([st.model_dump(mode="json") for st in steps])


def criteria(item: ItemState, kinds: frozenset[str]) -> list[AcceptanceCriterion]:
    """The item's acceptance criteria of the given kinds."""
    return [c for c in item.spec.contract.acceptance_criteria if c.kind in kinds]


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

    # ------------------------------------------------------------------ steps 1 and 2

    async def review(self, item: ItemState) -> None:
        """Review a submission (MW-13.2-b): steps 1–2 in the coordinator's activity, then a
        review WorkItem for semantic criteria (step 3) or straight to the verdict (step 4).
        Only an Approval recorded from now on decides step 5 (:meth:`_approval`)."""
        item.reviewing = True
        item.review_stage = item.review_item = item.review_digest = None
        item.review_since_seq = item.w.seq
        slot = DecisionSlot(
            command_id=self._commands.new_id(),
            issued_at_ms=self._board.now(),
            final_if_passed=self._final_if_passed(item),
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
        item.review = list(result.steps)
        if result.passed and item.review_of is None and criteria(item, SEMANTIC_KINDS):
            self._request_review(item)
        else:
            self._verdict(item)

    def due(self) -> bool:
        """Submissions wait for a round, and none is under way."""
        return ReviewRound() not in self._board.in_flight and any(
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
            follow = offers_after(board.state, board.graph, board.now(), accepting)
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
                    item.review, item.review_stage = list(res.steps), None
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

    def _review_id(self, item: ItemState) -> str:
        n = item.reviews + 1
        while True:
            rid = f"{item.work_item_id}:review" + (str(n) if n > 1 else "")
            if len(rid) > _MAX_ID:
                rid = f"review-{digest(item.work_item_id)[:32]}-{n}"
            if self._board.state.state_of(rid) is None:
                item.reviews = n
                return rid
            n += 1

    def _request_review(self, item: ItemState) -> None:
        """Authorize the review WorkItem of ``item`` and wait for it (step 3)."""
        c = item.spec.contract
        semantic = criteria(item, SEMANTIC_KINDS)
        ids = {k.id for k in semantic}
        rid = self._review_id(item)
        contract = WorkContract(
            objective=f"Review WorkItem {item.work_item_id} of Mission "
            f"{self._board.state.spec.mission_id} against its semantic and qualitative criteria",
            deliverables=[Deliverable(name="review")],
            # same ids; kind deterministic: a review WorkItem is never itself reviewed by
            # another reviewer (its Evidence is checked for presence only)
            acceptance_criteria=[
                AcceptanceCriterion(
                    id=k.id,
                    description=k.description,
                    kind="deterministic",
                    evidence_required=k.evidence_required,
                )
                for k in semantic
            ],
            required_capabilities=[self._board.state.spec.review.reviewer_capability],
            deadline_ms=c.deadline_ms,
            urgency=c.urgency,
            business_impact=c.business_impact,
            budget=Budget(wall_clock_ms=c.budget.wall_clock_ms),
            retry=c.retry,
            timeouts=c.timeouts,
            risk_class=c.risk_class,
            allowed_data=c.allowed_data,
            notes=f"review of {item.work_item_id}",
        )
        request = ReviewRequest(
            subject=item.work_item_id,
            mission_id=self._board.state.spec.mission_id,
            objective=c.objective,
            criteria=semantic,
            outputs=item.outputs,
            artifacts=item.artifacts,
            evidence=[e for e in item.evidence if e.criterion in ids],
        )
        review = ItemState(
            spec=WorkItemSpec(
                work_item_id=rid, contract=contract, input=request.model_dump(mode="json")
            ),
            review_of=item.work_item_id,
            excluded=[item.owner] if item.owner else [],
        )
        self._board.graph.add({rid: []}, {rid: contract.dependency_strategy})
        self._board.state.items[rid] = review
        self._board.attention.add(rid)
        self._authorize(review)
        item.review_item, item.review_stage, item.reviewing = rid, ReviewStage.SEMANTIC, False
        item.detail = f"awaiting reviewer Evidence from {rid}"

    def _semantic_step(self, item: ItemState, review: ItemState) -> ReviewStep:
        by: dict[str, list[Evidence]] = {}
        for e in review.evidence:
            by.setdefault(e.criterion, []).append(e)
        problems: list[str] = []
        evidence: list[Evidence] = []
        for k in criteria(item, SEMANTIC_KINDS):
            found = by.get(k.id, [])
            if not found:
                problems.append(f"{k.id}: no reviewer Evidence")
            for e in found:
                evidence.append(e)
                if e.result != "pass":
                    problems.append(
                        f"{k.id}: reviewer {e.producer} says {e.result}"
                        + (f" ({e.summary[:200]})" if e.summary else "")
                    )
        return ReviewStep(
            step="semantic",
            passed=not problems,
            evidence=evidence,
            detail="; ".join(problems)
            or f"reviewer {review.owner} passed every criterion ({review.work_item_id})",
        )

    # ------------------------------------------------------------------ steps 4 and 5

    def _verdict(self, item: ItemState) -> None:
        """Step 4: the combined verdict; then the Approval when a criterion is ``human``."""
        item.review.append(verdict_step(item.review))
        if item.review[-1].passed and self._awaits_approval(item):
            item.review_stage, item.reviewing = ReviewStage.APPROVAL, False
            item.review_digest = review_digest(item.review)
            item.detail = f"awaiting a MissionOwner's approval of review {item.review_digest[:16]}"
            return
        self._decide(item, item.review[-1].passed)

    def _awaits_approval(self, item: ItemState) -> bool:
        return item.review_of is None and bool(criteria(item, frozenset({"human"})))

    def _final_if_passed(self, item: ItemState) -> bool:
        """Whether steps 1–2 passing decide the WorkItem (no reviewer, no Approval to wait
        for): the review activity then issues the decision itself."""
        return item.review_of is not None or not (
            criteria(item, SEMANTIC_KINDS) or self._awaits_approval(item)
        )

    def _approval_step(self, item: ItemState) -> ReviewStep:
        a = self._approval(item) or {}
        granted = a.get("type") == EventType.APPROVAL_RESULT_GRANTED
        approver = str(a.get("approver") or "?")
        reason = str(a.get("reason") or "")
        what = f"{a.get('type')} by {approver} (seq {a.get('seq')})" + (
            f": {reason}" if reason else ""
        )
        at = a.get("decided_at_ms")
        evidence = [
            Evidence(
                subject=item.work_item_id,
                criterion=k.id,
                method="MissionOwner approval",
                result="pass" if granted else "fail",
                producer=approver,
                timestamp_ms=at if isinstance(at, int) else self._board.now(),
                summary=f"{what}; review {item.review_digest}"[:2000],
            )
            for k in criteria(item, frozenset({"human"}))
        ]
        return ReviewStep(step="approval", passed=granted, detail=what[:2000], evidence=evidence)

    @staticmethod
    def _approval(item: ItemState) -> dict[str, Any] | None:
        """The MissionOwner's decision recorded since the item's review began (the reducer's
        ``approval``; one recorded before it was on an earlier submission)."""
        a = item.w.approval
        since = item.review_since_seq
        if a is None or since is None or int(a.get("seq") or 0) > since:
            return a
        return None

    def _decide(self, item: ItemState, passed: bool) -> None:
        """``work.accept_result`` or ``work.fail`` with every step's Evidence."""
        item.review_stage, item.reviewing = None, True
        type_, body = decision_command(item.work_item_id, item.review, passed, self._board.now())
        self._commands.intent(type_, body, _decided(self._board, item.work_item_id))

    def advance(self) -> None:
        """Move waiting reviews on (called by the main loop after every batch): a verified
        review WorkItem gives step 3, a MissionOwner's recorded decision gives step 5."""
        for item in list(self._board.state.items.values()):
            if item.review_stage is None:
                continue
            if item.state is not WorkItemState.SUBMITTED:  # cancelled or failed meanwhile
                item.review_stage = None
            elif item.review_stage is ReviewStage.SEMANTIC:
                review = self._board.state.items.get(item.review_item or "")
                if review is not None and review.state is WorkItemState.VERIFIED:
                    item.review.append(self._semantic_step(item, review))
                    item.review_stage = None
                    self._verdict(item)
            elif (a := self._approval(item)) is not None and (
                a.get("ownership_epoch") == item.ownership_epoch
            ):
                item.review.append(self._approval_step(item))
                self._decide(item, item.review[-1].passed)

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
                "wrong_command_type",
                f"expected approval.grant_result or approval.deny_result, got {cmd.type}",
            )
        if cmd.group_id != self._board.state.spec.group_id:
            raise refuse("wrong_group", f"the Mission's Group is {self._board.state.spec.group_id}")
        item = self._board.state.items.get(str(cmd.body.get("work_item_id")))
        if item is None:
            raise refuse(RejectionCode.UNKNOWN_WORK_ITEM, "unknown WorkItem")
        if item.review_stage is not ReviewStage.APPROVAL:
            raise refuse(
                "not_awaiting_approval", f"WorkItem {item.work_item_id} is not awaiting approval"
            )
        if cmd.body.get("review_digest") != item.review_digest:
            raise refuse(
                "stale_review", f"the review record of {item.work_item_id} is {item.review_digest}"
            )


def _decided(board: Board, wid: str) -> Callable[[CommandVerdict], None]:
    """The verdict on a review's decision (``work.accept_result`` or ``work.fail``) ends it."""

    def then(v: CommandVerdict) -> None:
        item = board.state.items.get(wid)
        if item is not None:
            item.reviewing = False

    return then


__all__ = [
    "APPROVAL_COMMANDS",
    "SEMANTIC_KINDS",
    "LostReview",
    "ReviewCase",
    "ReviewRound",
    "Reviews",
    "refuse",
    "review_digest",
]
