"""Structured records carried in Command bodies: Evidence, decline reasons, selection basis,
progress reports and Agent Cards.

Every model forbids unknown fields, so nothing unstructured — in particular no reasoning
transcript — can ride along in a signed body (MW-10.3-f, MW-13.2-d).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

_STRICT = ConfigDict(extra="forbid", frozen=True)


class DeclineReason(StrEnum):
    """The structured decline reasons of MW-10.3-e."""

    CAPACITY = "capacity"
    DEADLINE = "deadline"
    CAPABILITY = "capability"
    AUTHORIZATION = "authorization"
    DEPENDENCY = "dependency"
    BUDGET = "budget"


class Evidence(BaseModel):
    """Evidence for one acceptance criterion (MW-13.2-c). Implements MW-13.2-c and MW-13.2-d.

    Attributes:
        subject: what the Evidence is about (a WorkItem id or artifact hash).
        criterion: the acceptance criterion id it answers.
        method: how it was obtained, e.g. ``"sha256 compare"``, ``"json-schema"``.
        result: ``pass`` or ``fail`` (or ``inconclusive``).
        producer: the agent id that produced it.
        timestamp_ms: when, epoch milliseconds.
        artifacts: hashes of the artifacts it references.
        summary: a short factual statement (not a reasoning transcript), at most 2,000 chars.
    """

    model_config = _STRICT
    subject: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    method: str = Field(min_length=1)
    result: str = Field(pattern=r"^(pass|fail|inconclusive)$")
    producer: str = Field(min_length=1)
    timestamp_ms: int = Field(ge=0)
    artifacts: list[str] = Field(default_factory=list)
    summary: str = Field(default="", max_length=2000)


class SelectionBasis(BaseModel):
    """Why an agent was chosen for an assignment (MW-10.3-f). No free-form rationale."""

    model_config = _STRICT
    capability_matches: list[str] = Field(default_factory=list)
    authorization_eligible: bool = True
    availability_estimate_ms: int | None = Field(default=None, ge=0)
    expected_cost_minor_units: int | None = Field(default=None, ge=0)
    reliability: dict[str, int] = Field(
        default_factory=dict,
        description="per capability: successes and failures, as '<cap>:ok' / '<cap>:fail' counts",
    )
    policy_rules: list[str] = Field(default_factory=list)
    rank: int = Field(default=1, ge=1)


class ProgressReport(BaseModel):
    """A structured progress report (MW-11.4-a); there is deliberately no percentage field.
    Implements MW-11.4-a."""

    model_config = _STRICT
    phase: str = Field(min_length=1)
    milestones_completed: list[str] = Field(default_factory=list)
    next_checkpoint: str | None = None
    blockers: list[str] = Field(default_factory=list)
    estimate_remaining_ms: int | None = Field(default=None, ge=0)
    evidence_refs: list[str] = Field(default_factory=list)


class AgentCard(BaseModel):
    """A versioned description of an agent (docs/design.md §2).

    Attributes:
        agent_id: the agent's id.
        version: the card's version, raised on every change.
        public_key: base64url Ed25519 public key.
        capabilities: capability ids with versions, ``id@semver``.
        max_concurrency: execution slots (MW-11.1-e).
        cost_per_item_minor_units: expected cost of one WorkItem, for ranking.
        currency: ISO 4217 code of that cost.
    """

    model_config = _STRICT
    agent_id: str = Field(min_length=1, max_length=128)
    version: int = Field(default=1, ge=1)
    public_key: str = Field(min_length=43, max_length=44)
    capabilities: list[str] = Field(default_factory=list)
    max_concurrency: int = Field(default=1, ge=1)
    cost_per_item_minor_units: int = Field(default=0, ge=0)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")
