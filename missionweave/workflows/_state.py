"""The Mission workflow's one state object, handed whole to continue-as-new.

Pure and deterministic: no clocks, no I/O. The workflow changes it only by applying the
Authority's verdicts (:func:`apply_events`), never by guessing.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..protocol import (
    EventType,
    Evidence,
    ProgressReport,
    WorkItemFacts,
    WorkItemState,
    reduce_work_item,
)
from ..protocol.temporal_contract import (
    CommandVerdict,
    EventSummary,
    MissionSpec,
    ReviewStep,
    WorkItemSpec,
    resolve_contract_refs,
)

_MODEL = ConfigDict(extra="forbid")
#: What an item of a state written before :mod:`._run` carried of its run's work.
_IN_FLIGHT_BEFORE = ("running", "selecting", "offer_pending", "syncing", "reviewing")


class ReviewStage(enum.StrEnum):
    """What a submitted WorkItem's review waits for, across continue-as-new (MW-13.2-b)."""

    SEMANTIC = "semantic"  # step 3: its review WorkItem verified
    APPROVAL = "approval"  # step 5: a MissionOwner's decision


class ReviewRecord(BaseModel):
    """One WorkItem's review as it crosses continue-as-new (MW-13.2-b); written by
    :class:`~._review.Reviews` alone.

    Attributes:
        steps: the results of the review steps so far, kept for the Approval and the result.
        stage: what the review waits for (:class:`ReviewStage`); ``None``: nothing.
        review_item: the current review WorkItem's id (step 3).
        count: review WorkItems created for the item so far.
        digest: digest of the review record a MissionOwner approves (step 5).
        since_seq: the item's last Event when the current review began: only an Approval
            recorded after it decides step 5 (``None``: any, as a state written before this
            field carried none but the current review's).
    """

    model_config = _MODEL
    steps: list[ReviewStep] = Field(default_factory=list)
    stage: ReviewStage | None = None
    review_item: str | None = None
    count: int = 0
    digest: str | None = None
    since_seq: int | None = None


#: An item's review fields in a state written before :class:`ReviewRecord` → the record's.
_REVIEW_BEFORE = {
    "review": "steps",
    "review_stage": "stage",
    "review_item": "review_item",
    "reviews": "count",
    "review_digest": "digest",
    "review_since_seq": "since_seq",
}


