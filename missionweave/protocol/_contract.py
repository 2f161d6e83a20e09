"""The work contract every WorkItem carries (spec 10.1).

All numbers are integers with their unit in the field name (``_ms``, ``_minor_units``): a contract
is part of signed Commands and Events, whose canonical bytes hold no floats.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    field_validator,
    model_validator,
)

from ._canonical import canonical_bytes, digest
from ._errors import CanonicalizationError

_STRICT = ConfigDict(extra="forbid", frozen=True)

#: ``budget.wall_clock_ms`` unless a contract says otherwise: one hour of running handlers.
DEFAULT_WALL_CLOCK_MS = 3_600_000


class DependencyStrategy(StrEnum):
    """When a WorkItem's dependencies make it eligible (MW-10.4-b)."""

    ALL_VERIFIED = "all_verified"
    ANY_VERIFIED = "any_verified"
    ALL_TERMINAL = "all_terminal"


class RiskClass(StrEnum):
    """How much harm a wrong or repeated execution can do."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Urgency(StrEnum):
    """Requested urgency; ``urgent`` permits a bounded candidate-set offer (MW-10.3-c)."""

    NORMAL = "normal"
    HIGH = "high"
    URGENT = "urgent"


class Money(BaseModel):
    """An amount of money in the currency's minor units (cents for EUR/USD)."""

    model_config = _STRICT
    amount_minor_units: int = Field(ge=0, description="the amount, in the currency's minor units")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. EUR")


class Budget(BaseModel):
    """Budgets in the six dimensions of MW-10.1-a / MW-11.5-f; ``None`` means no limit.

    Every dimension is charged per WorkItem, over all its attempts: the agent reports its usage
    with each lease renewal and report, and the Authority refuses the one that goes over
    (``budget_exceeded``); the agent then stops the handler and fails the WorkItem for good
    (MW-11.5-j). Wall-clock time is the only dimension with a limit by default
    (:data:`DEFAULT_WALL_CLOCK_MS`): a handler that hangs is stopped, never renewed forever.
    """

    model_config = _STRICT
    money: Money | None = Field(default=None, description="money the agent may spend")
    tokens: int | None = Field(default=None, ge=0, description="model tokens")
    tool_calls: int | None = Field(default=None, ge=0, description="tool calls")
    compute_ms: int | None = Field(
        default=None, ge=0, description="compute time the handler reports (ctx.usage)"
    )
    wall_clock_ms: int | None = Field(
        default=DEFAULT_WALL_CLOCK_MS,
        ge=0,
        description="time handlers run, measured by the agent runtime and checked at each "
        "lease renewal (every timeouts.heartbeat_ms); null: no limit",
    )
    side_effects: int | None = Field(
        default=None, ge=0, description="externally visible actions taken"
    )


class ResourceUsage(BaseModel):
    """Consumed resources in the same six dimensions (money in the budget's currency); each a
    JSON integer (``true`` is not 1)."""

    model_config = _STRICT
    money_minor_units: int = Field(default=0, ge=0, strict=True)
    tokens: int = Field(default=0, ge=0, strict=True)
    tool_calls: int = Field(default=0, ge=0, strict=True)
    compute_ms: int = Field(default=0, ge=0, strict=True)
    wall_clock_ms: int = Field(default=0, ge=0, strict=True)
    side_effects: int = Field(default=0, ge=0, strict=True)

    def plus(self, other: ResourceUsage) -> ResourceUsage:
        """Dimension-wise sum.

        Raises:
            OverflowError: a dimension's sum passes 2**53 - 1, the largest integer the log's
                canonical JSON holds (``args[0]``: the dimensions).
        """
        total = {k: getattr(self, k) + getattr(other, k) for k in ResourceUsage.model_fields}
        past = sorted(k for k, v in total.items() if v > 2**53 - 1)
        if past:
            raise OverflowError(past)
        return ResourceUsage(**total)

    def over(self, budget: Budget) -> list[str]:
        """Names of the dimensions in which this usage exceeds ``budget`` (empty when within)."""
        out: list[str] = []
        if budget.money is not None and self.money_minor_units > budget.money.amount_minor_units:
            out.append("money")
        for dim in ("tokens", "tool_calls", "compute_ms", "wall_clock_ms", "side_effects"):
            limit = getattr(budget, dim)
            if limit is not None and getattr(self, dim) > limit:
                out.append(dim)
        return out


