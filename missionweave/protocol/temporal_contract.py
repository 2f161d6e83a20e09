"""The Temporal contract: every payload between the Mission workflow, its activities, agents
and people, and the names they meet under.

One message type in and one out for every workflow, activity, update, signal and query, so fields
can be added without breaking running workflows. All pure pydantic: safe in the workflow sandbox,
serialized by ``temporalio.contrib.pydantic.pydantic_data_converter``. Payloads carry ids, hashes
and small JSON — never artifact content (Temporal fails payloads above 2 MiB).

Names used across the product:

* workflow type ``Mission``, workflow id ``mission-<mission_id>`` (:func:`mission_workflow_id`),
  task queue ``missionweave-coordinator`` (:data:`COORDINATOR_TASK_QUEUE`);
* an agent's activities for a Group run on ``missionweave-agent-<agent_id>/<group_id>``
  (:func:`agent_task_queue`): one inbox per Group (MW-11.1-a).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from ._contract import AcceptanceCriterion, Budget, WorkContract
from ._errors import Rejection
from ._messages import Command, Event
from ._records import Evidence, ProgressReport, SelectionBasis
from ._states import WorkItemState

COORDINATOR_TASK_QUEUE = "missionweave-coordinator"
MISSION_WORKFLOW_TYPE = "Mission"
#: The agent's activity: an offer to it, or the resumption of a WorkItem it owns.
EXECUTE_WORK_ITEM = "execute_work_item"
#: The Mission's signal an owner's progress travels by (:class:`ProgressSignal`): named here so
#: that the agent runtime signals it without importing the workflow package.
REPORT_PROGRESS_SIGNAL = "report_progress"
#: The Mission's Update a handler adds WorkItems with (:class:`AuthorizeWorkInput`, MW-10.4-a):
#: named here for the same reason (``WorkContext.authorize_work`` sends it from an agent).
AUTHORIZE_WORK_UPDATE = "authorize_work"

_MODEL = ConfigDict(extra="forbid")


def mission_workflow_id(mission_id: str) -> str:
    """The Temporal workflow id of a Mission: ``mission-<mission_id>``."""
    return f"mission-{mission_id}"


def first_duplicate(ids: list[str]) -> str | None:
    """The first id that occurs twice in ``ids`` (``None``: all distinct)."""
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return None


def agent_task_queue(agent_id: str, group_id: str | None = None) -> str:
    """The task queue on which agent ``agent_id`` takes the ``execute_work_item`` activities
    (offers, resumptions) of Group ``group_id``: ``missionweave-agent-<agent_id>/<group_id>``.

    Implements MW-11.1-a: each Group is a separate inbox, polled by a Worker of its own, so one
    Group's backlog never stands in front of another's offers. A Group id holds no ``/``, so
    two different (agent, Group) pairs never name the same queue.

    Without ``group_id``: ``missionweave-agent-<agent_id>``, the one shared queue of Missions
    started before per-Group inboxes; the agent runtime still serves it so that their
    activities are answered, and nothing new should be scheduled there.
    """
    if group_id is None:
        return f"missionweave-agent-{agent_id}"
    return f"missionweave-agent-{agent_id}/{group_id}"


# --------------------------------------------------------------------------- the Mission spec


class ChildFailurePolicy(StrEnum):
    """What a parent WorkItem does when its child Mission fails (spec 10.2)."""

    STAY_BLOCKED = "stay_blocked"
    FAIL = "fail"


class OfferPolicy(BaseModel):
    """How the Mission offers work (MW-10.3-b/c).

    Attributes:
        offer_ttl_ms: how long one offer stays open, milliseconds.
        max_sequential_offers: best-ranked candidates tried one after another before the
            candidates are ranked again.
        candidate_set_size: candidates addressed at once for ``urgent`` WorkItems.
        reoffer_backoff_ms: wait before ranking again when nobody accepted, milliseconds.
    """

    model_config = _MODEL
    offer_ttl_ms: int = Field(default=30_000, gt=0)
    max_sequential_offers: int = Field(default=3, ge=1)
    candidate_set_size: int = Field(default=3, ge=1, le=8)
    reoffer_backoff_ms: int = Field(default=2_000, ge=0)


class ReviewPolicy(BaseModel):
    """How a Mission reviews submissions beyond the coordinator's own checks (MW-13.2-b).

    Attributes:
        reviewer_capability: the capability (``id@semver``) a review WorkItem requires: criteria
            of kind ``semantic`` or ``qualitative`` are reviewed by an agent holding it *and*
            the ``reviewer`` role (besides ``worker``, to take work), never by the submitter.
    """

    model_config = _MODEL
    reviewer_capability: str = Field(
        default="review.semantic@1.0", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*@[0-9][0-9.]*$"
    )


class WorkItemSpec(BaseModel):
    """One WorkItem of a Mission.

    Attributes:
        work_item_id: unique within the Group.
        contract: the work contract (MW-10.1-a).
        contract_ref: instead of ``contract``, the name of one of the enclosing
            :class:`MissionSpec`'s (or :class:`AuthorizeWorkInput`'s) ``contracts``: a Mission
            of many WorkItems under one contract states it once. The resolved contract is the
            named one (the same object); the WorkItem travels by the name again (its JSON has
            ``contract_ref`` and no ``contract``), which keeps a 10,000-item spec and the
            workflow's state under Temporal's 2 MiB payload limit.
        dependencies: ids it depends on (MW-10.4-b).
        input: the typed input handed to the agent's handler (small JSON; hashes, not blobs).
        child_mission: when set, the item is carried out by this child Mission instead of an
            agent (``mission.create_child``).

    Raises:
        pydantic.ValidationError: ``contract_ref`` outside a spec that names its contracts
            (a WorkItemSpec alone cannot resolve it).
    """

    model_config = _MODEL
    work_item_id: str = Field(min_length=1, max_length=128)
    contract: WorkContract
    contract_ref: str | None = Field(default=None, min_length=1, max_length=128)
    dependencies: list[str] = Field(default_factory=list)
    input: dict[str, Any] = Field(default_factory=dict)
    child_mission: MissionSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _unresolved_ref(cls, data: Any) -> Any:
        if isinstance(data, dict) and "contract" not in data and not data.get("contract_ref"):
            raise ValueError(
                "give a contract, or a contract_ref naming one of the Mission's `contracts`"
            )
        if isinstance(data, dict) and "contract" not in data and data.get("contract_ref"):
            raise ValueError(
                f"contract_ref {data['contract_ref']!r} names no contract: a reference is "
                "resolved against the enclosing MissionSpec's (or AuthorizeWorkInput's) "
                "`contracts`"
            )
        return data

    @model_serializer(mode="wrap")
    def _by_reference(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.contract_ref is not None:
            out.pop("contract", None)  # the enclosing spec's ``contracts`` has it
        return out


def resolve_contract_refs(data: Any, contracts: Any, where: str = "items") -> None:
    """Put the named contract into each WorkItem of ``data`` (a list of WorkItem dicts or
    :class:`WorkItemSpec`) that gives a ``contract_ref``, in place: the same validated
    :class:`WorkContract` object for every WorkItem naming it.

    Args:
        data: the raw ``items`` list (dicts are changed; instances are checked against their
            ``contract_ref``).
        contracts: the raw ``contracts`` mapping, name → contract (dict or WorkContract).
        where: the field's name for error messages.

    Raises:
        ValueError: a reference to no contract of ``contracts``, or a WorkItem giving both a
            contract and a reference to a different one (pydantic reports it as a
            ``ValidationError`` naming the WorkItem).
    """
    if not isinstance(data, list):
        return
    resolved: dict[str, WorkContract] = {}
    for n, item in enumerate(data):
        if isinstance(item, WorkItemSpec):  # built in Python: it must agree with its name too
            if item.contract_ref is None:
                continue
            item = {
                "work_item_id": item.work_item_id,
                "contract_ref": item.contract_ref,
                "contract": item.contract,
            }
            check_only = True
        elif not isinstance(item, dict) or item.get("contract_ref") is None:
            continue
        else:
            check_only = False
        ref = item["contract_ref"]
        if not isinstance(ref, str) or not isinstance(contracts, dict) or ref not in contracts:
            known = ", ".join(sorted(contracts)) if isinstance(contracts, dict) else ""
            raise ValueError(
                f"{where}[{n}] ({item.get('work_item_id', '?')}): contract_ref {ref!r} is not "
                f"one of `contracts` ({known or 'none given'})"
            )
        if ref not in resolved:
            try:
                resolved[ref] = WorkContract.model_validate(contracts[ref])
            except ValidationError as exc:
                raise ValueError(f"contracts.{ref}: {exc}") from None
        if "contract" in item and WorkContract.model_validate(item["contract"]) != resolved[ref]:
            raise ValueError(
                f"{where}[{n}] ({item.get('work_item_id', '?')}): its contract differs from "
                f"the contract {ref!r} it names; give one or the other"
            )
        if not check_only:
            data[n] = {**item, "contract": resolved[ref]}


def _resolved(data: Any) -> Any:
    """A spec's raw data with its ``items``' contract references resolved (a copy)."""
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = dict(data, items=list(data["items"]))
        resolve_contract_refs(data["items"], data.get("contracts", {}))
    return data


class ParentLink(BaseModel):
    """A child Mission's link to the parent WorkItem it carries out: the parent's Group,
    Mission and WorkItem, which the Authority verifies when the child is created and follows
    to charge budgets (MW-10.4-d, MW-11.5-i), and the parent's workflow id (for the signal)."""

    model_config = _MODEL
    workflow_id: str
    group_id: str
    mission_id: str
    work_item_id: str


