"""The conformance table, ``docs/spec/CONFORMANCE.md``: one row per requirement id of
``docs/spec/REQUIREMENTS.md`` with its level, the code that implements it and the tests that
prove it. Regenerate it with one command::

    .venv/bin/python -m tests.conformance --write

(``--check`` exits 1 when the file is stale; ``tests/test_spec_ids.py`` runs that check and
requires every MUST row to be OK; ``--mutate`` runs the recorded mutations,
:mod:`tests.conformance_mutate`; ``make conformance`` runs both.)

* **Level**: the strongest keyword of the requirement's text — MUST (MUST NOT included), then
  SHOULD, then MAY; ``—`` for a statement without one (the text states a fact of the protocol).
* **Tests**: for a MUST row, the tests that kill its recorded mutations
  (``tests/conformance_mutations.py``); for any other, every ``test_*`` function of ``tests/``
  whose *name* carries the id, as ``…__MW_11_3_c`` (several ids may follow one another) or
  ``test_mw_11_3_c_…``.
* **Code**: every module, class or function of ``missionweave/`` whose docstring says
  ``Implements MW-…`` (shorthands such as ``MW-11.3-b/c/e`` count for each letter); where there
  is none (not for a MUST row), the docstrings that name the id.
* **Status**: for a MUST row, OK when it has ``Implements`` code and recorded mutations, each in a
  file holding one of the row's ``Implements`` lines, each naming tests that exist and expected
  to be killed; ``reading`` for a row no code can enforce (its reading in ``READINGS.md``);
  else what is missing. For any other row, OK when it has code and a test.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.conformance_mutations import MUTATIONS, READINGS, Mutation

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "spec" / "REQUIREMENTS.md"
TABLE = ROOT / "docs" / "spec" / "CONFORMANCE.md"
#: Rows shown at most per cell; the rest is counted.
SHOWN = 6

_REQ = re.compile(r"^- \*\*(MW-\d+(?:\.\d+)?-[a-z])\*\*(.*?)(?=^- \*\*MW-|^#|\Z)", re.M | re.S)
_TEST_ID = re.compile(r"(?:^test_|__)mw_(\d+)(?:_(\d+))?_([a-z])(?=__|_|$)", re.I)
_DOC_ID = re.compile(r"MW-(\d+(?:\.\d+)?)-([a-z](?:/[a-z])*)\b")
_IMPLEMENTS = re.compile(r"Implements\b(.*?)(?:\.\s|\.$|$)", re.S)


@dataclass
class Row:
    rid: str
    level: str
    implements: list[str] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    mutations: list[Mutation] = field(default_factory=list)
    #: every ``path::test`` of tests/, to check that a mutation's killing tests exist
    known_tests: frozenset[str] = frozenset()

    @property
    def code(self) -> list[str]:
        return self.implements if self.level == "MUST" else self.implements or self.mentions

    @property
    def killing(self) -> list[str]:
        """The tests that must kill this row's mutations (not those expected to survive)."""
        return list(
            dict.fromkeys(t for m in self.mutations if m.expected == "killed" for t in m.tests)
        )

    @property
    def status(self) -> str:
        if self.level == "MUST":
            return self._must_status()
        missing = [n for n, v in (("code", self.code), ("test", self.tests)) if not v]
        return "OK" if not missing else "no " + " and no ".join(missing)

    def _must_status(self) -> str:
        if not self.mutations:
            return "reading" if self.rid in READINGS else "no mutation"
        if not self.implements:
            return "no Implements line"
        held = set(self.implements)
        if outside := [m.file for m in self.mutations if not set(enclosing(m)) & held]:
            return "mutated outside its Implements code: " + ", ".join(dict.fromkeys(outside))
        files = {k.split("::")[0] for k in self.known_tests}
        if unknown := [t for t in self.killing if t not in self.known_tests | files]:
            return "no such test: " + ", ".join(unknown)
        if weak := [m for m in self.mutations if m.expected != "killed"]:
            return f"{len(weak)} mutation(s) survive (issue 38 item 4)"
        return "OK"


def requirements() -> dict[str, Row]:
    """Every requirement of the spec, in order, with its level."""
    rows: dict[str, Row] = {}
    for m in _REQ.finditer(SPEC.read_text(encoding="utf-8")):
        text = m.group(2)
        level = next((k for k in ("MUST", "SHOULD", "MAY") if re.search(rf"\b{k}\b", text)), "—")
        rows[m.group(1)] = Row(m.group(1), level)
    return rows


