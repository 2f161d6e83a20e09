"""Review of submitted WorkItems in the spec's order (MW-13.2-b), as a mixin of the Mission
workflow. Every step's result is kept in ``ItemState.review`` and shown in the Mission's result.

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
Waiting (steps 3 and 5) is plain state in :class:`ItemState`, advanced by the main loop, so a
Mission waiting days for an Approval may continue as new.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..protocol import (
        AcceptanceCriterion,
        Budget,
        Command,
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
    from ._plan import offers_after
    from ._state import ItemState, name_items
    from ._work import coordinator_activity

if TYPE_CHECKING:
    from ..protocol import WorkGraph
    from ..protocol.temporal_contract import SelectCandidatesInput, SelectCandidatesResult
    from ._state import MissionState

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


class ReviewMixin:
    """The review part of :class:`~missionweave.workflows.MissionWorkflow` (see the module)."""

    if TYPE_CHECKING:
        state: MissionState
        graph: WorkGraph
        tasks: dict[str, asyncio.Task[None]]
        wake: bool
        review_queue: list[ReviewInput]
        review_results: dict[str, ReviewResult]
        attention: set[str]

        def _intent(self, type: str, body: dict[str, Any], purpose: tuple[str, str]) -> str: ...

        def _command_id(self) -> str: ...

        def _applied_intent(self, v: CommandVerdict, purpose: tuple[str, str]) -> None: ...

        def _now(self) -> int: ...

        def _authorize(self, item: ItemState) -> str: ...

        async def _forward(self, command: Command) -> CommandVerdict: ...

        def _draining(self) -> bool: ...

        def _offer_requests(
            self, wanted: list[tuple[str, list[str]]]
        ) -> list[SelectCandidatesInput]: ...

        def _offers_done(self, wanted: list[tuple[str, list[str]]]) -> None: ...

        async def _offered(
            self,
            wanted: list[tuple[str, list[str]]],
            results: Sequence[SelectCandidatesResult | None],
        ) -> None: ...

    # ------------------------------------------------------------------ steps 1 and 2

    async def _review(self, item: ItemState) -> None:
        """Review a submission (MW-13.2-b): steps 1–2 in the coordinator's activity, then a
        review WorkItem for semantic criteria (step 3) or straight to the verdict (step 4)."""
        item.reviewing = True
        item.review_stage = item.review_item = item.review_digest = None
        item.w = dataclasses.replace(item.w, approval=None)
        slot = DecisionSlot(
            command_id=self._command_id(),
            issued_at_ms=self._now(),
            final_if_passed=self._final_if_passed(item),
        )
        wid = item.work_item_id
        self.review_queue.append(
            ReviewInput(
                group_id=self.state.spec.group_id,
                mission_id=self.state.spec.mission_id,
                work_item_id=wid,
                contract=item.spec.contract,
                outputs=item.outputs,
                artifacts=item.artifacts,
                evidence=item.evidence,
                review_of=item.review_of,
                decision=slot,
            )
        )
        await workflow.wait_condition(lambda: wid in self.review_results)
        result = self.review_results.pop(wid)
        if result.verdict is not None:  # the step issued the decision (steps 1–4), applied
            return
        item.review = list(result.steps)
        if result.passed and item.review_of is None and criteria(item, SEMANTIC_KINDS):
            self._request_review(item)
        else:
            self._verdict(item)

    def _start_reviews(self) -> None:
        """Review what was submitted since the last batch, in one ``review_submissions``
        local activity (one at a time: submissions arriving meanwhile make the next batch).
        The same step offers the dependents whose results it accepts (issue 26): a
        dependency hop costs one coordinator step, not a review and then a ranking."""
        if self.review_queue and "reviews" not in self.tasks:
            batch, self.review_queue = self.review_queue, []
            follow: list[tuple[str, list[str]]] = []
            if not self._draining():
                accepting = [
                    r.work_item_id for r in batch if r.decision and r.decision.final_if_passed
                ]
                follow = offers_after(self.state, self.graph, self._now(), accepting)
            self.tasks["reviews"] = asyncio.create_task(self._review_batch(batch, follow))

    async def _review_batch(
        self, batch: list[ReviewInput], follow: list[tuple[str, list[str]]]
    ) -> None:
        requests = self._offer_requests(follow)
        try:
            try:
                done = await coordinator_activity(
                    CoordinatorActivities.review_submissions,
                    ReviewBatch(
                        reviews=batch,
                        then_offer=[
                            OfferAfter(after=after, request=req)
                            for (_, after), req in zip(follow, requests, strict=True)
                        ],
                    ),
                    start_to_close=timedelta(minutes=5),
                    summary="review "
                    + name_items([r.work_item_id for r in batch])
                    + (f", offer {name_items([w for w, _ in follow])}" if follow else ""),
                )
            except BaseException:
                self._offers_done(follow)
                raise
            for r, res in zip(batch, done.results, strict=True):
                self.review_results[r.work_item_id] = res
                if res.verdict is not None:  # the step decided: its Events before the offers'
                    item = self.state.items[r.work_item_id]
                    item.review, item.review_stage = list(res.steps), None
                    self._applied_intent(res.verdict, ("review", r.work_item_id))
            await self._offered(follow, done.offers or [None] * len(follow))
        finally:
            self.tasks.pop("reviews", None)
            self.wake = True

    # ------------------------------------------------------------------------- step 3

    def _review_id(self, item: ItemState) -> str:
        n = item.reviews + 1
        while True:
            rid = f"{item.work_item_id}:review" + (str(n) if n > 1 else "")
            if len(rid) > _MAX_ID:
                rid = f"review-{digest(item.work_item_id)[:32]}-{n}"
            if self.state.state_of(rid) is None:
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
            f"{self.state.spec.mission_id} against its semantic and qualitative criteria",
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
            required_capabilities=[self.state.spec.review.reviewer_capability],
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
            mission_id=self.state.spec.mission_id,
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
        self.graph.add({rid: []}, {rid: contract.dependency_strategy})
        self.state.items[rid] = review
        self.attention.add(rid)
        self._authorize(review)
        item.review_item, item.review_stage, item.reviewing = rid, "semantic", False
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
            item.review_stage, item.reviewing = "approval", False
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
        a = item.approval or {}
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
                timestamp_ms=at if isinstance(at, int) else self._now(),
                summary=f"{what}; review {item.review_digest}"[:2000],
            )
            for k in criteria(item, frozenset({"human"}))
        ]
        return ReviewStep(step="approval", passed=granted, detail=what[:2000], evidence=evidence)

    def _decide(self, item: ItemState, passed: bool) -> None:
        """``work.accept_result`` or ``work.fail`` with every step's Evidence."""
        item.review_stage, item.reviewing = None, True
        type_, body = decision_command(item.work_item_id, item.review, passed, self._now())
        self._intent(type_, body, ("review", item.work_item_id))

    def _advance_reviews(self) -> None:
        """Move waiting reviews on (called by the main loop after every batch): a verified
        review WorkItem gives step 3, a MissionOwner's recorded decision gives step 5."""
        for item in list(self.state.items.values()):
            if item.review_stage is None:
                continue
            if item.state is not WorkItemState.SUBMITTED:  # cancelled or failed meanwhile
                item.review_stage = None
            elif item.review_stage == "semantic":
                review = self.state.items.get(item.review_item or "")
                if review is not None and review.state is WorkItemState.VERIFIED:
                    item.review.append(self._semantic_step(item, review))
                    item.review_stage = None
                    self._verdict(item)
            elif item.approval is not None and (
                item.approval.get("ownership_epoch") == item.ownership_epoch
            ):
                item.review.append(self._approval_step(item))
                self._decide(item, item.review[-1].passed)

    # ------------------------------------------------------------------ the approve update

    @workflow.update
    async def approve(self, inp: ApprovalInput) -> CommandVerdict:
        """A MissionOwner's decision on a reviewed result (MW-13.2-b step 5): its own signed
        ``approval.grant_result`` or ``approval.deny_result``. The Authority checks the
        signature, the ``mission_owner`` role and the state; a refused Command leaves the
        WorkItem waiting. ``missionweave approve`` sends it."""
        return await self._forward(inp.command)

    @approve.validator
    def _check_approve(self, inp: ApprovalInput) -> None:
        cmd = inp.command
        if cmd.command_id in self.state.verdicts:
            return
        if cmd.type not in APPROVAL_COMMANDS:
            raise refuse(
                "wrong_command_type",
                f"expected approval.grant_result or approval.deny_result, got {cmd.type}",
            )
        if cmd.group_id != self.state.spec.group_id:
            raise refuse("wrong_group", f"the Mission's Group is {self.state.spec.group_id}")
        item = self.state.items.get(str(cmd.body.get("work_item_id")))
        if item is None:
            raise refuse(RejectionCode.UNKNOWN_WORK_ITEM, "unknown WorkItem")
        if item.review_stage != "approval":
            raise refuse(
                "not_awaiting_approval", f"WorkItem {item.work_item_id} is not awaiting approval"
            )
        if cmd.body.get("review_digest") != item.review_digest:
            raise refuse(
                "stale_review", f"the review record of {item.work_item_id} is {item.review_digest}"
            )


__all__ = ["APPROVAL_COMMANDS", "SEMANTIC_KINDS", "ReviewMixin", "refuse", "review_digest"]