class MissionSpec(BaseModel):
    """The input of the ``Mission`` workflow: plain JSON, so ``temporal workflow start
    --input-file mission.json`` starts a real Mission.

    Attributes:
        group_id: the Group whose log records the Mission.
        mission_id: unique within the Group; the workflow id is ``mission-<mission_id>``.
        title: a short human title (the UI's summary).
        items: the initial WorkItems (more may be added while it runs: ``authorize_work``).
        contracts: named contracts the items may give by ``contract_ref`` instead of a
            ``contract`` of their own (one copy for many WorkItems).
        offer_policy: how offers are made.
        child_failure_policy: what a child Mission's failure does to this Mission's item.
        review: how semantic and qualitative criteria are reviewed.
        parent: set on child Missions.
        budget: the Mission's own budget (``None``: none): every charge to one of its
            WorkItems, or to a child Mission's, counts against it, online or reconciled after
            an outage (MW-11.5-i/j).
    """

    model_config = _MODEL
    group_id: str = Field(min_length=1, max_length=128)
    mission_id: str = Field(min_length=1, max_length=100)
    title: str = ""
    items: list[WorkItemSpec] = Field(default_factory=list)
    contracts: dict[str, WorkContract] = Field(default_factory=dict)
    offer_policy: OfferPolicy = Field(default_factory=OfferPolicy)
    child_failure_policy: ChildFailurePolicy = ChildFailurePolicy.FAIL
    review: ReviewPolicy = Field(default_factory=ReviewPolicy)
    parent: ParentLink | None = None
    budget: Budget | None = None

    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        return _resolved(data)  # contract references (``WorkItemSpec.contract_ref``)

    @field_validator("items")
    @classmethod
    def _distinct_ids(cls, items: list[WorkItemSpec]) -> list[WorkItemSpec]:
        """Refuse a WorkItem id given twice (the later copy would silently replace the first)."""
        dup = first_duplicate([i.work_item_id for i in items])
        if dup is not None:
            raise ValueError(f"duplicate work_item_id {dup!r}")
        return items


