"""The checker: what one trial lost or did twice, read from the Group log, the effect ledger
and the process table once every part has stopped.

* the Mission completed within the bound (else: stuck, or failed);
* every WorkItem verified exactly once (``work.result_accepted`` once per WorkItem);
* the same key repeated: idempotency keys with more than one ledger line — counted, not a
  failure (an external system deduplicates them; an owner that restarts within its lease
  performs its effect again under the same key);
* re-runs: WorkItems started under more than one ownership epoch, counted apart; expected only
  when the owner itself was faulted (a worker), never after an outage of another part;
* **real duplicates**: WorkItems whose effect was performed under two keys or more (done
  twice, externally) — must be 0 after a fault of any part that is not the WorkItem's owner
  (Authority, Temporal, coordinator, the dev stack);
* late results recorded (``work.late_result_recorded``, MW-11.5-b);
* ``missionweave events verify`` passes (hash chain and every signature);
* no process of the run outlives it.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import Cluster
from .parts import MW, ROOT, processes_mentioning


@dataclass
class Verdict:
    """The checker's findings for one trial."""

    status: str  # completed / failed / stuck / …
    items: int
    verified_once: int
    verified_twice: int
    effects_twice_same_key: int
    rerun_items: int
    rerun_expected: bool
    effects_items_twice: int
    late_results: int
    chain_ok: bool
    leftovers: list[str]
    notes: list[str] = field(default_factory=list)
    #: ``False``: the deployment could not be read, nothing above was measured.
    checked: bool = True

    @classmethod
    def broken(cls, status: str, items: int, owner_faulted: bool, why: str) -> Verdict:
        """The verdict of a trial whose deployment could not be read (nothing holds)."""
        return cls(status, items, 0, 0, 0, 0, owner_faulted, 0, 0, False, [], [why], False)

    @property
    def unexpected_reruns(self) -> int:
        return 0 if self.rerun_expected else self.rerun_items

    def failures(self) -> list[str]:
        """Every property that does not hold, one phrase each ([] when the trial passed)."""
        out = []
        if self.status != "completed":
            out.append(f"mission {self.status}")
        if self.verified_once != self.items:
            out.append(f"{self.items - self.verified_once} item(s) not verified exactly once")
        if self.effects_items_twice and not self.rerun_expected:
            out.append(f"{self.effects_items_twice} item(s) with effects under 2+ keys")
        if self.unexpected_reruns:
            out.append(f"{self.unexpected_reruns} item(s) re-run after an outage")
        if not self.checked:
            out.append("not checked")
        elif not self.chain_ok:
            out.append("events verify failed")
        if self.leftovers:
            out.append(f"{len(self.leftovers)} process(es) left")
        return out


async def check(cluster: Cluster, status: str, owner_faulted: bool) -> Verdict:
    """Judge the current Mission of a running deployment (its processes are judged when it
    stops: :func:`leftovers`).

    Args:
        cluster: the deployment, every part running again.
        status: the Mission's final status (``stuck`` when it did not end within the bound).
        owner_faulted: the fault hit an agent, so re-runs under a new epoch are expected.
    """
    items = cluster.items
    events = [e for e in await cluster.events() if e.work_item_id in items]
    accepted = Counter(e.work_item_id for e in events if e.type == "work.result_accepted")
    epochs: dict[str, set[int]] = defaultdict(set)
    for e in events:
        if e.type == "work.started" and e.work_item_id is not None:
            epochs[e.work_item_id].add(int(e.body["lease"]["ownership_epoch"]))
    late = sum(1 for e in events if e.type == "work.late_result_recorded")
    lines = cluster.ledger_lines()
    per_key = Counter(ln[0] for ln in lines)
    keys_per_item: dict[str, set[str]] = defaultdict(set)
    for ln in lines:
        keys_per_item[ln[1]].add(ln[0])
    verify = await asyncio.to_thread(
        subprocess.run,
        [MW, "events", "verify", "--db", str(cluster.authority_db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    notes = [] if verify.returncode == 0 else [verify.stdout + verify.stderr]
    return Verdict(
        status=status,
        items=len(items),
        verified_once=sum(1 for i in items if accepted[i] == 1),
        verified_twice=sum(1 for i in items if accepted[i] > 1),
        effects_twice_same_key=sum(1 for n in per_key.values() if n > 1),
        rerun_items=sum(1 for s in epochs.values() if len(s) > 1),
        rerun_expected=owner_faulted,
        effects_items_twice=sum(1 for k in keys_per_item.values() if len(k) > 1),
        late_results=late,
        chain_ok=verify.returncode == 0,
        leftovers=[],
        notes=notes,
    )


def leftovers(run_dir: Path) -> list[str]:
    """Processes of a stopped deployment still alive (their command lines name its directory)."""
    return processes_mentioning(str(run_dir))
