"""One trial: start a deployment, run the Mission, unleash the nemesis, stop, check."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass
from pathlib import Path

from .checker import Verdict, check
from .cluster import Cluster, Config
from .nemesis import Fault, Kind, Plan, Record, unleash

#: Seconds left after the Mission ends for late results (a resumed agent's) to land.
SETTLE_S = 3.0


@dataclass
class Trial:
    """A finished trial."""

    kind: Kind
    fault: Fault
    seed: str
    plan: Plan
    record: Record
    verdict: Verdict
    duration_s: float
    run_dir: Path
    phases: dict[str, float]


def trial_seed(seed: int, kind: Kind, fault: Fault, n: int) -> str:
    """The seed of trial ``n`` of ``kind``/``fault`` in a run seeded ``seed``: every draw of the
    trial comes from it, so one trial can be run again alone."""
    return f"{seed}:{kind}:{fault}:{n}"


async def run_trial(kind: Kind, fault: Fault, seed: str, cfg: Config, run_dir: Path) -> Trial:
    """Run one trial under ``run_dir`` (created) and judge it."""
    rng = random.Random(seed)
    cluster = Cluster(run_dir, cfg, "dev" if kind == "dev-temporal" else "separate")
    plan = Plan.draw(rng, kind, fault, cluster)
    record = Record()
    status = "not started"
    t0 = begun = time.monotonic()
    phases: dict[str, float] = {}
    try:
        await cluster.start()
        await cluster.start_mission()
        t0 = time.monotonic()
        phases["start"] = t0 - begun
        nemesis = asyncio.create_task(unleash(plan, cluster, t0, record))
        status = await cluster.wait_mission(cfg.bound_s)
        phases["mission"] = time.monotonic() - t0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(nemesis), cfg.bound_s)
        if not nemesis.done():
            nemesis.cancel()
            record.notes.append("nemesis still at work at the end")
        elif nemesis.exception() is not None:
            record.notes.append(f"nemesis failed: {nemesis.exception()!r}")
        await asyncio.sleep(SETTLE_S)
    except Exception as exc:  # a part that did not come up: the trial says so
        record.notes.append(f"{type(exc).__name__}: {exc}")
    finally:
        duration = phases.get("mission", time.monotonic() - t0)
        stopping = time.monotonic()
        await cluster.stop()
        phases["stop"] = time.monotonic() - stopping
    verdict = check(cluster, status, owner_faulted=kind == "worker")
    verdict.notes += record.notes
    return Trial(kind, fault, seed, plan, record, verdict, duration, run_dir, phases)
