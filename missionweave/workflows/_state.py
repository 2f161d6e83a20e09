"""The Mission workflow's one state object, handed whole to continue-as-new.

Pure and deterministic: no clocks, no I/O. The workflow changes it only by applying the
Authority's verdicts (:func:`apply_events`), never by guessing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..protocol import Evidence, ProgressReport, WorkItemState
from ..protocol.mission import (
    CommandVerdict,
    EventSummary,
    LeaseGrant,
    MissionSpec,
    ReviewStep,
    WorkItemSpec,
)

_MODEL = ConfigDict(extra="forbid")


class ItemState(BaseModel):
    """What the Mission knows of one WorkItem (mirrors the Authority's projection).

    Attributes:
        spec: the WorkItem as authorized.
        authorized: the Authority has accepted ``work.authorize``.
        state: the WorkItem state per the Authority's last Event.
        owner / ownership_epoch / lease: the current ownership and execution lease.
        start_deadline_ms / offer_*: the durable deadlines the workflow keeps timers for.
        tried: agents already offered this attempt (sequential offers).
        attempts: failed executions so far (the retry policy bounds them).
        retry_at_ms: when the next offer may go out after a failure or an empty ranking.
        empty_rankings: rankings in a row that found nobody (the wait doubles each time, up
            to 30 s).
        running: an ``execute_work_item`` activity is in flight.
        selecting: candidates are being ranked.
        offer_pending: a ``work.offer`` is queued or in flight.
        blocked_until_ms: the end of the blocked lease.
        child_workflow_id: the child Mission carrying the item out.
        review: the results of the review steps so far (MW-13.2-b), kept for the Approval.
        review_of: on a review WorkItem, the WorkItem it reviews.
        excluded: agents never offered this item (a review's subject's owner).
        review_stage: ``semantic`` (waiting for the review WorkItem) or ``approval`` (waiting
            for a MissionOwner's decision); ``None`` otherwise.
        review_item: the current review WorkItem's id.
        reviews: review WorkItems created for this item so far.
        review_digest: digest of the review record a MissionOwner approves.
        approval: the MissionOwner's decision (the ``approval.result_*`` Event body and ``seq``).
        trimmed: its Evidence, review steps and input (and maybe outputs) were dropped from
            the state to keep it under Temporal's payload limit (:func:`trim`); the Group log
            has them.
    """

    model_config = _MODEL
    spec: WorkItemSpec
    authorized: bool = False
    state: WorkItemState = WorkItemState.OPEN
    owner: str | None = None
    ownership_epoch: int = 0
    lease: LeaseGrant | None = None
    start_deadline_ms: int | None = None
    offer_id: str | None = None
    offer_expires_at_ms: int | None = None
    offer_candidates: list[str] = Field(default_factory=list)
    declined: list[str] = Field(default_factory=list)
    tried: list[str] = Field(default_factory=list)
    attempts: int = 0
    retry_at_ms: int | None = None
    running: bool = False
    selecting: bool = False
    offer_pending: bool = False
    reviewing: bool = False
    blocked_until_ms: int | None = None
    checkpoint: dict[str, Any] | None = None
    outputs: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    review: list[ReviewStep] = Field(default_factory=list)
    last_progress: ProgressReport | None = None
    child_workflow_id: str | None = None
    detail: str = ""
    review_of: str | None = None
    excluded: list[str] = Field(default_factory=list)
    review_stage: str | None = None
    review_item: str | None = None
    reviews: int = 0
    review_digest: str | None = None
    approval: dict[str, Any] | None = None
    trimmed: bool = False
    empty_rankings: int = 0

    @property
    def work_item_id(self) -> str:
        return self.spec.work_item_id


class MissionState(BaseModel):
    """Everything a Mission run knows; carried whole across continue-as-new.

    Attributes:
        spec: the Mission's spec (items added at runtime are in ``items``).
        items: per WorkItem id, in authorization order.
        created: ``mission.create`` was accepted.
        next_command: the counter behind deterministic coordinator command ids.
        verdicts: verdicts of agent Commands already applied, by command id (so a retried
            update is answered, not applied twice — also across continue-as-new).
        status: running / completed / failed / cancelled.
        cancel_reason: set when a cancel was requested.
        end_reason: why it failed or was cancelled (``MissionResult.reason``).
        awaiting_room: WorkItems no agent had room for (``saturated``): offered again when an
            execution of this Mission ends, or at their retry time.
        first_seq / last_seq: the Group sequence range this Mission's Commands produced.
    """

    model_config = _MODEL
    spec: MissionSpec
    items: dict[str, ItemState] = Field(default_factory=dict)
    created: bool = False
    next_command: int = 0
    verdicts: dict[str, CommandVerdict] = Field(default_factory=dict)
    status: str = "running"
    cancel_reason: str | None = None
    end_reason: str = ""
    awaiting_room: list[str] = Field(default_factory=list)
    first_seq: int | None = None
    last_seq: int | None = None

    def remember(self, verdict: CommandVerdict, keep: int = 500) -> None:
        """Store an applied agent verdict, keeping the newest ``keep`` (a retried update is
        answered from here; the Authority itself answers older repeats idempotently). Its
        Events are applied already: they are kept without their bodies (sequence, type and
        WorkItem tell the caller where it landed), as the state travels through
        continue-as-new. The first answer and a retried one are the same."""
        slim = [e.model_copy(update={"body": {}}) for e in verdict.events]
        self.verdicts[verdict.command_id] = verdict.model_copy(update={"events": slim})
        while len(self.verdicts) > keep:
            del self.verdicts[next(iter(self.verdicts))]

    def note_range(self, events: list[EventSummary]) -> None:
        for e in events:
            self.first_seq = e.seq if self.first_seq is None else min(self.first_seq, e.seq)
            self.last_seq = e.seq if self.last_seq is None else max(self.last_seq, e.seq)


def apply_events(state: MissionState, events: list[EventSummary]) -> None:
    """Apply accepted Events to the items they concern: the Authority's verdict, not a guess."""
    state.note_range(events)
    for e in events:
        item = state.items.get(e.work_item_id or "")
        if item is None:
            continue
        b = e.body
        match e.type:
            case "work.authorized":
                item.authorized, item.state = True, WorkItemState.OPEN
            case "work.offered":
                item.state = WorkItemState.OFFERED
                item.offer_id = str(b["offer_id"])
                item.offer_expires_at_ms = int(b["expires_at_ms"])
                item.offer_candidates = [str(c) for c in b["candidates"]]
                item.declined = []
            case "ownership.closed":
                item.owner, item.lease, item.start_deadline_ms = None, None, None
            case "work.offer_accepted":
                item.state = WorkItemState.QUEUED
                item.owner = str(b["owner"])
                item.ownership_epoch = int(b["ownership_epoch"])
                item.start_deadline_ms = int(b["start_deadline_ms"])
                item.offer_id, item.offer_expires_at_ms = None, None
            case "work.offer_declined":
                item.declined.append(str(b["agent_id"]))
            case "work.started":
                item.state = WorkItemState.ACTIVE
                item.lease = LeaseGrant.model_validate(
                    {**b["lease"], "capability_token": b.get("capability_token", {})}
                )
                item.start_deadline_ms = None
                # the Authority's durable resume point, also one a former owner saved with
                # progress.report before its lease expired (MW-11.5-a)
                item.checkpoint = b.get("checkpoint", item.checkpoint)
            case "work.checkpointed":
                item.state, item.lease = WorkItemState.QUEUED, None
                item.checkpoint = b.get("checkpoint")
                item.start_deadline_ms = b.get("start_deadline_ms")
            case "work.blocked":
                item.state, item.lease = WorkItemState.BLOCKED, None
                item.checkpoint = b.get("checkpoint")
                item.blocked_until_ms = b.get("blocked_lease_expires_at_ms")
            case "work.unblocked":
                item.state = WorkItemState(str(b["state"]))
                item.blocked_until_ms = None
                item.start_deadline_ms = b.get("start_deadline_ms")
                if item.state is WorkItemState.OPEN:
                    item.owner = None
            case "lease.revoked" if b.get("reason") == "session_replaced":
                # the owner's runtime was replaced (MW-11.3-f): back to its queue
                item.state, item.lease = WorkItemState.QUEUED, None
                item.start_deadline_ms = b.get("start_deadline_ms")
            case "work.submitted":
                item.state, item.lease = WorkItemState.SUBMITTED, None
            case "work.result_accepted" | "mission.child_approved":
                item.state = WorkItemState.VERIFIED
            case "work.failed":
                item.state, item.owner, item.lease = WorkItemState.FAILED, None, None
                item.attempts = int(b.get("attempts", item.attempts + 1))
            case "work.cancelled":
                item.state, item.lease = WorkItemState.CANCELLED, None
            case "mission.child_created":
                item.state, item.owner, item.lease = WorkItemState.BLOCKED, None, None
            case "mission.child_failed":
                item.state = WorkItemState(str(b["state"]))
            case "work.progress_reported" if b.get("checkpoint"):
                item.checkpoint = b["checkpoint"]
            case "approval.result_granted" | "approval.result_denied":
                item.approval = {**b, "type": e.type, "seq": e.seq}
            case _:
                pass


#: Bytes of state JSON above which finished WorkItems lose their bulky details (:func:`trim`):
#: Temporal refuses payloads over 2 MiB, and the state is the continue-as-new input and the
#: source of the Mission's result.
STATE_BUDGET = 1 << 20


def trim(state: MissionState, budget: int = STATE_BUDGET) -> bool:
    """Keep ``state`` under ``budget`` bytes of JSON: drop the Evidence, review steps and input
    of finished WorkItems (verified or cancelled, no review pending on them), then, if still
    too big, their outputs. Their state, owner, epoch, attempts and Artifact hashes stay; the
    Group log keeps everything. Deterministic (sizes of the same state are the same on replay).

    Returns:
        Whether anything was dropped.
    """
    if _size(state) <= budget:
        return False
    waited_on = {it.review_item for it in state.items.values() if it.review_stage == "semantic"}
    done = [
        it for it in state.items.values()
        if it.state in (WorkItemState.VERIFIED, WorkItemState.CANCELLED)
        and it.review_stage is None and it.work_item_id not in waited_on
    ]  # fmt: skip
    for it in done:
        it.evidence, it.review, it.trimmed = [], [], True
        it.spec = it.spec.model_copy(update={"input": {}})
    if _size(state) > budget:
        for it in done:
            it.outputs = {}
    return bool(done)


def compact(state: MissionState, spec: MissionSpec) -> dict[str, Any]:
    """``state`` with ``spec`` as its spec, as JSON-ready data without default values: the
    continue-as-new input (``MissionState.model_validate`` restores the defaults)."""
    return state.model_copy(update={"spec": spec}).model_dump(mode="json", exclude_defaults=True)


def _size(state: MissionState) -> int:
    """Bytes of the state's JSON as it travels: without defaults, and without the spec's items
    (the state's items repeat them)."""
    return len(state.model_dump_json(exclude={"spec": {"items"}}, exclude_defaults=True))


def name_items(ids: list[str], most: int = 3) -> str:
    """WorkItem ids for an activity summary in the web UI: all of them up to ``most``, else the
    first ones and how many there are in all."""
    ids = list(dict.fromkeys(ids))
    if len(ids) <= most:
        return ", ".join(ids)
    return f"{', '.join(ids[:most])} … ({len(ids)} WorkItems)"
