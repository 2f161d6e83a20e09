"""``python -m tests.faults [--seed N] [--trials N] [--kind K …] [--fault F …]`` (``make faults``).

Runs the fault suite (see :mod:`tests.faults`) and prints one line per trial, then the table.
Exits 1 when any trial failed a check, 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from .cluster import Config
from .nemesis import FAULTS, KINDS
from .suite import all_jobs, run_suite, table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__)
    p.add_argument("--seed", type=int, default=None, help="Seed (default: from the clock).")
    p.add_argument("--trials", type=int, default=1, help="Trials per kind and fault (default: 1).")
    p.add_argument(
        "--kind",
        action="append",
        choices=KINDS,
        help="Only this kind (repeat for several; default: every kind).",
    )
    p.add_argument(
        "--fault",
        action="append",
        choices=FAULTS,
        help="Only this fault (repeat for several; default: every fault).",
    )
    p.add_argument(
        "--items",
        type=int,
        default=Config.items,
        help="WorkItems per Mission (default: %(default)s).",
    )
    p.add_argument(
        "--bound",
        type=float,
        default=Config.bound_s,
        help="Seconds a Mission may take before it counts as stuck (default: %(default)s).",
    )
    p.add_argument("--dir", type=Path, default=None, help="Where runs go (default: a temp dir).")
    p.add_argument("--keep", action="store_true", help="Keep every run's directory.")
    a = p.parse_args(argv)
    seed = a.seed if a.seed is not None else int(time.time()) % 100_000
    base = a.dir or Path(tempfile.mkdtemp(prefix="mw-faults-"))
    cfg = Config(items=a.items, bound_s=a.bound)
    print(
        f"fault suite: seed {seed}, {a.trials} trial(s) per kind and fault, "
        f"{cfg.items} WorkItems each, runs under {base}",
        flush=True,
    )
    jobs = all_jobs(a.kind or KINDS, a.fault or FAULTS, a.trials)
    if not jobs:
        p.error("no kind is tried with those faults (worker-queue: freeze; dev-up: kill)")
    say = lambda line: print(line, flush=True)  # noqa: E731
    trials = asyncio.run(run_suite(seed, jobs, base, cfg, report=say, keep=a.keep))
    print()
    print(table(trials))
    failed = [t for t in trials if t.verdict.failures()]
    print(
        f"\nseed {seed}: {len(trials) - len(failed)}/{len(trials)} trials passed every check; "
        f"again with: python -m tests.faults --seed {seed} --trials {a.trials}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
