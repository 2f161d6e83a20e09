"""The incident kinds of the nemesis (issue 37): what an operator meets that is not a process
death — each applied at the trial's moment and undone as an operator would.

* ``store`` / ``kill`` — ``kill -9`` of PostgreSQL under two ``authority serve`` replicas,
  started again after a seeded pause of 2–8 s;
* ``disk`` / ``fill`` — the Authority's filesystem (a tmpfs of its own) filled to the last byte
  for longer than a lease (lease + 1.5 s), then freed;
* ``clock`` / ``step-ahead``, ``step-back`` — the Authority's wall clock stepped +10 min or
  −1 h (the test seam of :mod:`missionweave.cli._wall_seam`), held for longer than a lease,
  then set right again (a step the other way);
* ``read-storm`` / ``storm``, ``conn-flood`` / ``flood``, ``member-flood`` / ``flood`` — a
  load process (:mod:`tests.faults.loads`, at niceness :data:`LOAD_NICE`: the load stands for
  other machines) for :data:`LOAD_S` seconds against the Authority (the first replica), its
  summary kept in the trial's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from typing import TYPE_CHECKING

from .cluster import GROUP, VISITOR, Cluster, until
from .parts import Part

if TYPE_CHECKING:
    from .nemesis import Plan, Record

#: Seconds a load runs.
LOAD_S = 12.0
#: The niceness of a load process (see :func:`_load`).
LOAD_NICE = 10
#: The clock steps (ms).
STEPS_MS = {"step-ahead": 600_000, "step-back": -3_600_000}
#: What each load process is asked to do.
LOAD_ARGS = {
    "read-storm": ["read-storm", "--readers", "300", "--subs", "100"],
    "conn-flood": ["conn-flood", "--sockets", "4200"],
    "member-flood": ["member-flood", "--senders", "4"],
}


async def apply(plan: Plan, cluster: Cluster, record: Record) -> None:
    """Apply ``plan``'s incident now and undo it (see the module)."""
    s = cluster.surroundings
    if plan.kind == "store":
        assert s.pg is not None
        await asyncio.to_thread(s.pg.kill)
        await asyncio.sleep(plan.down_s)
        await asyncio.to_thread(s.pg.start)
    elif plan.kind == "disk":
        filler = await asyncio.to_thread(s.fill_disk)
        record.measured.append(f"disk full ({s.disk_kind}) {plan.hold_s:g} s")
        await asyncio.sleep(plan.hold_s)
        filler.unlink()
    elif plan.kind == "clock":
        s.set_offset_ms(STEPS_MS[plan.fault])
        await asyncio.sleep(plan.hold_s)
        s.set_offset_ms(0)
    else:
        await _finish_load(plan, cluster, record)


def _load_name(plan: Plan, mission: int) -> str:
    """The load process of ``plan`` for the deployment's ``mission``-th Mission."""
    return f"load-{plan.kind}-{mission}"


async def start_load(plan: Plan, cluster: Cluster, record: Record) -> None:
    """Before the trial's Mission starts: start the kind's load process and wait (up to 30 s)
    until it is under way, so that the whole Mission runs under it."""
    name = _load_name(plan, cluster.missions + 1)  # the Mission about to start
    ready = cluster.run_dir / f"{name}.ready"
    out = cluster.run_dir / f"{name}.json"
    # niced: in production the readers and flooders are other machines, whose CPU is not the
    # owners'; on a small shared machine a load at normal priority starves the agents
    # themselves (their handlers' 400 ms sleeps took 2 s) and measures that instead
    cmd = [
        *("nice", "-n", str(LOAD_NICE)),
        sys.executable,
        *("-m", "tests.faults.loads", *LOAD_ARGS[plan.kind]),
        *("--url", cluster.authority_url(), "--group", GROUP, "--seconds", str(plan.hold_s)),
        *("--key", str(cluster.files.key(VISITOR)), "--agent", VISITOR),
        *("--mission", f"faults-{cluster.missions + 1}", "--out", str(out), "--ready", str(ready)),
    ]
    part = cluster.loads[name] = Part(name, cmd, cluster.run_dir / "logs" / f"{name}.log")
    part.start()

    async def under_way() -> bool:
        return ready.exists()

    try:
        await until(under_way, f"{name} under way", 30, lambda: None if part.alive() else "exit")
    except Exception:  # the trial goes on; its line says why the load is missing
        record.notes.append(f"{name} never got under way: {part.tail(3)}")


async def _finish_load(plan: Plan, cluster: Cluster, record: Record) -> None:
    """Wait for the load process to end; its summary goes to ``record.measured``."""
    part = cluster.loads[_load_name(plan, cluster.missions)]
    out = cluster.run_dir / f"{part.name}.json"
    assert part.proc is not None
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(part.proc.wait, plan.hold_s + 60)
    if part.alive():
        record.notes.append(f"{part.name} did not end: {part.tail(3)}")
        await asyncio.to_thread(part.stop)
        return
    try:
        got = json.loads(out.read_text())
    except (OSError, ValueError):
        record.notes.append(f"{part.name} exited {part.proc.returncode}: {part.tail(5)}")
        return
    got.pop("kind", None)
    record.measured.append(", ".join(f"{k} {v}" for k, v in sorted(got.items())))
