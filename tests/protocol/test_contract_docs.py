"""The WorkContract documents itself: ``missionweave contract schema`` prints its JSON Schema,
docs/contract.md holds the table made from it, and the two cannot drift apart."""

from __future__ import annotations

import json
from pathlib import Path

from missionweave.cli._contract import TABLE_BEGIN, TABLE_END, contract_schema, contract_table
from missionweave.protocol import WorkContract
from tests.support.cli_processes import mw

DOC = Path(__file__).resolve().parents[2] / "docs" / "contract.md"


def _minimal() -> WorkContract:
    return WorkContract.model_validate(
        {
            "objective": "o",
            "deliverables": [{"name": "r"}],
            "required_capabilities": ["x@1"],
            "acceptance_criteria": [{"id": "c", "description": "d", "evidence_required": "e"}],
        }
    )


def test_the_default_contract_has_a_finite_wall_clock_budget() -> None:
    assert _minimal().budget.wall_clock_ms == 3_600_000  # one hour
    explicit = WorkContract.model_validate({**_minimal().wire(), "budget": {"wall_clock_ms": None}})
    assert explicit.budget.wall_clock_ms is None  # no limit, when a contract says so


def test_contract_schema_command_prints_the_schema_with_every_default() -> None:
    r = mw("contract", "schema")
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed == contract_schema()
    assert printed["properties"]["budget"]["default"]["wall_clock_ms"] == 3_600_000
    assert printed["$defs"]["Budget"]["properties"]["wall_clock_ms"]["default"] == 3_600_000


def test_every_contract_field_has_a_description() -> None:
    schema = contract_schema()
    objects = [schema, *(d for d in schema["$defs"].values() if "properties" in d)]
    missing = [
        f"{o['title']}.{name}"
        for o in objects
        for name, node in o["properties"].items()
        if not node.get("description")
    ]
    assert missing == []


def test_docs_table_is_the_generated_one() -> None:
    """Regenerate with ``missionweave contract table`` and paste it between the markers."""
    text = DOC.read_text()
    committed = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip()
    assert committed == contract_table().strip()
    rows = {line.split("|")[1].strip() for line in committed.splitlines()[2:]}
    assert "`budget.wall_clock_ms`" in rows and "`deliverables[].name`" in rows
    r = mw("contract", "table")
    assert r.returncode == 0 and r.stdout == contract_table()
