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
  load process (:mod:`tests.faults.loads`) for :data:`LOAD_S` seconds against the Authority
  (the first replica), its summary kept in the trial's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from typing import TYPE_CHECKING

from .cluster import GROUP, VISITOR, Cluster
from .parts import Part

if TYPE_CHECKING:
    from .nemesis import Plan, Record

#: Seconds a load runs.
LOAD_S = 12.0
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
        await _load(plan, cluster, record)


async def _load(plan: Plan, cluster: Cluster, record: Record) -> None:
    """Run the kind's load process to its end; its summary goes to ``record.measured``."""
    name = f"load-{plan.kind}-{cluster.missions}"
    out = cluster.run_dir / f"{name}.json"
    cmd = [
        sys.executable,
        *("-m", "tests.faults.loads", *LOAD_ARGS[plan.kind]),
        *("--url", cluster.authority_url(), "--group", GROUP, "--seconds", str(plan.hold_s)),
        *("--key", str(cluster.files.key(VISITOR)), "--agent", VISITOR),
        *("--mission", cluster.mission_id, "--out", str(out)),
    ]
    part = cluster.loads[name] = Part(name, cmd, cluster.run_dir / "logs" / f"{name}.log")
    part.start()
    assert part.proc is not None
    with contextlib.suppress(subprocess.TimeoutExpired):
        await asyncio.to_thread(part.proc.wait, plan.hold_s + 60)
    if part.alive():
        record.notes.append(f"{name} did not end: {part.tail(3)}")
        await asyncio.to_thread(part.stop)
        return
    try:
        got = json.loads(out.read_text())
    except (OSError, ValueError):
        record.notes.append(f"{name} exited {part.proc and part.proc.returncode}: {part.tail(5)}")
        return
    got.pop("kind", None)
    record.measured.append(", ".join(f"{k} {v}" for k, v in sorted(got.items())))
