"""Benchmark: durable Authority appends per second against the single-core bound.

Usage: ``python bench/authority_append.py [--seconds S] [--batch B] [--json]``

What is measured, in one process and one run:

* **appends/s** — signed ``progress.report`` Commands from 16 leased WorkItems, submitted to a
  real Authority (SQLite file, WAL, ``synchronous=FULL``) in group-commit batches of B Commands,
  each batch one durable transaction. Every Command is fully checked (signature, epochs, lease
  fencing, state table, budget) and appended as a signed, hash-chained Event.
* **p50/p99 latency** — per append: from its batch's submission to that batch's durable commit,
  in milliseconds (a Command waits for its batch).
* **bound** — the cost of the irreducible work of one append on one core, measured on the same
  Commands: canonicalize the Command (RFC 8785) + verify its Ed25519 signature + sign an Event
  hash + one SQLite insert of the Event row (committed durably every B inserts, as above).
* **ratio_to_bound** — appends/s ÷ bound appends/s. The verification stage runs on a thread pool
  beside the writer (the ``cryptography`` library releases the GIL), so the ratio can exceed 1.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from missionweave.authority import Authority
from missionweave.protocol import (
    Actor,
    Command,
    SigningKey,
    canonical_bytes,
    verify,
)
from tests.world import Clock, make_world

ITEMS = 16


def _setup(path: Path) -> tuple[Authority, list[tuple[Actor, dict[str, Any]]], Clock]:
    w = make_world(path, n_workers=4)
    w.clock.now = time.time_ns() // 1_000_000
    leased: list[tuple[Actor, dict[str, Any]]] = []
    for i in range(ITEMS):
        wid = f"item-{i}"
        worker = w.workers[i % len(w.workers)]
        w.authorize(wid, budget={}, timeouts={"lease_ms": 3_600_000})
        assert w.accept(worker, wid, w.offer(wid, worker)).accepted
        w.start(worker, wid)
        leased.append((worker, w.leased(wid)))
    return w.authority, leased, w.clock


def _commands(leased: list[tuple[Actor, dict[str, Any]]], n: int, start: int) -> list[Command]:
    out = []
    for i in range(start, start + n):
        actor, lease = leased[i % len(leased)]
        report = {
            "phase": "hashing",
            "milestones_completed": [f"file-{i}"],
            "next_checkpoint": f"file-{i + 100}",
            "estimate_remaining_ms": 1000 * i,
        }
        cmd = actor.command("progress.report", "g1", {**lease, "report": report})
        # as received from the network: a freshly parsed Command, nothing memoized
        out.append(Command.model_validate_json(cmd.model_dump_json()))
    return out


def measure_bound(cmds: list[Command], public_keys: dict[str, str], batch: int) -> float:
    """Seconds per append for canonicalize + verify + sign + one durable-batched insert."""
    key = SigningKey.generate()
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(Path(d) / "bound.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE e (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)")
        t0 = time.perf_counter()
        for i, cmd in enumerate(cmds):
            if i % batch == 0:
                conn.execute("BEGIN IMMEDIATE")
            data = canonical_bytes(cmd.model_dump(mode="json", exclude={"signature"}))
            assert verify(public_keys[cmd.actor], cmd.signature, data)  # verify
            sig = key.sign(data[:32])  # sign an event hash (32 bytes)
            conn.execute("INSERT INTO e (seq, data) VALUES (?, ?)", (i, sig + data.decode()))
            if i % batch == batch - 1 or i == len(cmds) - 1:
                conn.execute("COMMIT")
        elapsed = time.perf_counter() - t0
        conn.close()
    return elapsed / len(cmds)


def run(seconds: float, batch: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        authority, leased, clock = _setup(Path(d) / "authority.db")
        keys = {a.agent_id: a.public_key for a, _ in leased}
        warm = _commands(leased, batch * 4, 0)
        for i in range(0, len(warm), batch):
            authority.submit_many(warm[i : i + batch])
        latencies: list[float] = []
        appended, n = 0, len(warm)
        t_start = time.perf_counter()
        while time.perf_counter() - t_start < seconds:
            cmds = _commands(leased, batch, n)
            n += batch
            clock.now = time.time_ns() // 1_000_000
            t0 = time.perf_counter()
            results = authority.submit_many(cmds)
            dt = time.perf_counter() - t0
            bad = [r.rejection for r in results if not r.accepted]
            if bad:
                raise SystemExit(f"unexpected rejection: {bad[0]}")
            appended += len(cmds)
            latencies.extend([dt] * len(cmds))
        elapsed = time.perf_counter() - t_start
        rate = appended / elapsed
        bound_s = measure_bound(_commands(leased, min(appended, 4000), n), keys, batch)
        authority.close()
    lat = sorted(latencies)
    return {
        "appends": appended,
        "seconds": round(elapsed, 3),
        "batch": batch,
        "appends_per_s": round(rate, 1),
        "p50_latency_ms": round(statistics.median(lat) * 1000, 3),
        "p99_latency_ms": round(lat[int(len(lat) * 0.99) - 1] * 1000, 3),
        "bound_appends_per_s": round(1 / bound_s, 1),
        "bound_us_per_append": round(bound_s * 1e6, 1),
        "ratio_to_bound": round(rate * bound_s, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measuring time (default 5)")
    p.add_argument("--batch", type=int, default=64, help="Commands per transaction (default 64)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args()
    if args.seconds <= 0 or args.batch < 1:
        p.error("--seconds must be > 0 and --batch >= 1")
    res = run(args.seconds, args.batch)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>22}: {v}")


if __name__ == "__main__":
    main()
