"""Work contracts (spec 10.1): required fields, strict shapes, no floats, material revisions.

Requirements: MW-10.1-a, MW-10.1-c, MW-10.1-d.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from missionweave.protocol import (
    Budget,
    CanonicalizationError,
    Money,
    WorkContract,
    canonical_bytes,
    is_material_revision,
)

REQUIRED = ("objective", "deliverables", "acceptance_criteria", "required_capabilities")


def _base() -> dict[str, Any]:
    return {
        "objective": "check the files of one distribution",
        "deliverables": [{"name": "report", "media_type": "application/json"}],
        "acceptance_criteria": [
            {"id": "hashes", "description": "every file matches", "evidence_required": "compare"},
        ],
        "required_capabilities": ["dist.verify@1.0"],
    }


def _contract(**over: Any) -> WorkContract:
    return WorkContract.model_validate({**_base(), **over})


def _ints_only(value: Any) -> bool:
    if isinstance(value, float):
        return False
    if isinstance(value, dict):
        return all(_ints_only(v) for v in value.values())
    if isinstance(value, list):
        return all(_ints_only(v) for v in value)
    return True


def test_minimal_contract_is_valid__MW_10_1_a() -> None:
    c = _contract()
    assert c.revision == 1
    assert c.objective == "check the files of one distribution"


@pytest.mark.parametrize("field", REQUIRED)
def test_contract_requires_every_field__MW_10_1_a(field: str) -> None:
    data = _base()
    del data[field]
    with pytest.raises(ValidationError) as exc:
        WorkContract.model_validate(data)
    assert any(e["loc"] == (field,) for e in exc.value.errors())


@pytest.mark.parametrize(
    ("field", "empty"),
    [
        ("objective", ""),
        ("deliverables", []),
        ("acceptance_criteria", []),
        ("required_capabilities", []),
    ],
)
def test_contract_required_fields_cannot_be_empty__MW_10_1_a(field: str, empty: object) -> None:
    with pytest.raises(ValidationError):
        _contract(**{field: empty})


def test_contract_rejects_unknown_fields__MW_10_1_a() -> None:
    with pytest.raises(ValidationError) as exc:
        _contract(reasoning="I thought about it for a while")
    assert exc.value.errors()[0]["type"] == "extra_forbidden"
    with pytest.raises(ValidationError):
        _contract(budget={"tokens": 5, "gpus": 1})
    with pytest.raises(ValidationError):
        _contract(
            acceptance_criteria=[
                {"id": "a", "description": "d", "evidence_required": "e", "weight": 2}
            ]
        )


@pytest.mark.parametrize(
    "budget",
    [
        {"tokens": -1},
        {"tool_calls": -1},
        {"compute_ms": -1},
        {"wall_clock_ms": -1},
        {"side_effects": -1},
        {"money": {"amount_minor_units": -1, "currency": "EUR"}},
    ],
)
def test_contract_rejects_negative_budgets__MW_10_1_a(budget: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _contract(budget=budget)


@pytest.mark.parametrize("cap", ["dist.verify", "dist.verify@", "@1.0", ""])
def test_capability_needs_a_version__MW_10_1_a(cap: str) -> None:
    with pytest.raises(ValidationError):
        _contract(required_capabilities=["other@2", cap])


def test_capability_with_version_is_kept__MW_10_1_a() -> None:
    assert _contract(required_capabilities=["a@1", "b.c@2.3.4"]).required_capabilities == [
        "a@1",
        "b.c@2.3.4",
    ]


def test_budget_has_six_integer_dimensions__MW_10_1_a() -> None:
    dimensions = "money tokens tool_calls compute_ms wall_clock_ms side_effects"
    assert set(Budget.model_fields) == set(dimensions.split())
    b = Budget(
        money=Money(amount_minor_units=1250, currency="EUR"),
        tokens=1,
        tool_calls=2,
        compute_ms=3,
        wall_clock_ms=4,
        side_effects=5,
    )
    wire = b.model_dump(mode="json")
    assert wire["money"] == {"amount_minor_units": 1250, "currency": "EUR"}
    for dim in ("tokens", "tool_calls", "compute_ms", "wall_clock_ms", "side_effects"):
        assert type(wire[dim]) is int


def test_budget_rejects_fractional_numbers__MW_10_1_a() -> None:
    with pytest.raises(ValidationError):
        Budget(tokens=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Money(amount_minor_units=12.5, currency="EUR")  # type: ignore[arg-type]


def test_contract_holds_every_field_the_spec_lists__MW_10_1_a() -> None:
    # one field (or more) per clause of MW-10.1-a
    clauses = {
        "objective and deliverables": {"objective", "deliverables"},
        "acceptance criteria": {"acceptance_criteria"},
        "input and dependency references": {"inputs"},
        "allowed tools, data, operations, resource constraints": {
            "allowed_tools",
            "allowed_data",
            "allowed_operations",
            "resource_constraints",
        },
        "capability ids and versions": {"required_capabilities"},
        "deadline, urgency, business impact": {"deadline_ms", "urgency", "business_impact"},
        "budgets": {"budget"},
        "retry, interrupt, timeout and cost policy": {"retry", "timeouts"},
        "risk class and approval": {"risk_class", "approval_required"},
        "versioned": {"revision"},
    }
    for clause, fields in clauses.items():
        assert fields <= set(WorkContract.model_fields), clause
    c = _contract()
    assert {"evidence_required"} <= set(c.acceptance_criteria[0].model_dump())
    assert "interruptible" in c.timeouts.model_dump()
    assert "cost_cap" in c.retry.model_dump()


def test_contract_wire_has_no_floats_and_canonicalizes__MW_10_1_a() -> None:
    c = _contract(budget={"tokens": 2.0, "money": {"amount_minor_units": 100, "currency": "USD"}})
    wire = c.wire()
    assert _ints_only(wire)
    assert wire["budget"]["tokens"] == 2 and type(wire["budget"]["tokens"]) is int
    assert canonical_bytes(wire) == canonical_bytes(WorkContract.model_validate(wire).wire())
    assert len(c.digest()) == 64


@pytest.mark.parametrize(
    "value", [1.5, 0.0, float("nan"), float("inf"), [1, 2.0], {"a": {"b": 1e3}}]
)
def test_canonical_bytes_refuse_floats__MW_10_1_a(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_bytes({"budget": value})


def test_repeated_criterion_ids_are_rejected__MW_10_1_a() -> None:
    crit = {"id": "a", "description": "d", "evidence_required": "e"}
    with pytest.raises(ValidationError):
        _contract(acceptance_criteria=[crit, crit])


@pytest.mark.parametrize(
    "change",
    [
        {"objective": "check two distributions"},
        {"deliverables": [{"name": "report"}, {"name": "log"}]},
        {
            "acceptance_criteria": [
                {"id": "hashes", "description": "every file matches", "evidence_required": "sig"}
            ]
        },
        {"required_capabilities": ["dist.verify@2.0"]},
        {"budget": {"tokens": 10}},
        {"deadline_ms": 1_900_000_000_000},
        {"urgency": "urgent"},
        {"allowed_tools": ["curl"]},
        {"risk_class": "high"},
        {"approval_required": True},
        {"timeouts": {"lease_ms": 5_000}},
        {"retry": {"max_attempts": 1}},
        {"inputs": ["sha256:abc"]},
        {"dependency_strategy": "any_verified"},
    ],
)
def test_material_changes_are_material__MW_10_1_c(change: dict[str, Any]) -> None:
    old = _contract()
    new = _contract(**change, revision=2)
    assert is_material_revision(old, new)
    assert is_material_revision(new, old)


def test_notes_only_change_is_not_material__MW_10_1_c() -> None:
    old = _contract()
    assert not is_material_revision(old, _contract(notes="see the ticket for background"))
    assert not is_material_revision(old, _contract(revision=2, notes="clarified wording"))
    assert not is_material_revision(old, _contract())


def test_revision_is_versioned_and_positive__MW_10_1_c() -> None:
    assert _contract(revision=3).revision == 3
    with pytest.raises(ValidationError):
        _contract(revision=0)


def test_notes_cannot_replace_contract_fields__MW_10_1_d() -> None:
    prose = (
        "Objective: verify the distribution. Deliverable: a JSON report. Acceptance: every "
        "hash matches. Capability: dist.verify@1.0."
    )
    with pytest.raises(ValidationError) as exc:
        WorkContract.model_validate({"notes": prose})
    missing = {e["loc"][0] for e in exc.value.errors() if e["type"] == "missing"}
    assert missing == set(REQUIRED)
    for field in REQUIRED:
        data = {**_base(), "notes": prose}
        del data[field]
        with pytest.raises(ValidationError):
            WorkContract.model_validate(data)


def test_notes_complement_a_complete_contract__MW_10_1_d() -> None:
    c = _contract(notes="background: the mirror is slow on Mondays")
    assert c.notes is not None and c.objective
