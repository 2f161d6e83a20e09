"""The Mission's Temporal edges are typed: clients name its queries, updates and signals by
reference (``MissionWorkflow.status``) or by the one constant the workflow's decorator uses, never
by a string literal (docs/architecture.md, STYLE.md "Call Temporal by reference")."""

from __future__ import annotations

import re
from pathlib import Path

from temporalio.workflow import _Definition

from missionweave.protocol.temporal_contract import AUTHORIZE_WORK_UPDATE, REPORT_PROGRESS_SIGNAL
from missionweave.workflows import MissionWorkflow

ROOT = Path(__file__).resolve().parents[2]
#: Where clients of the Mission live; the workflow package itself names its handlers.
SCANNED = ("missionweave", "tests", "bench", "examples")
CALLS = ("query", "execute_update", "start_update", "signal", "signal_with_start_workflow")


def _handler_names() -> set[str]:
    d = _Definition.must_from_class(MissionWorkflow)
    return {n for n in (*d.queries, *d.updates, *d.signals) if n is not None}


def test_the_handler_names_are_the_constants_clients_use() -> None:
    names = _handler_names()
    assert {"status", "cancel", "approve", "unblock", "child_finished"} <= names
    assert {AUTHORIZE_WORK_UPDATE, REPORT_PROGRESS_SIGNAL} <= names


def test_no_mission_handler_is_called_by_a_string_literal() -> None:
    names = "|".join(sorted(map(re.escape, _handler_names())))
    call = re.compile(rf"\.(?:{'|'.join(CALLS)})\(\s*[\"'](?:{names})[\"']")
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("missionweave", "workflows") or path == Path(__file__):
                continue
            text = path.read_text(encoding="utf-8")
            found += [f"{rel}: {m.group(0)}" for m in call.finditer(text)]
    assert found == []


def test_the_agent_runtime_does_not_import_the_workflow() -> None:
    worker = ROOT / "missionweave" / "worker"
    imports = re.compile(r"^\s*(from \.\.workflows|(from|import) missionweave\.workflows)", re.M)
    importing = [p.name for p in sorted(worker.rglob("*.py")) if imports.search(p.read_text())]
    assert importing == []