# ---------------------------------------------------------------- agents ↔ the Mission workflow


class EventSummary(BaseModel):
    """What the workflow needs of one Event (the full Event stays in the Authority's log)."""

    model_config = _MODEL
    seq: int
    type: str
    work_item_id: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, event: Event) -> EventSummary:
        """The summary of a full Event (its body without the bulky ``contract``)."""
        return cls(
            seq=event.seq,
            type=event.type,
            work_item_id=event.work_item_id,
            body={k: v for k, v in event.body.items() if k != "contract"},
        )


class CommandVerdict(BaseModel):
    """The Authority's verdict on one Command, as the workflow and agents see it.

    Attributes:
        command_id: the Command.
        status: ``accepted``, ``rejected`` or ``recorded`` (audit only, MW-11.5-b).
        rejection: why, when not accepted.
        events: the Events written.
        reply: facts for the caller (a lease and capability token for ``work.start``).
    """

    model_config = _MODEL
    command_id: str
    status: Literal["accepted", "rejected", "recorded"]
    rejection: Rejection | None = None
    events: list[EventSummary] = Field(default_factory=list)
    reply: dict[str, Any] = Field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"


class UnblockInput(BaseModel):
    """``unblock`` update: the resolution a blocked WorkItem asked for."""

    model_config = _MODEL
    work_item_id: str
    resolution: dict[str, Any] = Field(default_factory=dict)