class ItemState(BaseModel):
    """What the Mission knows of one WorkItem: the facts reduced from the Authority's Events
    (:attr:`w`, the one reducer :func:`~missionweave.protocol.reduce_work_item`) and the
    workflow's own bookkeeping that crosses continue-as-new (what a run has under way is not
    here: :mod:`._run`).

    Attributes:
        spec: the WorkItem as authorized.
        w: the Authority's facts (state, owner, epoch, lease, offer, checkpoint, attempts …);
            read through the properties below, changed only by :func:`apply_events`.
        authorized: the Authority has accepted ``work.authorize``.
        tried: agents already offered this attempt (sequential offers).
        retry_at_ms: when the next offer may go out after a failure or an empty ranking.
        empty_rankings: rankings in a row that found nobody (the wait doubles each time, up
            to 30 s).
        no_agent_since_ms: when the rankings in a row that found nobody began (epoch ms):
            since then no agent could take it (none eligible, or every capable one busy);
            ``None`` once it is offered.
        child_workflow_id: the child Mission carrying the item out.
        review_of: on a review WorkItem, the WorkItem it reviews.
        excluded: agents never offered this item (a review's subject's owner).
        trimmed: its Evidence, review steps and input (and maybe outputs) were dropped from
            the state to keep it under Temporal's payload limit (:func:`trim`); the Group log
            has them.
    """

    model_config = _MODEL
    spec: WorkItemSpec
    w: WorkItemFacts = Field(default_factory=WorkItemFacts)
    authorized: bool = False
    tried: list[str] = Field(default_factory=list)
    retry_at_ms: int | None = None
    outputs: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    last_progress: ProgressReport | None = None
    child_workflow_id: str | None = None
    detail: str = ""
    review_of: str | None = None
    excluded: list[str] = Field(default_factory=list)
    trimmed: bool = False
    empty_rankings: int = 0
    no_agent_since_ms: int | None = None

    @property
    def work_item_id(self) -> str:
        return self.spec.work_item_id

    @property
    def state(self) -> WorkItemState:
        return self.w.state or WorkItemState.OPEN

    @property
    def owner(self) -> str | None:
        return self.w.owner

    @property
    def ownership_epoch(self) -> int:
        return self.w.ownership_epoch

    @property
    def lease_id(self) -> str | None:
        return self.w.lease_id

    @property
    def attempts(self) -> int:
        return self.w.attempts

    @property
    def start_deadline_ms(self) -> int | None:
        return self.w.start_deadline_ms

    @property
    def error(self) -> str | None:
        return self.w.error

    @property
    def offer_candidates(self) -> list[str]:
        return list(self.w.offer_candidates)

    @property
    def approval(self) -> dict[str, Any] | None:
        return self.w.approval


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
        archived: verified or cancelled WorkItems whose details left the state (:func:`trim`:
            only their final state stays), by id; none of them is in ``items``. A Mission of
            thousands of WorkItems stays under Temporal's 2 MiB payload limit this way; the
            Group log keeps everything.
        reviews: the review of each WorkItem reviewed so far (:class:`ReviewRecord`), by id.
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
    archived: dict[str, WorkItemState] = Field(default_factory=dict)
    reviews: dict[str, ReviewRecord] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        """The items travel with their contracts by reference (``WorkItemSpec.contract_ref``)
        and without their id and Mission (:func:`compact`): put them back. A state written
        before may carry on an item what was under way in its run (``running``, ``selecting``
        …): read, dropped — the new run has nothing under way (:mod:`._run`); and its
        review (``review_stage`` …): read into :attr:`reviews`."""
        if not isinstance(data, dict) or not isinstance(data.get("items"), dict):
            return data
        spec = data.get("spec")
        contracts = (
            spec.contracts if isinstance(spec, MissionSpec) else (spec or {}).get("contracts", {})
        )
        mission_id = (
            spec.mission_id if isinstance(spec, MissionSpec) else (spec or {}).get("mission_id")
        )
        items = dict(data["items"])
        reviews = dict(data.get("reviews") or {})
        ids = []
        for wid, it in items.items():  # what :func:`compact` leaves out
            if isinstance(it, dict) and isinstance(it.get("spec"), dict):
                it = items[wid] = {**it, "spec": {"work_item_id": wid, **it["spec"]}}
                for key in _IN_FLIGHT_BEFORE:  # a state of before: none of it is under way
                    it.pop(key, None)
                old = {new: it.pop(key) for key, new in _REVIEW_BEFORE.items() if key in it}
                if old:  # a state of before: the item carried its review
                    reviews[wid] = {**old, **reviews.get(wid, {})}
                w = it.get("w")
                if isinstance(w, dict) and "state" in w and "mission_id" not in w:
                    it["w"] = {**w, "mission_id": mission_id}
                ids.append(wid)
        specs = [items[w]["spec"] for w in ids]
        resolve_contract_refs(specs, contracts, where="items' specs")  # each contract once
        for wid, spec_data in zip(ids, specs, strict=True):
            items[wid] = {**items[wid], "spec": spec_data}
        return {**data, "items": items, **({"reviews": reviews} if reviews else {})}

    def stage_of(self, work_item_id: str) -> ReviewStage | None:
        """What the WorkItem's review waits for (``None``: nothing, or never reviewed)."""
        record = self.reviews.get(work_item_id)
        return record.stage if record is not None else None

    def state_of(self, work_item_id: str) -> WorkItemState | None:
        """A WorkItem's state, archived or not (``None``: not this Mission's)."""
        item = self.items.get(work_item_id)
        return item.state if item is not None else self.archived.get(work_item_id)

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


def apply_events(state: MissionState, events: list[EventSummary]) -> list[str]:
    """Fold accepted Events into the items they concern with the one reducer: the Authority's
    verdict, not a guess. A submission's outputs, Artifacts and Evidence move to the item (the
    review reads them; :func:`trim` may drop them), not kept twice.

    Returns:
        The ids of the WorkItems an Event changed, each once, in the order first changed.
    """
    state.note_range(events)
    changed: dict[str, None] = {}
    for e in events:
        item = state.items.get(e.work_item_id or "")
        if item is None or e.seq <= item.w.seq:
            continue  # not this Mission's, or applied already (a repeated verdict)
        w = reduce_work_item(item.w, e)
        if e.type == EventType.WORK_AUTHORIZED:
            item.authorized = True
        elif e.type == EventType.WORK_SUBMITTED:
            item.outputs, item.artifacts = dict(w.outputs), list(w.artifacts)
            item.evidence = [Evidence.model_validate(x) for x in w.evidence]
            w = dataclasses.replace(w, outputs={}, artifacts=(), evidence=())
        item.w = w
        changed[item.work_item_id] = None
    return list(changed)


