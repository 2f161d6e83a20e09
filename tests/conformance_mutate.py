"""The mutation run behind ``docs/spec/CONFORMANCE.md``: each recorded mutation of
``tests/conformance_mutations.py`` is applied in a scratch copy of the tree, and only its row's
tests run against it; a mutation they do not fail *survived*, i.e. no test proves that piece of
the rule. Run it with::

    .venv/bin/python -m tests.conformance --mutate [--row MW-11.3-c] [--jobs 2] [--no-baseline]

* **Scratch copy**: the working tree as it is (uncommitted edits included), copied without
  ``.git``, ``.venv`` and caches into a fresh temporary directory, removed afterwards.
* **Which code runs**: pytest starts in the scratch copy with ``PYTHONPATH`` set to it, so
  ``missionweave`` and ``tests`` import from there and not from the editable install; this module
  is loaded as a pytest plugin (``-p tests.conformance_mutate``) and refuses to run (exit 4)
  unless ``missionweave.__file__`` lies inside the scratch copy (``MW_MUTATION_SCRATCH``).
* **Applying**: the old text must occur exactly once in its file, else the mutation is refused —
  the list must stay true as the code moves.
* **Baseline**: before its mutations, each row's tests run once on the unmutated copy and must
  pass; a mutation "killed" by tests that fail anyway would prove nothing.
* **Outcome** per mutation: ``killed`` (pytest exit 1), ``survived`` (exit 0), ``timeout`` (counted
  as killed: the tests did not pass), ``error`` (any other exit: a selection that collects
  nothing, an import error) or ``refused``. Exit status 1 when a mutation survived that was not
  recorded as expected to, a mutation recorded as expected to survive was killed (the row was
  made whole: take the mark out), or on any error, refusal or failed baseline.
* **Budget** (≤ 60 min on 2 cores): the whole list with its baselines, one job, took 13.0 min
  on 2 cores shared with other test runs (load average 8); the offline end-to-end tests of
  MW-11.5-e are 1–4 min of it, depending on the load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.conformance_mutations import MUTATIONS, Mutation

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
#: Seconds one pytest run of a row's tests may take before it counts as a timeout (killed).
RUN_TIMEOUT_S = 900
_SKIP = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"
)
_ENV_SCRATCH = "MW_MUTATION_SCRATCH"


def pytest_configure(config: object) -> None:
    """Pytest hook: refuse to run unless ``missionweave`` is imported from the scratch copy."""
    import pytest

    import missionweave

    scratch = os.environ.get(_ENV_SCRATCH)
    here = Path(missionweave.__file__).resolve()
    if not scratch or not here.is_relative_to(Path(scratch).resolve()):
        raise pytest.UsageError(f"missionweave imported from {here}, not the scratch {scratch}")


@dataclass(frozen=True)
class Outcome:
    label: str  # "MW-11.3-c #1" or "MW-11.3-c baseline"
    result: str  # killed, survived, timeout, error, refused, passed (baseline), failed (baseline)
    seconds: float
    detail: str = ""


def _scratch() -> Path:
    path = Path(tempfile.mkdtemp(prefix="mw-mutant-"))
    shutil.copytree(ROOT, path / "tree", ignore=_SKIP, symlinks=True)
    return path / "tree"


def apply(tree: Path, m: Mutation) -> str | None:
    """Apply ``m`` inside ``tree``; the reason it cannot be applied, or ``None``."""
    path = tree / m.file
    if not path.is_file():
        return f"{m.file} does not exist"
    text = path.read_text(encoding="utf-8")
    found = text.count(m.old)
    if found != 1:
        return f"old text found {found} times in {m.file} (must be exactly once)"
    path.write_text(text.replace(m.old, m.new), encoding="utf-8")
    return None


def _pytest(tree: Path, tests: Iterable[str]) -> tuple[int | None, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), _ENV_SCRATCH: str(tree)}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [str(PYTHON), "-m", "pytest", *tests, "-x", "-q", "-n", "0", "-p", "no:randomly"]
    cmd += ["-p", "tests.conformance_mutate", "--no-header"]
    try:
        done = subprocess.run(
            cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {RUN_TIMEOUT_S} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else ""


def run_one(label: str, m: Mutation | None, tests: tuple[str, ...]) -> Outcome:
    """Run ``tests`` against a scratch copy with ``m`` applied (``None``: the baseline)."""
    start = time.monotonic()
    tree = _scratch()
    try:
        if m is not None and (why := apply(tree, m)):
            return Outcome(label, "refused", time.monotonic() - start, why)
        code, last = _pytest(tree, tests)
    finally:
        shutil.rmtree(tree.parent, ignore_errors=True)
    took = time.monotonic() - start
    if m is None:
        return Outcome(label, "passed" if code == 0 else "failed", took, last)
    result = {0: "survived", 1: "killed", None: "timeout"}.get(code, "error")
    return Outcome(label, result, took, last if result != "killed" else "")


def _row_job(rid: str, muts: list[Mutation], baseline: bool) -> list[Outcome]:
    out: list[Outcome] = []
    if baseline:
        tests = tuple(dict.fromkeys(t for m in muts for t in m.tests))
        out.append(run_one(f"{rid} baseline", None, tests))
        _print(out[-1])
        if out[-1].result != "passed":
            return out
    for i, m in enumerate(muts, 1):
        out.append(run_one(f"{rid} #{i} {m.file}", m, m.tests))
        _print(out[-1], m)
    return out


def _print(o: Outcome, m: Mutation | None = None) -> None:
    note = f"  (expected: {m.expected})" if m is not None and m.expected != "killed" else ""
    detail = f"  — {o.detail}" if o.detail else ""
    print(f"{o.result:>8}  {o.seconds:6.1f} s  {o.label}{note}{detail}", flush=True)


def _bad(o: Outcome, m: Mutation | None) -> bool:
    if m is None:
        return o.result != "passed"
    if o.result == "survived":
        return m.expected == "killed"
    if o.result in ("killed", "timeout"):
        return m.expected != "killed"  # fixed: take its expected mark out of the list
    return True


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.conformance --mutate")
    p.add_argument("--mutate", action="store_true", help="(how tests.conformance gets here)")
    p.add_argument("--row", action="append", default=[], help="run this row only (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="scratch copies tested at once")
    p.add_argument("--no-baseline", action="store_true", help="skip the unmutated runs")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """``--mutate [--row MW-…]… [--jobs N] [--no-baseline]``; exit 1 on an unexpected outcome."""
    args = _args(argv)
    baseline = not args.no_baseline
    by_row: dict[str, list[Mutation]] = {}
    for m in MUTATIONS:
        if not args.row or m.row in args.row:
            by_row.setdefault(m.row, []).append(m)
    if unknown := set(args.row) - set(by_row):
        print(f"no mutation recorded for {sorted(unknown)}")
        return 1
    start = time.monotonic()
    n = sum(map(len, by_row.values()))
    print(f"{n} mutations of {len(by_row)} rows, {args.jobs} job(s), baseline {baseline}",
          flush=True)  # fmt: skip
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_row_job, rid, ms, baseline) for rid, ms in by_row.items()]
        results = [(rid, f.result()) for rid, f in zip(by_row, futures, strict=True)]
    counts: dict[str, int] = {}
    bad: list[str] = []
    for rid, outs in results:
        muts: list[Mutation | None] = [None] * baseline + list(by_row[rid])
        for o, mut in zip(outs, muts, strict=False):
            key = f"baseline {o.result}" if mut is None else o.result
            counts[key] = counts.get(key, 0) + 1
            if _bad(o, mut):
                bad.append(f"{o.label}: {o.result} {o.detail}".rstrip())
    expected = [m for ms in by_row.values() for m in ms if m.expected != "killed"]
    took = time.monotonic() - start
    print(f"\n{n} mutations of {len(by_row)} rows in {took / 60:.1f} min, {args.jobs} job(s): "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))  # fmt: skip
    if expected:
        print(f"{len(expected)} recorded as expected to survive (weak rows):")
        for m in expected:
            print(f"  {m.row} {m.file}: {m.expected}")
    for line in bad:
        print(f"UNEXPECTED  {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