class CancelInput(BaseModel):
    """``cancel`` update from a person: cancel the Mission and every unfinished item."""

    model_config = _MODEL
    reason: str = "cancelled by request"


class ApprovalInput(BaseModel):
    """``approve`` update from a MissionOwner: its own signed ``approval.grant_result`` (or
    ``approval.deny_result``) Command naming the WorkItem and the digest of the review record
    it approves (MW-13.2-b step 5). The Authority checks the signature and the role."""

    model_config = _MODEL
    command: Command


class AuthorizeWorkInput(BaseModel):
    """``authorize_work`` update: add WorkItems (and edges) while the Mission runs
    (MW-10.4-a); cycles, self-loops and unknown ids are rejected (MW-10.4-c)."""

    model_config = _MODEL
    items: list[WorkItemSpec] = Field(default_factory=list)
    edges: list[tuple[str, str]] = Field(
        default_factory=list, description="(dependency, dependent) pairs between known items"
    )
    contracts: dict[str, WorkContract] = Field(
        default_factory=dict,
        description="named contracts the items may give by `contract_ref`; a name the "
        "Mission already has must name the same contract",
    )

    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        return _resolved(data)  # contract references (``WorkItemSpec.contract_ref``)


class ProgressSignal(BaseModel):
    """``report_progress`` signal: the latest structured progress of a WorkItem (MW-11.4-a)."""

    model_config = _MODEL
    work_item_id: str
    agent_id: str
    report: ProgressReport


class ChildOutcome(BaseModel):
    """``child_finished`` signal from a child Mission to its parent."""

    model_config = _MODEL
    work_item_id: str
    child_mission_id: str
    approved: bool
    evidence: list[Evidence] = Field(default_factory=list)
    summary: str = ""


# ---------------------------------------------------------- the execute_work_item activity


class LeaseGrant(BaseModel):
    """An execution lease as granted by the Authority (MW-11.3-b) with its capability token."""

    model_config = _MODEL
    lease_id: str
    agent_id: str
    session_epoch: int
    work_item_id: str
    ownership_epoch: int
    started_at_ms: int
    expires_at_ms: int
    renewals: list[int] = Field(default_factory=list)
    capability_token: dict[str, Any] = Field(default_factory=dict)

    def fenced(self, **extra: Any) -> dict[str, Any]:
        """A Command body that references this lease (MW-11.3-c): ``work_item_id``,
        ``lease_id``, ``ownership_epoch``, then ``extra``."""
        return {
            "work_item_id": self.work_item_id,
            "lease_id": self.lease_id,
            "ownership_epoch": self.ownership_epoch,
            **extra,
        }


