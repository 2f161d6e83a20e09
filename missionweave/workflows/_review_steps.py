"""The review's steps 3–5 as data (MW-13.2-b): the review WorkItem that asks a reviewer agent,
the ``semantic`` step read from its Evidence, the ``approval`` step read from a MissionOwner's
recorded decision, and the digest of the record approved. Pure and deterministic; the
:class:`~._review.Reviews` part decides when each applies."""

from __future__ import annotations

from typing import Any

from ..protocol import (
    AcceptanceCriterion,
    Budget,
    CommandType,
    Deliverable,
    EventType,
    Evidence,
    WorkContract,
    digest,
)
from ..protocol.temporal_contract import MissionSpec, ReviewRequest, ReviewStep, WorkItemSpec
from ._state import ItemState, MissionState, ReviewRecord

#: Criterion kinds a reviewer agent judges (step 3).
SEMANTIC_KINDS = frozenset({"semantic", "qualitative"})
#: The MissionOwner's Commands on a reviewed result (step 5) → whether they grant it.
APPROVAL_COMMANDS = {
    CommandType.APPROVAL_GRANT_RESULT: True,
    CommandType.APPROVAL_DENY_RESULT: False,
}
_MAX_ID = 128


def review_digest(steps: list[ReviewStep]) -> str:
    """SHA-256 hex of the canonical review record (steps 1–4) a MissionOwner approves."""
    return digest([st.model_dump(mode="json") for st in steps])


def criteria(item: ItemState, kinds: frozenset[str]) -> list[AcceptanceCriterion]:
    """The item's acceptance criteria of the given kinds."""
    return [c for c in item.spec.contract.acceptance_criteria if c.kind in kinds]


def awaits_approval(item: ItemState) -> bool:
    """A passed verdict waits for a MissionOwner's decision (a ``human`` criterion)."""
    return item.review_of is None and bool(criteria(item, frozenset({"human"})))


def final_if_passed(item: ItemState) -> bool:
    """Whether steps 1–2 passing decide the WorkItem (no reviewer, no Approval to wait for):
    the review activity then issues the decision itself."""
    return item.review_of is not None or not (
        criteria(item, SEMANTIC_KINDS) or awaits_approval(item)
    )


def review_id(state: MissionState, item: ItemState, record: ReviewRecord) -> str:
    """The id of ``item``'s next review WorkItem (``<item>:review``, ``<item>:review2`` …),
    one no WorkItem of the Mission has; counted in ``record.count``."""
    n = record.count + 1
    while True:
        rid = f"{item.work_item_id}:review" + (str(n) if n > 1 else "")
        if len(rid) > _MAX_ID:
            rid = f"review-{digest(item.work_item_id)[:32]}-{n}"
        if state.state_of(rid) is None:
            record.count = n
            return rid
        n += 1


def review_work_item(item: ItemState, rid: str, mission: MissionSpec) -> ItemState:
    """The review WorkItem ``rid`` of ``item`` (step 3): its criteria are ``item``'s semantic
    and qualitative ones (same ids), its input a :class:`ReviewRequest`; offered only to
    holders of the Mission's reviewer capability, never to ``item``'s owner."""
    c = item.spec.contract
    semantic = criteria(item, SEMANTIC_KINDS)
    ids = {k.id for k in semantic}
    contract = WorkContract(
        objective=f"Review WorkItem {item.work_item_id} of Mission "
        f"{mission.mission_id} against its semantic and qualitative criteria",
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
        required_capabilities=[mission.review.reviewer_capability],
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
        mission_id=mission.mission_id,
        objective=c.objective,
        criteria=semantic,
        outputs=item.outputs,
        artifacts=item.artifacts,
        evidence=[e for e in item.evidence if e.criterion in ids],
    )
    return ItemState(
        spec=WorkItemSpec(
            work_item_id=rid, contract=contract, input=request.model_dump(mode="json")
        ),
        review_of=item.work_item_id,
        excluded=[item.owner] if item.owner else [],
    )


def semantic_step(item: ItemState, review: ItemState) -> ReviewStep:
    """Step 3 from the verified review WorkItem's Evidence: every semantic criterion needs
    the reviewer's Evidence, and any result but ``pass`` fails it."""
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


def approval_since_review(item: ItemState, record: ReviewRecord) -> dict[str, Any] | None:
    """The MissionOwner's decision recorded since the item's review began (the reducer's
    ``approval``; one recorded before was on an earlier submission and is not this review's).
    The review leaves the reducer's facts as they are."""
    a = item.w.approval
    since = record.since_seq
    if a is None or since is None or int(a.get("seq") or 0) > since:
        return a
    return None


def approval_step(
    item: ItemState, record: ReviewRecord, approval: dict[str, Any], now_ms: int
) -> ReviewStep:
    """Step 5 from a MissionOwner's recorded decision: one Evidence per ``human`` criterion,
    stamped with the decision's time (``now_ms`` when it has none)."""
    granted = approval.get("type") == EventType.APPROVAL_RESULT_GRANTED
    approver = str(approval.get("approver") or "?")
    reason = str(approval.get("reason") or "")
    what = f"{approval.get('type')} by {approver} (seq {approval.get('seq')})" + (
        f": {reason}" if reason else ""
    )
    at = approval.get("decided_at_ms")
    evidence = [
        Evidence(
            subject=item.work_item_id,
            criterion=k.id,
            method="MissionOwner approval",
            result="pass" if granted else "fail",
            producer=approver,
            timestamp_ms=at if isinstance(at, int) else now_ms,
            summary=f"{what}; review {record.digest}"[:2000],
        )
        for k in criteria(item, frozenset({"human"}))
    ]
    return ReviewStep(step="approval", passed=granted, detail=what[:2000], evidence=evidence)


__all__ = [
    "APPROVAL_COMMANDS",
    "SEMANTIC_KINDS",
    "approval_since_review",
    "approval_step",
    "awaits_approval",
    "criteria",
    "final_if_passed",
    "review_digest",
    "review_id",
    "review_work_item",
    "semantic_step",
]
