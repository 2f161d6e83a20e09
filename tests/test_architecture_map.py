"""docs/architecture.md cannot go stale (issue 36): its package table's import columns and the
paths it names are checked against the code and ``pyproject.toml``.

* **imports**: each row lists exactly the other rows' packages its modules import directly
  (the import graph ``lint-imports`` reads, built by ``grimp``).
* **must not import**: each row lists exactly what the ``[tool.importlinter]`` contracts forbid
  it — each fact stated is enforced by a contract, and each contract's rule is stated.
* every module of ``missionweave`` belongs to a row, and every file or folder the page names
  exists.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
PYPROJECT = REPO / "pyproject.toml"
ROOT = "missionweave"

#: The header of the package table, to the letter: the test finds the table by it.
HEADER = "| package | owns | imports | must not import |"
_NAME = r"`[A-Za-z_][A-Za-z0-9_.]*`"
#: An import cell: backticked names, comma separated, or an em dash for none.
_CELL = re.compile(rf"^(?:—|{_NAME}(?:, {_NAME})*)$")
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    """One row of the package table: its module (``missionweave.authority.core``), its folder
    or file, and its two import cells as absolute module names."""

    module: str
    path: Path
    owns: str
    imports: frozenset[str]
    must_not: frozenset[str]


def _absolute(name: str, internal: Iterable[str]) -> str:
    """``authority.core`` → ``missionweave.authority.core``; an outside module stays as is."""
    return f"{ROOT}.{name}" if name.split(".")[0] in internal else name


def _names(cell: str, where: str, internal: Iterable[str]) -> frozenset[str]:
    if not _CELL.match(cell):
        raise AssertionError(
            f"{where}: an import cell holds only backticked names, comma separated, or —; "
            f"got {cell!r}"
        )
    return frozenset(_absolute(n, internal) for n in _CODE.findall(cell))


def package_table(text: str, internal: Iterable[str]) -> list[Row]:
    """The rows of the table headed :data:`HEADER` in ``text``.

    Raises:
        AssertionError: no such table, a row without four cells, a package cell that is not
            one backticked ``missionweave/…`` path, or an import cell off its grammar.
    """
    lines = text.splitlines()
    if HEADER not in lines:
        raise AssertionError(f"docs/architecture.md has no table headed {HEADER!r}")
    rows = []
    for line in lines[lines.index(HEADER) + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 4:
            raise AssertionError(f"a package row has {len(cells)} cells, not 4: {line[:80]!r}")
        package, owns, imports, must_not = cells
        m = re.fullmatch(rf"`({ROOT}(?:/[A-Za-z_]+)*)(/|\.py)`", package)
        if m is None:
            raise AssertionError(f"a package cell is one `missionweave/…/` or `….py`: {package!r}")
        module = m.group(1).replace("/", ".")
        rows.append(
            Row(
                module=module,
                path=REPO / (m.group(1) + ("/" if m.group(2) == "/" else ".py")),
                owns=owns,
                imports=_names(imports, f"{module} imports", internal),
                must_not=_names(must_not, f"{module} must not import", internal),
            )
        )
    return rows


def _under(module: str, parent: str) -> bool:
    return module == parent or module.startswith(parent + ".")


def row_of(module: str, rows: Iterable[str]) -> str | None:
    """The row ``module`` belongs to: the longest row module that is it or holds it."""
    holders = [r for r in rows if _under(module, r)]
    return max(holders, key=len) if holders else None


def imports_by_row(graph: grimp.ImportGraph, rows: Iterable[str]) -> dict[str | None, set[str]]:
    """For each row (``None``: modules of no row), the other rows its modules import."""
    rows = list(rows)
    found: dict[str | None, set[str]] = {}
    for module in graph.modules:
        if not _under(module, ROOT) or module == ROOT:
            continue
        home = row_of(module, rows)
        targets = found.setdefault(home, set())
        for imported in graph.find_modules_directly_imported_by(module):
            there = row_of(imported, rows) if _under(imported, ROOT) else None
            if there is not None and there != home:
                targets.add(there)
    return found


@dataclass(frozen=True)
class Rule:
    """One ``(source, forbidden)`` pair of an import-linter ``forbidden`` contract."""

    contract: str
    source: str
    forbidden: str


def contract_rules(pyproject: Mapping[str, object]) -> list[Rule]:
    """Every ``(source, forbidden)`` pair of the ``[tool.importlinter]`` contracts.

    Raises:
        AssertionError: a contract of another type than ``forbidden`` (this page's column
            speaks of forbidden imports only; a new kind of contract needs a new column).
    """
    contracts = pyproject["tool"]["importlinter"]["contracts"]  # type: ignore[index]
    rules = []
    for c in contracts:
        if c["type"] != "forbidden":
            raise AssertionError(f"contract {c['name']!r} is {c['type']!r}: teach this test")
        rules += [
            Rule(c["name"], s, f) for s in c["source_modules"] for f in c["forbidden_modules"]
        ]
    return rules


def unstated_rules(rows: Iterable[Row], rules: Iterable[Rule]) -> list[str]:
    """The contracts' rules the table does not state: for each rule, every row at or under its
    source must name the forbidden module or a package holding it; a source must have a row."""
    rows = list(rows)
    missing = []
    for rule in rules:
        bound = [r for r in rows if _under(r.module, rule.source)]
        if not bound:
            missing.append(f"{rule.contract!r}: no row for its source {rule.source}")
        for row in bound:
            if not any(_under(rule.forbidden, n) for n in row.must_not):
                missing.append(f"{row.module} must not import {rule.forbidden} ({rule.contract!r})")
    return missing


def unenforced_facts(rows: Iterable[Row], rules: Iterable[Rule]) -> list[str]:
    """The table's "must not import" facts no contract enforces: the row must be at or under a
    rule's source and the name at or under its forbidden module."""
    rules = list(rules)
    return [
        f"{row.module} must not import {name}"
        for row in rows
        for name in sorted(row.must_not)
        if not any(_under(row.module, r.source) and _under(name, r.forbidden) for r in rules)
    ]


