"""The fault suite's seeded subset (issue 13): one trial per kind of part — worker, Authority,
Temporal server, coordinator, the dev stack's Temporal child — each a Mission of ledger
handlers run by separate processes while the nemesis kills, freezes or cuts that part (the
fault drawn from :data:`SEED`). The full suite is ``make faults`` (docs/faults.md).

Every trial must: complete its Mission within the bound, verify every WorkItem exactly once,
perform no effect twice under one idempotency key, keep a log that ``events verify`` passes,
and leave no process behind. Re-runs under a new ownership epoch are expected only when the
owner itself was faulted; after an Authority outage they still happen (owned by issue 12,
bounded offline execution), so for that kind they are counted, not asserted.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from .faults.cluster import Config
from .faults.nemesis import FAULTS, KINDS, Kind
from .faults.suite import KNOWN_ISSUE_12, trial_line
from .faults.trial import run_trial, trial_seed

#: The subset's seed: a failure names its trial seed; `python -m tests.faults` reruns it.
SEED = 13
#: A small Mission and a tight bound: five trials fit in about a minute and a half.
CFG = Config(items=8, bound_s=60)


@pytest.mark.parametrize("kind", KINDS)
def test_mw_11_5_a_b_mission_survives_a_fault_of_each_part(kind: Kind, tmp_path: Path) -> None:
    fault = random.Random(f"{SEED}:{kind}").choice(FAULTS)
    t = asyncio.run(run_trial(kind, fault, trial_seed(SEED, kind, fault, 1), CFG, tmp_path / "run"))
    v, line = t.verdict, trial_line(t)
    assert t.record.done, line  # the fault really happened
    assert v.status == "completed", line
    assert v.verified_once == v.items and v.verified_twice == 0, line
    assert v.effects_twice_same_key == 0, line
    assert v.chain_ok, line
    assert v.leftovers == [], line
    if kind == "worker" or kind in KNOWN_ISSUE_12:
        print(f"{kind}: {v.rerun_items} item(s) re-run under a new epoch")  # counted, not judged
    else:
        assert v.rerun_items == 0, line