#: Bytes of state JSON above which finished WorkItems lose their bulky details (:func:`trim`):
#: Temporal refuses payloads over 2 MiB, and the state is the continue-as-new input and the
#: source of the Mission's result.
STATE_BUDGET = 1 << 20


def trim(state: MissionState, budget: int = STATE_BUDGET) -> bool:
    """Keep ``state`` under ``budget`` bytes of JSON, in three steps, each only if the one
    before left it over: drop the Evidence, review steps and input of finished WorkItems
    (verified or cancelled, no review pending on them); then their outputs; then archive them
    (:attr:`MissionState.archived`: only the final state stays) — those no unfinished WorkItem
    depends on, whose Artifacts no offer will hand on. Their state, owner, epoch, attempts and
    Artifact hashes stay through the first two steps; the Group log keeps everything.
    Deterministic (sizes of the same state are the same on replay).

    Returns:
        Whether anything was dropped.
    """
    if _size(state) <= budget:
        return False
    waited_on = {r.review_item for r in state.reviews.values() if r.stage is ReviewStage.SEMANTIC}
    done = [
        it
        for it in state.items.values()
        if it.state in (WorkItemState.VERIFIED, WorkItemState.CANCELLED)
        and state.stage_of(it.work_item_id) is None
        and it.work_item_id not in waited_on
    ]
    for it in done:
        it.evidence, it.trimmed = [], True
        if (record := state.reviews.get(it.work_item_id)) is not None:
            record.steps = []
        it.spec = it.spec.model_copy(update={"input": {}})
    if _size(state) > budget:
        for it in done:
            it.outputs = {}
    if _size(state) > budget:
        needed: set[str | None] = set()
        for it in state.items.values():
            if it.state not in (WorkItemState.VERIFIED, WorkItemState.CANCELLED):
                needed.update(it.spec.dependencies)
                needed.add(it.review_of)
        for it in done:
            if it.work_item_id not in needed:
                state.archived[it.work_item_id] = it.state
                del state.items[it.work_item_id]
                state.reviews.pop(it.work_item_id, None)
    return bool(done)


def compact(state: MissionState, spec: MissionSpec) -> dict[str, Any]:
    """``state`` with ``spec`` as its spec, as JSON-ready data without default values: the
    continue-as-new input (``MissionState.model_validate`` restores the defaults). Each item
    also leaves out what the state says once for all: its id (the key it is under) and its
    Mission (the spec's) — a third of an open item's bytes, 10,000 of them in a large Mission.
    """
    data = state.model_copy(update={"spec": spec}).model_dump(mode="json", exclude_defaults=True)
    for item in data.get("items", {}).values():
        item["spec"].pop("work_item_id", None)
        w = item.get("w")
        if w is not None and "state" in w:  # absent: the spec's; null: none (said explicitly)
            if w.get("mission_id") == spec.mission_id:
                del w["mission_id"]
            else:
                w.setdefault("mission_id", None)
    return data


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


def stand_in_spec(raw: Any, workflow_id: str) -> MissionSpec:
    """A spec with no items standing in for one that does not validate, so that the status
    query, the search attributes and the failure can still name the Mission: the group and
    mission ids when they read as text (else empty: the mission id from ``workflow_id``)."""
    data = raw if isinstance(raw, dict) else {}

    def text(key: str, default: str = "") -> str:
        v = data.get(key)
        return v if isinstance(v, str) and 0 < len(v) <= 128 else default

    return MissionSpec.model_construct(
        group_id=text("group_id"),
        mission_id=text("mission_id", workflow_id.removeprefix("mission-")),
        title=text("title"),
        items=[],
    )


def continue_as_new_args(state: MissionState) -> list[Any]:
    """The next run's arguments: a spec without items or contracts, and the state
    (:func:`trim` first, then :func:`compact`). The items live in the state: the spec travels
    without them, so the input stays well under Temporal's 2 MiB payload limit; without
    default values (a WorkContract is mostly defaults) it is about a quarter of the bytes, and
    the next run's validation restores them. The state's spec has the named contracts; the
    first argument (ignored when a state is given) need not carry them twice."""
    slim = state.spec.model_copy(update={"items": []})
    trim(state)
    bare = slim.model_copy(update={"contracts": {}})
    return [bare, compact(state, slim)]