class OfferTerms(BaseModel):
    """The offer an ``execute_work_item`` activity carries to one candidate (MW-10.3-b/c).

    Attributes:
        offer_id: the Authority's offer id (``work.offered``).
        revision: the contract revision offered (an acceptance must name it).
        expires_at_ms: the offer's expiry, epoch ms; also the activity's schedule-to-start
            timeout.
    """

    model_config = _MODEL
    offer_id: str
    revision: int = Field(ge=1)
    expires_at_ms: int


class ExecuteWorkItemInput(BaseModel):
    """Input of ``execute_work_item`` on an agent's task queue (docs/design.md §4.3-6).

    With ``offer``, the activity *is* the offer to this agent: it decides (admission control)
    and accepts or declines with the Authority itself. Without, it resumes a WorkItem the agent
    already owns (queued after a checkpoint, an unblock or a replaced session). ``lease`` is
    set by the agent once the Authority granted ``work.start``; the workflow never sends one.

    Attributes:
        ownership_epoch: the WorkItem's ownership epoch as the workflow knows it: the one to
            start under when resuming; the acceptance of an offer raises it by one.
        key_version: the idempotency key version of the execution's ownership epoch
            (MW-16-f): with an offer, the version the acceptance records for the epoch it
            begins; when resuming, the version the epoch began with (``work.offer_accepted``'s,
            1 when it names none), so a retry keeps its keys across an upgrade.
    """

    model_config = _MODEL
    group_id: str
    mission_id: str
    work_item_id: str
    contract: WorkContract
    input: dict[str, Any] = Field(default_factory=dict)
    offer: OfferTerms | None = None
    ownership_epoch: int = Field(default=0, ge=0)
    # left out at version 1, so that an input a pre-mwk2_ agent can read stays readable to it
    key_version: int = Field(default=1, ge=1, le=2, exclude_if=lambda v: v == 1)
    lease: LeaseGrant | None = None
    checkpoint: dict[str, Any] | None = None
    attempt: int = Field(default=1, ge=1)
    dependency_artifacts: dict[str, list[str]] = Field(
        default_factory=dict,
        description="per verified dependency: the artifact hashes it submitted (inputs to fetch)",
    )


class OutcomeKind(StrEnum):
    """How an ``execute_work_item`` activity ended. ``declined``: admission control said no
    (MW-10.3-e); ``not_taken``: the offer was no longer open (another candidate won, it expired
    or was withdrawn) or the Authority refused the start."""

    DECLINED = "declined"
    NOT_TAKEN = "not_taken"
    SUBMITTED = "submitted"
    PAUSED = "paused"
    BLOCKED = "blocked"
    FAILED = "failed"
    LEASE_LOST = "lease_lost"


class WorkOutcome(BaseModel):
    """What ``execute_work_item`` returns: what the agent reported to the Authority and the
    Authority's verdict on it. The workflow applies the verdict, never the agent's claim.

    Attributes:
        kind: declined / not_taken / submitted / paused (checkpoint) / blocked / failed /
            lease_lost.
        verdict: the Authority's verdict on the agent's final Command (``None`` for lease_lost
            when nothing could be reported).
        events: every Event the Authority accepted for this agent's Commands in this activity
            (acceptance, start, reports, the final one), in log order: what the workflow folds
            into its state (one reducer, :func:`~missionweave.protocol.reduce_work_item`).
        outputs: the handler's outputs (small JSON).
        artifacts: SHA-256 hashes of published artifacts.
        evidence: Evidence per acceptance criterion (MW-13.2-a).
        checkpoint: the durable checkpoint for paused/blocked.
        resolution: what a blocked item needs.
        error: a short error for failed.
        retryable: whether a failure may be retried.
    """

    model_config = _MODEL
    kind: OutcomeKind
    verdict: CommandVerdict | None = None
    events: list[EventSummary] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    checkpoint: dict[str, Any] | None = None
    resolution: dict[str, Any] | None = None
    error: str | None = None
    retryable: bool = True


