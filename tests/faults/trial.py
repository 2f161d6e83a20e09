"""One trial on a running deployment: start a Mission, unleash the nemesis, wait for the
Mission, let the parts recover, check."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field

from . import incidents
from .checker import Verdict, check
from .cluster import Cluster
from .nemesis import LOAD_KINDS, OWNER_KINDS, Fault, Kind, Plan, Record, unleash

#: Seconds left after the Mission ends for late results (a resumed agent's) to land.
SETTLE_S = 2.0


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
    phases: dict[str, float] = field(default_factory=dict)


def trial_seed(seed: int, kind: Kind, fault: Fault, n: int) -> str:
    """The seed of trial ``n`` of ``kind``/``fault`` in a run seeded ``seed``: every draw of the
    trial comes from it."""
    return f"{seed}:{kind}:{fault}:{n}"


async def run_trial(kind: Kind, fault: Fault, seed: str, cluster: Cluster) -> Trial:
    """Run one trial on ``cluster`` (started, healthy) and judge it; the cluster is healthy
    again afterwards, or :attr:`Verdict.notes` says why not."""
    cfg = cluster.cfg
    plan = Plan.draw(random.Random(seed), kind, fault, cluster)
    record = Record()
    status = "not started"
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    try:
        if kind in LOAD_KINDS:  # the whole Mission under the load
            await incidents.start_load(plan, cluster, record)
        await cluster.start_mission()
        t0 = time.monotonic()
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
        recovering = time.monotonic()
        await cluster.healthy()
        phases["recover"] = time.monotonic() - recovering
    except Exception as exc:  # a part that did not come back: the trial says so
        record.notes.append(f"{type(exc).__name__}: {exc}")
    duration = phases.get("mission", time.monotonic() - t0)
    try:
        verdict = await check(cluster, status, owner_faulted=kind in OWNER_KINDS)
    except Exception as exc:
        why = f"cannot check: {type(exc).__name__}: {exc}"
        verdict = Verdict.broken(status, cfg.items, kind in OWNER_KINDS, why)
    verdict.notes += record.notes
    return Trial(kind, fault, seed, plan, record, verdict, duration, phases)
