"""The spec travels with the code: every requirement id a test names is one of
``docs/spec/REQUIREMENTS.md``, and the docs point at the copies in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "spec" / "REQUIREMENTS.md"


def test_every_requirement_id_named_by_a_test_exists() -> None:
    known = set(re.findall(r"MW-\d+(?:\.\d+)?-[a-z]", SPEC.read_text(encoding="utf-8")))
    assert len(known) > 50
    named: dict[str, str] = {}
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"MW[-_](\d+)[._](\d+)[-_]([a-z])\b|MW[-_](\d+)[-_]([a-z])\b", text):
            major, minor, letter, solo, solo_letter = m.groups()
            rid = f"MW-{major}.{minor}-{letter}" if major else f"MW-{solo}-{solo_letter}"
            named.setdefault(rid, str(path.relative_to(ROOT)))
    unknown = {rid: f for rid, f in named.items() if rid not in known}
    assert not unknown, unknown


def test_docs_point_at_the_spec_and_design_in_the_repository() -> None:
    assert (ROOT / "docs" / "spec" / "missionweave-sections-10-11-13-16.fr.txt").is_file()
    assert (ROOT / "docs" / "design.md").is_file()
    for path in [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "missionweave").rglob("*.py"),
    ]:
        text = path.read_text(encoding="utf-8")
        assert "../shared/" not in text and "DESIGN §" not in text, path


#: MUST rows not yet OK on this branch, each with the work that makes it OK. A row listed here
#: that becomes OK fails the test below: take it out then.
PENDING_MUST: dict[str, str] = {}


def test_the_conformance_table_is_current_and_every_must_row_ok() -> None:
    """``docs/spec/CONFORMANCE.md`` is what ``python -m tests.conformance --write`` makes of
    today's spec, code, tests and recorded mutations, and every MUST requirement is OK: its
    ``Implements`` code holds recorded mutations, each naming existing tests expected to kill
    it (the mutation run itself is ``make conformance``'s, not this test's), or it has a
    reading."""
    from tests import conformance

    rows = conformance.collect()
    assert conformance.TABLE.read_text(encoding="utf-8") == conformance.render(rows), (
        "stale: run .venv/bin/python -m tests.conformance --write"
    )
    must = {r.rid: r.status for r in rows.values() if r.level == "MUST"}
    assert len(must) == 43
    assert {rid: s for rid, s in must.items()
            if s not in ("OK", "reading") and rid not in PENDING_MUST} == {}  # fmt: skip
    assert {rid for rid in PENDING_MUST if must.get(rid) == "OK"} == set(), "no longer pending"