# ------------------------------------------------------------------------ status and result


class WorkItemStatus(BaseModel):
    """One WorkItem as the ``status`` query shows it."""

    model_config = _MODEL
    work_item_id: str
    state: WorkItemState
    owner: str | None = None
    ownership_epoch: int = 0
    lease_id: str | None = None
    attempts: int = 0
    offer_candidates: list[str] = Field(default_factory=list)
    dependencies: list[str] = Field(default_factory=list)
    last_progress: ProgressReport | None = None
    detail: str = ""
    error: str | None = Field(
        default=None,
        description="the last failure: the handler's exception type and message, file paths "
        "redacted, or why the review failed (``work.failed``'s Evidence)",
    )
    review_stage: str | None = None
    review_item: str | None = None
    review_digest: str | None = None
    review: list[dict[str, Any]] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(
        default_factory=dict,
        description="its submitted outputs, when their JSON is small (at most 4 KiB, and 256 KiB "
        "over the whole answer); else empty and outputs_omitted_bytes says how big they are",
    )
    outputs_omitted_bytes: int = Field(
        default=0,
        description="bytes of output JSON left out of this answer (0: none); the Mission's "
        "result and the Group log have them",
    )


class MissionStatus(BaseModel):
    """The ``status`` query's answer."""

    model_config = _MODEL
    mission_id: str
    group_id: str
    status: str
    items: list[WorkItemStatus] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    event_range: tuple[int, int] | None = None
    reason: str = Field(
        default="",
        description="why it failed or was cancelled (empty while it runs or once "
        "it completed): the Mission's `MissionResult.reason`",
    )


class ItemResult(BaseModel):
    """One WorkItem in the Mission's result."""

    model_config = _MODEL
    work_item_id: str
    state: WorkItemState
    owner: str | None = None
    ownership_epoch: int = 0
    attempts: int = 0
    outputs: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    review: list[dict[str, Any]] = Field(default_factory=list)
    review_of: str | None = None
    detail: str = Field(default="", description="the last thing that happened to it, in words")
    error: str | None = Field(
        default=None,
        description="the last failure: the handler's exception type and message, file paths "
        "redacted, or why the review failed (``work.failed``'s Evidence)",
    )
    dependencies: list[str] = Field(
        default_factory=list, description="what it depended on, edges added at run time included"
    )
    trimmed: bool = Field(
        default=False,
        description="its Evidence, review and input (maybe outputs) were left out to keep the "
        "result under Temporal's 2 MiB payload limit; the Group log has them",
    )


class MissionResult(BaseModel):
    """What the ``Mission`` workflow returns.

    Attributes:
        items: every WorkItem not in ``archived``, in authorization order.
        reason: why it failed or was cancelled (empty when it completed).
        event_range: the first and last Group sequence numbers of the Mission's Events.
    """

    model_config = _MODEL
    mission_id: str
    group_id: str
    status: Literal["completed", "failed", "cancelled"]
    items: list[ItemResult] = Field(default_factory=list)
    event_range: tuple[int, int] | None = None
    reason: str = ""
    archived: dict[str, WorkItemState] = Field(
        default_factory=dict,
        description="WorkItems given by their final state only, not in `items` (a Mission of "
        "thousands of WorkItems: the result stays under Temporal's 2 MiB payload limit); the "
        "Group log within `event_range` has everything",
    )


class SelectCandidatesInput(BaseModel):
    """Input of the ``select_candidates`` activity."""

    model_config = _MODEL
    group_id: str
    work_item_id: str
    required_capabilities: list[str]
    exclude: list[str] = Field(default_factory=list)
    limit: int = Field(default=3, ge=1, le=8)
    roles: list[str] = Field(
        default_factory=lambda: ["worker"], description="roles a candidate must hold, all of them"
    )
    offer: OfferSlot | None = Field(
        default=None, description="when set, the activity also makes the offer to the ranked"
    )