class RetryPolicy(BaseModel):
    """Automatic retry bounds (MW-11.4-d): attempts, backoff, total wait and cost cap.

    With the contract's ``deadline_ms`` and its remaining budget they decide whether a failure
    leaves an automatic retry (:func:`~missionweave.protocol.exhausted_retry_bound`); the
    Authority records the answer in ``work.failed``.
    """

    model_config = _STRICT
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="executions that may fail before the WorkItem (and its Mission) fails for good",
    )
    initial_backoff_ms: int = Field(default=1_000, ge=0, description="wait before the 1st retry")
    backoff_multiplier: int = Field(default=2, ge=1, description="each next wait is this × longer")
    max_backoff_ms: int = Field(default=60_000, ge=0, description="longest wait between retries")
    max_total_wait_ms: int | None = Field(
        default=None,
        ge=0,
        description="no retry whose backoff waits, summed over all retries, would exceed it",
    )
    cost_cap: Money | None = Field(
        default=None,
        description="no retry once the money spent over all attempts (in the budget's "
        "currency) reaches it",
    )

    def backoff_ms(self, attempt: int) -> int:
        """Wait before retry number ``attempt`` (1 = the first retry), in milliseconds."""
        wait = self.initial_backoff_ms * self.backoff_multiplier ** max(0, attempt - 1)
        return int(min(wait, self.max_backoff_ms))


#: Default ``TimeoutPolicy.offline_grace_ms``: 60 s past the lease's expiry (MW-11.5-c).
DEFAULT_OFFLINE_GRACE_MS = 60_000


class TimeoutPolicy(BaseModel):
    """Lease, start and interrupt bounds, in milliseconds."""

    model_config = _STRICT
    start_deadline_ms: int = Field(
        default=300_000, gt=0, description="from acceptance to work.start; later, re-offered"
    )
    lease_ms: int = Field(
        default=60_000, gt=0, description="execution lease length; each renewal extends it"
    )
    heartbeat_ms: int = Field(
        default=10_000, gt=0, description="the longest time between two lease renewals"
    )
    blocked_lease_ms: int = Field(
        default=3_600_000, gt=0, description="how long a blocked WorkItem stays its owner's"
    )
    offline_grace_ms: int = Field(
        default=DEFAULT_OFFLINE_GRACE_MS,
        ge=0,
        description="while the Authority is unreachable, how long past the lease's expiry "
        "already-active reversible work may go on, buffering its progress (MW-11.5-c)",
    )
    interruptible: bool = Field(default=True, description="may be paused at a checkpoint")


class AcceptanceCriterion(BaseModel):
    """One acceptance criterion and the Evidence it requires (MW-10.1-a, MW-13.2-a)."""

    model_config = _STRICT
    id: str = Field(min_length=1, max_length=128, description="unique within the contract")
    description: str = Field(min_length=1, description="what must hold")
    kind: str = Field(
        default="deterministic",
        pattern=r"^(deterministic|semantic|qualitative|human)$",
        description="deterministic, semantic, qualitative or human: who can judge it",
    )
    evidence_required: str = Field(min_length=1, description="what Evidence must show")
    check: str | None = Field(default=None, description="registered deterministic check name")


class Deliverable(BaseModel):
    """A required output: a name, its media type and optionally its JSON Schema id."""

    model_config = _STRICT
    name: str = Field(min_length=1, description="the output's key in the Submission")
    media_type: str = Field(default="application/json", description="IANA media type")
    schema_id: str | None = Field(
        default=None, description="a registered JSON Schema the output must follow"
    )


