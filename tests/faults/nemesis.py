"""The nemesis: one fault per trial, chosen and timed from the trial's seed.

Kinds (the part faulted) and faults:

* ``kill`` — ``kill -9`` of the part's process group; the operator starts it again after a
  seeded pause (``dev-temporal``: nobody does — ``dev up`` must start its child again itself);
* ``freeze`` — SIGSTOP, held past the lease (``lease_ms`` + 1.5 s), then SIGCONT;
* ``cut`` — the proxies between the part and its peers ``drop`` (connections reset, new ones
  refused) or ``stall`` (nothing forwarded) for as long, then pass again. A worker or the
  coordinator is cut from both servers; a server is cut from every client; the dev stack's
  Temporal is cut from the agents.

Two kinds take one fault only (:data:`KIND_FAULTS`):

* ``worker-queue`` / ``freeze`` — a worker frozen while it holds an accepted WorkItem that waits
  in its queue for a slot, past the heartbeat timeout and long enough for the workflow to
  resume the WorkItem at its owner: when it resumes, the stale attempt and the newer one wait
  for the same slot (issue 24, finding 1: the WorkItem stuck for good);
* ``dev-up`` / ``kill`` — ``kill -9`` of ``missionweave dev up`` itself (its Temporal child, the
  Authority and the coordinator at once), started again by the operator after a seeded pause
  (issue 24, finding 3). Not the owner: nothing may run twice.

The incident kinds of issue 37 — none of them the owner's fault, so nothing may run twice —
are :mod:`.incidents`: ``store``/``kill``, ``disk``/``fill``, ``clock``/``step-ahead`` and
``step-back``, ``read-storm``/``storm``, ``conn-flood``/``flood``, ``member-flood``/``flood``.

The moment: once the ledger holds a seeded number of effects (between one and half of the
WorkItems), plus a seeded delay under 0.6 s — mid-Mission, with work in flight
(``worker-queue``: once the target holds a queued WorkItem).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import signal
import time
from dataclasses import dataclass, field
from typing import Literal

from . import incidents
from .cluster import Cluster
from .parts import children

Kind = Literal[
    "worker", "authority", "temporal", "coordinator", "dev-temporal", "worker-queue", "dev-up",
    "store", "disk", "read-storm", "clock", "conn-flood", "member-flood",
]  # fmt: skip
Fault = Literal[
    "kill", "freeze", "cut", "fill", "storm", "step-ahead", "step-back", "flood"
]  # fmt: skip
KINDS: tuple[Kind, ...] = (
    "worker", "authority", "temporal", "coordinator", "dev-temporal", "worker-queue", "dev-up",
    "store", "disk", "read-storm", "clock", "conn-flood", "member-flood",
)  # fmt: skip
#: The incident kinds of issue 37 (:mod:`.incidents`).
INCIDENT_KINDS: frozenset[Kind] = frozenset(
    {"store", "disk", "read-storm", "clock", "conn-flood", "member-flood"}
)
#: The incident kinds that are a load process, started before the Mission (:mod:`.incidents`).
LOAD_KINDS: frozenset[Kind] = frozenset({"read-storm", "conn-flood", "member-flood"})
FAULTS: tuple[Fault, ...] = (
    "kill", "freeze", "cut", "fill", "storm", "step-ahead", "step-back", "flood"
)  # fmt: skip
#: The faults of a process: a kind not listed in :data:`KIND_FAULTS` is tried with each.
OUTAGES: tuple[Fault, ...] = ("kill", "freeze", "cut")
#: The faults a kind is tried with (:data:`OUTAGES` when not listed).
KIND_FAULTS: dict[Kind, tuple[Fault, ...]] = {
    "worker-queue": ("freeze",),
    "dev-up": ("kill",),
    "store": ("kill",),
    "disk": ("fill",),
    "read-storm": ("storm",),
    "clock": ("step-ahead", "step-back"),
    "conn-flood": ("flood",),
    "member-flood": ("flood",),
}
#: Kinds whose fault hits an agent that owns WorkItems: re-runs under a new epoch expected.
OWNER_KINDS: frozenset[Kind] = frozenset({"worker", "worker-queue"})
#: Seconds a ``worker-queue`` freeze lasts beyond the lease: the heartbeat timeout passes and
#: the workflow has time to read the Authority and resume the WorkItem at its owner.
QUEUE_FREEZE_EXTRA_S = 4.0


def faults_of(kind: Kind) -> tuple[Fault, ...]:
    """The faults ``kind`` is tried with."""
    return KIND_FAULTS.get(kind, OUTAGES)


@dataclass(frozen=True)
class Plan:
    """What the nemesis does in one trial (all drawn from the seed)."""

    kind: Kind
    fault: Fault
    after_effects: int
    delay_s: float
    hold_s: float
    down_s: float
    target: str
    cut_mode: Literal["drop", "stall"]

    @classmethod
    def draw(cls, rng: random.Random, kind: Kind, fault: Fault, cluster: Cluster) -> Plan:
        c = cluster.cfg
        targets = {
            "worker": cluster.workers,
            "authority": ["authority"],
            "temporal": ["temporal"],
            "coordinator": ["coordinator"],
            "dev-temporal": ["dev"],
            "worker-queue": cluster.workers,
            "dev-up": ["dev"],
        }.get(kind, ["authority"])
        extra = QUEUE_FREEZE_EXTRA_S if kind == "worker-queue" else 1.5
        plan = cls(
            kind=kind,
            fault=fault,
            after_effects=rng.randint(1, max(1, c.items // 2)),
            delay_s=round(rng.uniform(0, 0.6), 3),
            hold_s=c.lease_ms / 1000 + extra,
            down_s=round(rng.uniform(0.5, 2.5), 3),
            target=rng.choice(targets),
            cut_mode=rng.choice(("drop", "stall")),
        )
        if kind == "store":  # a database restart takes longer than a process's
            return dataclasses.replace(plan, target="postgres", down_s=round(rng.uniform(2, 8), 3))
        if kind in LOAD_KINDS:  # the whole Mission under load: from its start
            return dataclasses.replace(plan, hold_s=incidents.LOAD_S, after_effects=0)
        return plan

    def describe(self) -> str:
        if self.kind in INCIDENT_KINDS:
            what = {
                "store": f"kill -9 PostgreSQL under 2 replicas, down {self.down_s:g} s",
                "disk": f"the Authority's disk full {self.hold_s:g} s",
                "read-storm": f"300 page reads + 100 subscriptions from 0, {self.hold_s:g} s",
                "clock": f"the Authority's wall clock {self.fault} for {self.hold_s:g} s",
                "conn-flood": f"4,200 sockets holding unsigned upgrades {self.hold_s:g} s",
                "member-flood": f"one member's work.propose flood {self.hold_s:g} s",
            }[self.kind]
            clock = {"step-ahead": "+10 min", "step-back": "-1 h"}.get(self.fault, "")
            what = what.replace(self.fault, clock) if clock else what
            when = (
                "from the Mission's start"
                if self.kind in LOAD_KINDS
                else f"after {self.after_effects} effect(s) + {self.delay_s:g} s"
            )
            return f"{self.kind}: {what}, {when}"
        if self.kind == "dev-temporal":
            target = "dev up's Temporal" if self.fault != "cut" else "dev up's Temporal (agents)"
        elif self.kind == "dev-up":
            target = "dev up"
        else:
            target = self.target
        down = "dev up starts it" if self.kind == "dev-temporal" else f"down {self.down_s:g} s"
        what = {
            "kill": f"kill -9, {down}",
            "freeze": f"SIGSTOP {self.hold_s:g} s",
            "cut": f"{self.cut_mode} {self.hold_s:g} s",
        }[self.fault]
        when = (
            "once it holds a queued WorkItem"
            if self.kind == "worker-queue"
            else f"after {self.after_effects} effect(s)"
        )
        return f"{self.fault} {target} ({what}) {when} + {self.delay_s:g} s"


@dataclass
class Record:
    """What the nemesis did, when (seconds since the Mission started)."""

    done: bool = False
    at_s: float | None = None
    back_s: float | None = None
    notes: list[str] = field(default_factory=list)
    #: what an incident's load got (its counts), what stood in for what
    measured: list[str] = field(default_factory=list)


async def unleash(plan: Plan, cluster: Cluster, t0: float, record: Record) -> None:
    """Wait for the plan's moment, apply its fault, then undo it as an operator would."""
    while not await _moment(plan, cluster):
        if cluster.handle is not None and time.monotonic() - t0 > cluster.cfg.bound_s:
            record.notes.append("the moment never came")
            return
        await asyncio.sleep(0.05 if plan.kind != "worker-queue" else 0.1)
    await asyncio.sleep(plan.delay_s)
    record.at_s = time.monotonic() - t0
    if plan.kind in INCIDENT_KINDS:
        await incidents.apply(plan, cluster, record)
        record.back_s = time.monotonic() - t0
        record.done = True
        return
    part = cluster.parts[plan.target]
    if plan.fault == "cut":
        proxies = _cut_proxies(plan, cluster)
        for p in proxies:
            p.set_mode(plan.cut_mode)
        await asyncio.sleep(plan.hold_s)
        for p in proxies:
            p.set_mode("pass")
    elif plan.kind == "dev-up":  # the whole stack: Temporal, Authority, coordinator
        part.kill()
        await asyncio.sleep(plan.down_s)
        part.start()
    elif plan.kind == "dev-temporal":
        (child,) = children(part.pid, "start-dev")
        if plan.fault == "kill":
            os.kill(child, signal.SIGKILL)
            await _until_back(cluster, child, record, t0)
        else:
            os.kill(child, signal.SIGSTOP)
            await asyncio.sleep(plan.hold_s)
            os.kill(child, signal.SIGCONT)
    elif plan.fault == "kill":
        part.kill()
        await asyncio.sleep(plan.down_s)
        part.start()
    else:
        part.signal(signal.SIGSTOP)
        await asyncio.sleep(plan.hold_s)
        part.signal(signal.SIGCONT)
    record.back_s = record.back_s or time.monotonic() - t0
    record.done = True