class OfferSlot(BaseModel):
    """The id, issue time and expiry the workflow fixes for a ``work.offer``, so that
    ``select_candidates`` signs and submits the offer to the agents it ranked (one activity
    instead of two). A retried activity re-signs the same id; if its ranking changed
    meanwhile, the Authority's answer is the first offer's (``idempotency_conflict`` resolved
    to the original)."""

    model_config = _MODEL
    command_id: str
    issued_at_ms: int = Field(ge=0)
    expires_at_ms: int = Field(ge=0, description="the offer's expiry, epoch milliseconds")


class Candidate(BaseModel):
    """One ranked candidate with its structured selection basis (MW-10.3-f)."""

    model_config = _MODEL
    agent_id: str
    basis: SelectionBasis


class SelectCandidatesResult(BaseModel):
    """Ranked candidates, best first (possibly empty), and the verdict on the offer made to
    them when the request carried an :class:`OfferSlot` (``None`` when no one was eligible).
    ``saturated``: no candidate because every eligible agent's Presence showed no room (offer
    again when a slot frees up), not because no agent can do the work. ``nearest_miss``: when
    nobody is eligible, why the closest agent is not (``agent ada lacks capability x@2.0; its
    card is version 1``), empty when no member has the roles."""

    model_config = _MODEL
    candidates: list[Candidate] = Field(default_factory=list)
    verdict: CommandVerdict | None = None
    saturated: bool = False
    nearest_miss: str = ""


class CoordinatorIntent(BaseModel):
    """A Command the workflow wants the coordinator to sign and submit.

    The workflow fixes ``command_id`` and ``issued_at_ms`` (from ``workflow.now()``) so that a
    retried activity signs byte-identical Commands and the Authority answers them idempotently.
    """

    model_config = _MODEL
    command_id: str
    type: str
    body: dict[str, Any] = Field(default_factory=dict)
    issued_at_ms: int = Field(ge=0)


class BatchEntry(BaseModel):
    """One entry of a batch: a coordinator intent or an agent's already signed Command."""

    model_config = _MODEL
    intent: CoordinatorIntent | None = None
    command: Command | None = None


class SubmitCommandsInput(BaseModel):
    """Input of the ``submit_commands`` activity: one ordered batch for one Group."""

    model_config = _MODEL
    group_id: str
    entries: list[BatchEntry]


class WorkItemEventsInput(BaseModel):
    """Input of the ``work_item_events`` activity: one WorkItem's Events after a sequence."""

    model_config = _MODEL
    group_id: str
    work_item_id: str
    after_sequence: int = Field(default=0, ge=0)


class ChargeParentUsageInput(BaseModel):
    """Input of ``charge_parent_usage``: a child Mission whose parent is in another Group.

    Attributes:
        group_id / mission_id: the child Mission.
        parent: its link to the parent (Group, Mission, WorkItem).
        after_sequence: read the child's Group log after this sequence (before the child's
            first Event).
    """

    model_config = _MODEL
    group_id: str
    mission_id: str
    parent: ParentLink
    after_sequence: int = Field(default=0, ge=0)


class ChargeParentUsageResult(BaseModel):
    """What ``charge_parent_usage`` did: per ``mission.usage_forwarded`` Event of the child
    (by its sequence in the child's Group) the verdict's outcome — ``charged``,
    ``already_charged`` or another rejection code (``budget_exceeded``: the parent's budget
    refused it, nothing was written)."""

    model_config = _MODEL
    outcomes: dict[int, str] = Field(default_factory=dict)


class SubmitCommandsResult(BaseModel):
    """The Authority's verdicts, in input order."""

    model_config = _MODEL
    verdicts: list[CommandVerdict]


class SelectCandidatesBatch(BaseModel):
    """Input of ``select_candidates``: several WorkItems ranked in one activity."""

    model_config = _MODEL
    requests: list[SelectCandidatesInput]


class SelectCandidatesBatchResult(BaseModel):
    """Ranked candidates per request, in input order."""

    model_config = _MODEL
    results: list[SelectCandidatesResult]