def missing_paths(text: str, rows: Iterable[Row]) -> list[str]:
    """The backticked files and folders ``text`` names that do not exist.

    A name with a ``/`` or ending in ``.py`` counts (a ``tests/x.py::test_y`` its test too);
    one with a space or ``<`` is a command or a pattern, and ``*`` a glob that must match. A
    name with a ``/`` is found from the repository, ``missionweave/``, ``missionweave/authority/``
    or ``tests/``; a bare file name in a package row, in that row's folder, elsewhere in
    ``tests/`` (the helpers' table) — write a path with its package everywhere else.
    """
    bases = [REPO, REPO / ROOT, REPO / ROOT / "authority", REPO / "tests"]
    row_dirs = {row.module: row.path if row.path.suffix == "" else row.path.parent for row in rows}
    missing = []
    current: list[Path] = []
    for line in text.splitlines():
        m = re.match(rf"^\| `({ROOT}[^`]*)`", line)
        if m:
            module = m.group(1).removesuffix("/").removesuffix(".py").replace("/", ".")
            current = [row_dirs[module]] if module in row_dirs else []
        elif not line.startswith("|"):
            current = []
        for name in _CODE.findall(line):
            if " " in name or "<" in name or not ("/" in name or name.endswith(".py")):
                continue
            path, _, test = name.partition("::")
            where = (current or [REPO / "tests"]) if "/" not in path else bases
            hits = [
                h for base in where for h in (base.glob(path) if "*" in path else [base / path])
            ]
            hits = [h for h in hits if h.exists()]
            if not hits:
                missing.append(name)
            elif test and not any(f"def {test}(" in h.read_text(encoding="utf-8") for h in hits):
                missing.append(name)
    return missing


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def internal() -> set[str]:
    return {p.stem for p in (REPO / ROOT).iterdir() if p.suffix == ".py" or p.is_dir()} - {
        "__init__",
        "__pycache__",
    }