class WorkContract(BaseModel):
    """The versioned, machine-readable contract of one WorkItem.

    Implements MW-10.1-a (every field), MW-10.1-c (``revision``, see :func:`is_material_revision`)
    and MW-10.1-d: ``notes`` may complement the typed fields but every required field must be
    present on its own — a contract whose objective or criteria live only in prose fails
    validation. ``open_questions`` lists essential ambiguities; while any stands a Worker must not
    accept (MW-10.1-b).

    Raises:
        pydantic.ValidationError: a required field is missing, a number is negative, an unknown
            field is present, or a criterion id repeats.
    """

    model_config = _STRICT
    revision: int = Field(default=1, ge=1, description="the contract's version (MW-10.1-c)")
    objective: str = Field(min_length=1, description="what the WorkItem is for")
    deliverables: list[Deliverable] = Field(min_length=1, description="the required outputs")
    acceptance_criteria: list[AcceptanceCriterion] = Field(
        min_length=1, description="what review checks (MW-13.2)"
    )
    inputs: list[str] = Field(default_factory=list, description="input artifact refs / hashes")
    allowed_tools: list[str] = Field(
        default_factory=list, description="tools the capability token's scope names"
    )
    allowed_data: list[str] = Field(
        default_factory=list, description="data the agent may read; recorded, not enforced"
    )
    allowed_operations: list[str] = Field(
        default_factory=list, description="operations the capability token's scope names"
    )
    resource_constraints: dict[str, int] = Field(
        default_factory=dict, description="named integer limits; recorded, not enforced"
    )
    required_capabilities: list[str] = Field(
        min_length=1, description="capability ids with version, e.g. 'dist.verify@1.0'"
    )
    deadline_ms: int | None = Field(
        default=None,
        ge=0,
        description="agents decline work they cannot finish by then; no retry that could not "
        "start before it; an eligible WorkItem no agent has taken by then fails, and so does "
        "its Mission",
    )
    urgency: Urgency = Field(
        default=Urgency.NORMAL, description="urgent: offered to several agents at once"
    )
    business_impact: str = Field(default="normal", description="free text; recorded, not used")
    budget: Budget = Field(default_factory=Budget, description="limits per dimension")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="automatic retries")
    timeouts: TimeoutPolicy = Field(default_factory=TimeoutPolicy, description="lease bounds")
    risk_class: RiskClass = Field(
        default=RiskClass.LOW,
        description="high and critical: every action counts as irreversible and needs a lease "
        "the Authority confirms (MW-11.5-d)",
    )
    approval_required: bool = Field(
        default=False, description="work.start needs a MissionOwner's approval first"
    )
    dependency_strategy: DependencyStrategy = Field(
        default=DependencyStrategy.ALL_VERIFIED,
        description="when its dependencies make it eligible (MW-10.4-b)",
    )
    open_questions: list[str] = Field(
        default_factory=list, description="while any stands, no agent may accept (MW-10.1-b)"
    )
    notes: str | None = Field(default=None, description="prose that complements, never replaces")

    @field_validator("required_capabilities")
    @classmethod
    def _capability_versions(cls, v: list[str]) -> list[str]:
        for cap in v:
            name, _, version = cap.partition("@")
            if not name or not version:
                raise ValueError(f"capability {cap!r} must be 'id@version'")
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _unique_criteria(
        cls, data: Any, handler: ModelWrapValidatorHandler[WorkContract]
    ) -> WorkContract:
        if isinstance(data, cls):
            # checked when it was made, and frozen since: a Mission of 10,000 WorkItems that
            # share one contract does not encode it 10,000 times (an after-validator would)
            return data
        self = handler(data)
        ids = [c.id for c in self.acceptance_criteria]
        if len(ids) != len(set(ids)):
            raise ValueError("acceptance criterion ids must be unique")
        try:  # a contract that validates must also be signable (RFC 8785: |int| < 2**53)
            canonical_bytes(self.wire())
        except CanonicalizationError as exc:
            raise ValueError(f"not representable in a signed body: {exc}") from None
        return self

    def wire(self) -> dict[str, Any]:
        """The contract as a JSON value for signed bodies (no floats)."""
        return self.model_dump(mode="json")

    def digest(self) -> str:
        """SHA-256 hex of the canonical contract."""
        return digest(self.wire())


#: Fields whose change does not need a renewed acceptance (MW-10.1-c): bookkeeping only.
NON_MATERIAL_FIELDS = frozenset({"revision", "notes", "business_impact"})


def is_material_revision(old: WorkContract, new: WorkContract) -> bool:
    """Whether ``new`` differs from ``old`` in any field that binds the Worker (MW-10.1-c)."""
    a, b = old.wire(), new.wire()
    return any(a[k] != b[k] for k in a if k not in NON_MATERIAL_FIELDS)