async def _moment(plan: Plan, cluster: Cluster) -> bool:
    """Whether the plan's moment has come."""
    if plan.kind == "worker-queue":
        return bool(await cluster.queued_at(plan.target))
    return cluster.effects() >= plan.after_effects


def _cut_proxies(plan: Plan, cluster: Cluster) -> list:  # type: ignore[type-arg]
    if plan.kind in ("worker", "coordinator"):
        return [p for n, p in cluster.proxies.items() if n.startswith(f"{plan.target}→")]
    server = "authority" if plan.kind == "authority" else "temporal"
    return [p for n, p in cluster.proxies.items() if n.endswith(f"→{server}")]


async def _until_back(cluster: Cluster, old: int, record: Record, t0: float) -> None:
    """Wait (up to the bound) until ``dev up`` runs a new Temporal child, or has exited."""
    dev = cluster.parts["dev"]
    deadline = time.monotonic() + cluster.cfg.bound_s
    while time.monotonic() < deadline:
        if not dev.alive():
            record.notes.append(f"dev up exited with {dev.proc.returncode if dev.proc else '?'}")
            return
        if [c for c in children(dev.pid, "start-dev") if c != old]:
            record.back_s = time.monotonic() - t0
            return
        await asyncio.sleep(0.1)
    record.notes.append("dev up never started its Temporal child again")