def _ids(text: str) -> list[str]:
    return [f"MW-{num}-{letter}" for num, letters in _DOC_ID.findall(text)
            for letter in letters.split("/")]  # fmt: skip


def _documented(path: Path) -> list[tuple[str, str]]:
    """``(where, docstring)`` of the module, classes and functions of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT).as_posix()
    out = [(rel, ast.get_docstring(tree) or "")]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((f"{rel}:{node.name}", ast.get_docstring(node) or ""))
    return out


def enclosing(m: Mutation) -> list[str]:
    """Where ``m`` changes the code, as the table names code: the module (``path``) and every
    class and function around the first line of its old text (``path:name``); the module alone
    when the old text is not found exactly once."""
    path = ROOT / m.file
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    out = [m.file]
    if text.count(m.old) != 1:
        return out
    line = text[: text.index(m.old)].count("\n") + 1
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                out.append(f"{m.file}:{node.name}")
    return out


def collect() -> dict[str, Row]:
    """The table's rows: requirements with their code and tests."""
    rows = requirements()
    known: set[str] = set()
    for path in sorted((ROOT / "missionweave").rglob("*.py")):
        for where, doc in _documented(path):
            claimed = {i for m in _IMPLEMENTS.finditer(doc) for i in _ids(m.group(1))}
            for rid in dict.fromkeys(_ids(doc)):
                if rid in rows:
                    (rows[rid].implements if rid in claimed else rows[rid].mentions).append(where)
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                for major, minor, letter in _TEST_ID.findall(node.name):
                    num = f"{major}.{minor}" if minor else major
                    rid = f"MW-{num}-{letter.lower()}"
                    if rid in rows and f"{rel}::{node.name}" not in rows[rid].tests:
                        rows[rid].tests.append(f"{rel}::{node.name}")
                known.add(f"{rel}::{node.name}")
    for m in MUTATIONS:
        rows[m.row].mutations.append(m)
    for r in rows.values():
        r.known_tests = frozenset(known)
    return rows


def _cell(items: list[str]) -> str:
    shown = ", ".join(f"`{i}`" for i in items[:SHOWN])
    more = len(items) - SHOWN
    return (shown + (f" … (+{more})" if more > 0 else "")) or "—"


def render(rows: dict[str, Row]) -> str:
    must = [r for r in rows.values() if r.level == "MUST"]
    lines = [
        "# Conformance: every requirement, its code and its tests",
        "",
        "Generated by `.venv/bin/python -m tests.conformance --write` from",
        "`docs/spec/REQUIREMENTS.md`, the docstrings of `missionweave/` (`Implements MW-…`, else",
        "those naming the id), the names of the tests (`…__MW_11_3_c`) and, for MUST rows, the",
        "recorded mutations of `tests/conformance_mutations.py`; do not edit by hand.",
        "A MUST row's code is where it is enforced (`Implements`), its tests are those that kill",
        "its mutations — each mutation takes a piece of the rule out of that code, and",
        "`python -m tests.conformance --mutate` (`make conformance`) checks that the tests fail.",
        "`tests/test_spec_ids.py` fails when this file is stale or a MUST row is not OK.",
        "Readings where two requirements pull apart, or no code can hold one:",
        "[READINGS.md](READINGS.md).",
        "",
        f"{sum(r.status == 'OK' for r in must)} of {len(must)} MUST requirements OK "
        f"({sum(len(r.mutations) for r in must)} recorded mutations, "
        f"{sum(m.expected != 'killed' for r in must for m in r.mutations)} expected to survive; "
        f"{sum(r.rid in READINGS for r in must)} with a reading); "
        f"{sum(r.status == 'OK' for r in rows.values())} of {len(rows)} requirements OK.",
        "",
        "| requirement | level | code | tests | mutations | status |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        tests, muts = (r.killing, str(len(r.mutations))) if r.level == "MUST" else (r.tests, "—")
        status = r.status
        if r.rid in READINGS:
            status += f" ([reading](READINGS.md#{READINGS[r.rid]}))"
        lines.append(
            f"| {r.rid} | {r.level} | {_cell(r.code)} | {_cell(tests)} | {muts} | {status} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if "--mutate" in argv:
        from tests import conformance_mutate

        return conformance_mutate.main(argv)
    text = render(collect())
    if "--write" in argv:
        TABLE.write_text(text, encoding="utf-8")
        return 0
    if "--check" in argv:
        fresh = TABLE.exists() and TABLE.read_text(encoding="utf-8") == text
        if not fresh:
            print(f"{TABLE.relative_to(ROOT)} is stale: python -m tests.conformance --write")
        return 0 if fresh else 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