class ReviewInput(BaseModel):
    """One review of ``review_submissions``: what to check for one submitted WorkItem."""

    model_config = _MODEL
    group_id: str
    mission_id: str
    work_item_id: str
    contract: WorkContract
    outputs: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    review_of: str | None = Field(
        default=None, description="set for a review WorkItem: the WorkItem it reviews"
    )
    decision: DecisionSlot | None = Field(
        default=None, description="when set, the activity may issue the decision itself"
    )


class DecisionSlot(BaseModel):
    """The id and issue time the workflow fixes for the review's decision Command, so that the
    ``review_submissions`` activity can sign and submit it (one activity instead of two): it
    does when the review failed, or when it passed and ``final_if_passed`` (no reviewer agent
    and no Approval to wait for). A retried activity re-signs the same id."""

    model_config = _MODEL
    command_id: str
    issued_at_ms: int = Field(ge=0)
    final_if_passed: bool


class ReviewRequest(BaseModel):
    """The input of a review WorkItem ``<item>:review`` (MW-13.2-b step 3): what a reviewer
    agent's handler judges. Declare it as the handler's input type.

    Attributes:
        subject: the WorkItem under review.
        mission_id: its Mission.
        objective: the subject's objective.
        criteria: the semantic and qualitative acceptance criteria to give Evidence on; the
            review WorkItem's own criteria carry the same ids.
        outputs: the subject's submitted outputs.
        artifacts: the subject's artifact hashes (fetch them with ``ctx.fetch``).
        evidence: the submitter's own Evidence on those criteria (a claim, not a verdict).
    """

    model_config = _MODEL
    subject: str
    mission_id: str
    objective: str
    criteria: list[AcceptanceCriterion]
    outputs: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)


class ReviewStep(BaseModel):
    """The result of one review step (MW-13.2-b), kept for the final Approval and shown in
    ``ItemResult.review``.

    Attributes:
        step: ``integrity``, ``deterministic``, ``semantic`` (reviewer agent), ``verdict``
            (combined) or ``approval`` (MissionOwner), in that order.
        passed: whether the step passed.
        detail: what failed, or a short statement of what was checked.
        evidence: the step's Evidence (the coordinator's, the reviewer's or the MissionOwner's).
    """

    model_config = _MODEL
    step: str
    passed: bool
    detail: str = ""
    evidence: list[Evidence] = Field(default_factory=list)


class ReviewResult(BaseModel):
    """Every step's result and the combined verdict."""

    model_config = _MODEL
    steps: list[ReviewStep] = Field(default_factory=list)
    passed: bool = False
    verdict: CommandVerdict | None = Field(
        default=None, description="the Authority's verdict on the decision, when it was issued"
    )


class OfferAfter(BaseModel):
    """An offer the hop's coordinator step makes once the reviews it names are decided and
    accepted: a dependent that becomes eligible when they are verified (issue 26)."""

    model_config = _MODEL
    after: list[str] = Field(
        min_length=1, description="WorkItems of the same batch whose review must pass"
    )
    request: SelectCandidatesInput


class ReviewBatch(BaseModel):
    """Input of ``review_submissions``: the submissions that arrived together, reviewed in one
    activity whose decisions go to the Authority in one request — with the offers of
    ``then_offer`` whose reviews all passed, after the decisions, in the same request."""

    model_config = _MODEL
    reviews: list[ReviewInput]
    then_offer: list[OfferAfter] = Field(default_factory=list)


class ReviewBatchResult(BaseModel):
    """One :class:`ReviewResult` per review, in input order; one ranking per ``then_offer``
    entry, in input order (``None``: a review it waited for did not pass, nothing offered)."""

    model_config = _MODEL
    results: list[ReviewResult]
    offers: list[SelectCandidatesResult | None] = Field(default_factory=list)


WorkItemSpec.model_rebuild()
ReviewInput.model_rebuild()
SelectCandidatesInput.model_rebuild()
