"""Run trials for every kind and fault from one seed, and print the table."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from .checker import Verdict, leftovers
from .cluster import Cluster, Config
from .nemesis import OWNER_KINDS, Fault, Kind, Plan, Record, faults_of
from .surroundings import Layout
from .trial import Trial, run_trial, trial_seed

#: What the kinds are called in the table.
LABELS = {"worker": "worker", "authority": "Authority", "temporal": "Temporal server",
          "coordinator": "coordinator", "dev-temporal": "dev stack's Temporal child",
          "worker-queue": "worker holding queued work",
          "dev-up": "dev up (whole stack)", "store": "PostgreSQL (2 replicas)",
          "disk": "Authority's disk", "read-storm": "Authority (read storm)",
          "clock": "Authority's wall clock", "conn-flood": "Authority (connection flood)",
          "member-flood": "Authority (member flood)"}  # fmt: skip
#: Faults whose re-runs after an outage are known and not yet fixed: none since issue 24 (the
#: Authority credits its downtime, stalls and silences and a whole lease more, MW-11.5-c).
KNOWN_RERUNS: frozenset[tuple[str, str]] = frozenset()


def layout_of(kind: Kind) -> Layout:
    """The deployment a kind is tried on."""
    if kind in ("dev-temporal", "dev-up"):
        return "dev"
    layouts: dict[str, Layout] = {"store": "postgres", "disk": "disk", "clock": "clock"}
    return layouts.get(kind, "separate")


async def run_suite(
    seed: int,
    jobs: Iterable[tuple[Kind, Fault, int]],
    base: Path,
    cfg: Config,
    report: Callable[[str], None] = lambda line: None,
    keep: bool = False,
) -> list[Trial]:
    """Run ``jobs`` — (kind, fault, trial number) — in order, each seeded from ``seed``.
    Consecutive jobs of one layout share a deployment, which is started again after a trial
    whose Mission did not complete or whose parts did not recover. Every deployment is
    stopped and its leftover processes are counted into its last trial; its directory is
    removed unless ``keep`` or one of its trials failed."""
    done: list[Trial] = []
    cluster: Cluster | None = None
    mine: list[Trial] = []
    deployments = 0

    async def retire() -> None:
        nonlocal cluster, mine
        if cluster is None:
            return
        await cluster.stop()
        left = leftovers(cluster.run_dir)
        if left and mine:
            mine[-1].verdict.leftovers += left
            report(f"     {cluster.run_dir}: {len(left)} process(es) left: {left}")
        if not keep and not any(t.verdict.failures() for t in mine):
            shutil.rmtree(cluster.run_dir, ignore_errors=True)
        cluster, mine = None, []

    try:
        for kind, fault, n in jobs:
            if cluster is not None and cluster.layout != layout_of(kind):
                await retire()
            seed_n = trial_seed(seed, kind, fault, n)
            if cluster is None:
                deployments += 1
                cluster = Cluster(base / f"{deployments}-{layout_of(kind)}", cfg, layout_of(kind))
                try:
                    await cluster.start()
                except Exception as exc:
                    why = f"deployment did not start: {type(exc).__name__}: {exc}"
                    plan = Plan.draw(random.Random(seed_n), kind, fault, cluster)
                    broken = Verdict.broken("not started", cfg.items, kind in OWNER_KINDS, why)
                    t = Trial(kind, fault, seed_n, plan, Record(), broken, 0)
                    mine.append(t)
                    done.append(t)
                    report(trial_line(t))
                    await retire()
                    continue
            t = await run_trial(kind, fault, seed_n, cluster)
            mine.append(t)
            done.append(t)
            report(trial_line(t))
            # A killed dev-stack Temporal is started again by `dev up`, which gives up after
            # 3 restarts a minute (missionweave.dev._stack.RESTARTS): each such kill gets a fresh
            # stack, as back-to-back trials would otherwise kill it more often than that.
            killed_dev = fault == "kill" and kind in ("dev-temporal", "dev-up")
            # a stepped clock leaves the Authority's lease time ahead of the wall clock for a
            # while (it never goes back): the next trial gets an Authority that never stepped
            fresh = killed_dev or kind == "clock"
            if t.verdict.status != "completed" or t.verdict.notes or fresh:
                await retire()
    finally:
        await retire()
    return done


def all_jobs(
    kinds: Iterable[Kind], faults: Iterable[Fault], trials: int
) -> list[tuple[Kind, Fault, int]]:
    """Every kind × fault × trial (the faults a kind is tried with), kinds of one layout
    together."""
    faults = list(faults)
    order = ("separate", "clock", "disk", "postgres", "dev")
    ks = sorted(kinds, key=lambda k: order.index(layout_of(k)))
    return [
        (k, f, n) for k in ks for f in faults if f in faults_of(k) for n in range(1, trials + 1)
    ]


def trial_line(t: Trial) -> str:
    """One line per trial: its seed, plan and findings."""
    v = t.verdict
    failed = v.failures()
    known = (
        bool(failed)
        and (t.kind, t.plan.fault) in KNOWN_RERUNS
        and failed == [f"{v.unexpected_reruns} item(s) re-run after an outage"]
    )
    tag = "FAIL" if failed else "ok  "
    return (
        f"{tag} {t.seed:<28} {t.plan.describe():<58} "
        f"{v.status} in {t.duration_s:.1f} s, re-run {v.rerun_items}, "
        f"under 2+ keys {v.effects_items_twice}, same key {v.effects_twice_same_key}, "
        f"late {v.late_results}, recovered in {t.phases.get('recover', 0):.0f} s"
        + (f" — {'; '.join(failed)}" if failed else "")
        + (" (known)" if known else "")
        + (f" [{'; '.join(n.strip()[:160] for n in v.notes)}]" if v.notes else "")
        + (f" {{{'; '.join(t.record.measured)}}}" if t.record.measured else "")
    )


def _mark(n: int, owner: bool, expected: str) -> str:
    """What a non-zero count of re-runs or duplicates says: expected when the owner was
    faulted, a failure otherwise."""
    return "" if not n else expected if owner else " **after an outage**"


def table(trials: list[Trial]) -> str:
    """The Markdown table of the issue, one row per kind × fault."""
    head = (
        "| fault | of | tried | completed | verified once | same key repeated "
        "| items re-run (new epoch) | real duplicates (effect under 2+ keys) | late results "
        "| chain breaks | stuck | processes left | longest |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    cells: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        cells.setdefault((t.kind, t.fault), []).append(t)
    for (kind, fault), ts in cells.items():
        vs = [t.verdict for t in ts]
        n_items = sum(v.items for v in vs)
        reruns = sum(v.rerun_items for v in vs)
        owner = kind in OWNER_KINDS
        rerun_cell = f"{reruns}" + _mark(reruns, owner, " (owner faulted: expected)")
        dups = sum(v.effects_items_twice for v in vs)
        dup_cell = f"{dups}" + _mark(dups, owner, " (owner faulted)")
        n_unchecked = sum(not v.checked for v in vs)
        unchecked = f" ({n_unchecked} not checked)" if n_unchecked else ""
        rows.append(
            f"| {fault} | {LABELS[kind]} | {len(ts)} "
            f"| {sum(v.status == 'completed' for v in vs)} "
            f"| {sum(v.verified_once for v in vs)}/{n_items} "
            f"| {sum(v.effects_twice_same_key for v in vs)} | {rerun_cell} "
            f"| {dup_cell} | {sum(v.late_results for v in vs)} "
            f"| {sum(v.checked and not v.chain_ok for v in vs)}{unchecked} "
            f"| {sum(v.status == 'stuck' for v in vs)} "
            f"| {sum(len(v.leftovers) for v in vs)} | {max(t.duration_s for t in ts):.0f} s |"
        )
    return "\n".join(rows)
