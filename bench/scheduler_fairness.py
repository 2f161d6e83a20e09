"""Benchmark: how fairly the agent's scheduler shares its slots, on a fake clock, in one run.

Usage: ``python bench/scheduler_fairness.py [--groups G] [--seconds S] [--slots N]
[--max-wait-ms W] [--json]`` (``--max-wait-ms`` defaults to the agent's 300000)

G Groups with weights 1, 2, … G and different WorkItem durations (1 to 3 s) are kept
backlogged on an agent with N slots for S simulated seconds (``tests/support/scheduler_sim.py``: the
same simulation the fairness tests run). For the weighted-fair scheduler and, in the same run,
the round-robin it replaced, it prints per Group: the share of slot-time it got, its weighted
share, the relative error, and the longest and 99th-percentile wait; then the mean wall time of
one ``plan`` call in microseconds. ``--json`` prints one JSON object instead.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _figures import parser

from missionweave.worker._scheduler import Scheduler
from tests.support.scheduler_sim import Plans, RoundRobin, simulate, weighted_shares


class _Counting:
    """Counts ``plan`` calls and their wall time."""

    def __init__(self, inner: Plans) -> None:
        self.inner, self.calls, self.seconds = inner, 0, 0.0

    def plan(self, *args: Any) -> Any:
        t = time.perf_counter()
        try:
            return self.inner.plan(*args)
        finally:
            self.seconds += time.perf_counter() - t
            self.calls += 1


def run(groups: int, seconds: int, slots: int, max_wait_ms: int | None) -> dict[str, Any]:
    weights = {f"g{i}": float(i + 1) for i in range(groups)}
    durations = {f"g{i}": 1_000 + 1_000 * (i % 3) for i in range(groups)}
    want = weighted_shares(weights)
    out: dict[str, Any] = {
        "groups": groups,
        "seconds": seconds,
        "slots": slots,
        "max_wait_ms": max_wait_ms,
    }
    for name, sched in (
        ("weighted_fair", Scheduler(slots, weights=weights, max_wait_ms=max_wait_ms)),
        ("round_robin", RoundRobin(slots)),
    ):
        counted = _Counting(sched)
        res = simulate(
            counted, durations, slots=slots, horizon_ms=seconds * 1000, backlog=max(3, slots)
        )
        shares = res.shares()
        out[name] = {
            "per_group": {
                g: {
                    "share": round(shares[g], 4),
                    "weighted_share": round(want[g], 4),
                    "error": round(abs(shares[g] - want[g]) / want[g], 4),
                    "max_wait_ms": max(res.waits_ms[g], default=0),
                }
                for g in weights
            },
            "max_error": round(max(abs(shares[g] - want[g]) / want[g] for g in weights), 4),
            "max_wait_ms": res.max_wait_ms(),
            "p99_wait_ms": res.p99_wait_ms(),
            "plan_us": round(counted.seconds / max(1, counted.calls) * 1e6, 1),
            "starts": len(res.starts),
        }
    return out


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--groups", type=int, default=4, help="Groups, weights 1..G")
    p.add_argument("--seconds", type=int, default=3_600, help="simulated seconds")
    p.add_argument("--slots", type=int, default=4, help="the agent's slots")
    p.add_argument(
        "--max-wait-ms",
        type=int,
        default=300_000,
        help="the scheduler's bound on waiting (the agent's default)",
    )
    args = p.parse_args()
    if args.groups < 1 or args.seconds < 1 or args.slots < 1:
        p.error("--groups, --seconds and --slots must be >= 1")
    res = run(args.groups, args.seconds, args.slots, args.max_wait_ms)
    if args.json:
        print(json.dumps(res))
        return
    print(f"{args.groups} Groups, {args.slots} slots, {args.seconds} s simulated")
    for name in ("weighted_fair", "round_robin"):
        r = res[name]
        print(
            f"\n{name}: max error {r['max_error']:.2%}, max wait {r['max_wait_ms']} ms, "
            f"p99 wait {r['p99_wait_ms']} ms, {r['plan_us']} µs per plan"
        )
        print(f"  {'group':<6} {'share':>7} {'weighted':>9} {'error':>7} {'max wait':>9}")
        for g, v in r["per_group"].items():
            print(
                f"  {g:<6} {v['share']:>7.2%} {v['weighted_share']:>9.2%} "
                f"{v['error']:>7.2%} {v['max_wait_ms']:>7} ms"
            )


if __name__ == "__main__":
    main()