@pytest.fixture(scope="module")
def rows(page: str, internal: set[str]) -> list[Row]:
    return package_table(page, internal)


@pytest.fixture(scope="module")
def rules() -> list[Rule]:
    return contract_rules(tomllib.loads(PYPROJECT.read_text(encoding="utf-8")))


def test_each_row_names_an_existing_package_once(rows: list[Row]) -> None:
    modules = [r.module for r in rows]
    assert len(modules) == len(set(modules)), modules
    assert [r.module for r in rows if not r.path.exists()] == []


def test_each_imports_cell_is_the_code_s_imports(rows: list[Row]) -> None:
    """A row's **imports** are the other rows its modules import, neither more nor less; every
    module of ``missionweave`` but the root belongs to a row."""
    graph = grimp.build_graph(ROOT, include_external_packages=False)
    modules = [r.module for r in rows]
    found = imports_by_row(graph, modules)
    orphans = sorted(m for m in graph.modules if m != ROOT and row_of(m, modules) is None)
    assert None not in found, f"modules of no row in docs/architecture.md: {orphans}"
    wrong = {
        r.module: {
            "imported, not in the table": sorted(found.get(r.module, set()) - r.imports),
            "in the table, not imported": sorted(r.imports - found.get(r.module, set())),
        }
        for r in rows
        if found.get(r.module, set()) != r.imports
    }
    assert wrong == {}


def test_each_must_not_fact_is_a_contract_and_each_contract_a_fact(
    rows: list[Row], rules: list[Rule]
) -> None:
    assert unenforced_facts(rows, rules) == []
    assert unstated_rules(rows, rules) == []


def test_every_path_the_page_names_exists(page: str, rows: list[Row]) -> None:
    assert missing_paths(page, rows) == []


def test_the_activities_row_names_every_coordinator_step(rows: list[Row]) -> None:
    """The ``activities/`` row names each step ``CoordinatorActivities.activities()`` lists (the
    Worker's one list), and no step that is not there: a new step is a fact of the page too."""
    from temporalio import activity

    from missionweave.activities import CoordinatorActivities

    listed = {
        activity._Definition.must_from_callable(step).name  # the name the Worker registers
        for step in CoordinatorActivities.activities(
            CoordinatorActivities.__new__(CoordinatorActivities)
        )
    }
    (row,) = [r for r in rows if r.module == f"{ROOT}.activities"]
    named = set(_CODE.findall(row.owns))
    assert listed <= named, f"steps the activities/ row does not name: {sorted(listed - named)}"
    methods = {
        n
        for n in named
        if callable(getattr(CoordinatorActivities, n, None)) and not n.startswith("_")
    }
    assert methods <= listed, f"named as steps, not in activities(): {sorted(methods - listed)}"


def test_the_checks_see_a_stale_table() -> None:
    """The checks themselves: an unenforced fact, an unstated rule, a bad cell and a missing
    path are each reported."""
    text = "\n".join(
        [
            HEADER,
            "|---|---|---|---|",
            "| `missionweave/protocol/` | pure (`_states.py`, `_gone.py`) | — | `cli`, `httpx` |",
            "| `missionweave/authority/` | the Authority | `protocol` | — |",
            "| `missionweave/authority/core/` | its core | `protocol` | `authority.http` |",
            "",
            "See `workflows/_steps.py` and `workflows/_nowhere.py`.",
        ]
    )
    rows = package_table(text, {"protocol", "authority", "cli", "workflows"})
    rules = [
        Rule("pure", "missionweave.protocol", "missionweave.cli"),
        Rule("the core", "missionweave.authority", "missionweave.authority.http"),
    ]
    assert unenforced_facts(rows, rules) == ["missionweave.protocol must not import httpx"]
    assert unstated_rules(rows, rules) == [
        "missionweave.authority must not import missionweave.authority.http ('the core')"
    ]
    assert missing_paths(text, rows) == ["_gone.py", "workflows/_nowhere.py"]
    with pytest.raises(AssertionError, match="only backticked names"):
        package_table(text.replace("`cli`, `httpx`", "`cli` and others"), {"cli"})
