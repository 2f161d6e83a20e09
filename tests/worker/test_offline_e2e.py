"""An Authority outage costs nothing done twice (spec 11.5, MW-11.5-c/e/i), on the real dev
server with a real Authority process, real agents and real Missions.

* ``kill -9`` of the Authority mid-run, restarted on the same database and port: the agent's
  work goes on offline, its progress is buffered and reconciled, its final reports go through
  under the original ownership epoch (the Authority credits its own downtime to the leases it
  held), and every WorkItem's external effect happens once.
* A loopback proxy that drops every connection between the agent and the Authority: the same.
* An agent process killed while cut off reconciles its durable buffer when it starts again,
  and the WorkItem resumes from the checkpoint it had buffered.

The outage lengths and the time from the Authority's return to the Mission's completion are
printed (``-s``), never asserted. ``MW_TEST_OUTAGE_S`` sets the outage of the first two tests
(default 7 s and 5 s, with a 10 s lease) to measure others.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from missionweave.authority import verify_log
from missionweave.protocol import RESOURCE_USAGE_RECORDED, Event
from tests.support.loopback_proxy import DroppingProxy
from tests.support.mission_harness import MissionStack, contract, mission_stack, stop_process
from tests.support.offline_handlers import (
    CAPABILITY,
    LEDGER_ENV,
    TIMEOUTS,
    read_ledger,
    registry,
)
from tests.support.waits import until

#: The lease of the measurement on main that re-ran finished work (issue 12).
ITEMS = 4


def _items(steps: int = 6, step_ms: int = 500) -> list[dict[str, Any]]:
    c = contract([CAPABILITY], timeouts=TIMEOUTS).wire()
    return [
        {"work_item_id": f"i{n}", "contract": c, "input": {"steps": steps, "step_ms": step_ms}}
        for n in range(ITEMS)
    ]


def _log(ms: MissionStack) -> list[Event]:
    return list(ms.stack.authority.events(ms.group))


def _count(ms: MissionStack, type: str) -> int:
    return sum(e.type == type for e in _log(ms))


def _once_each(ledger: Path) -> list[dict[str, Any]]:
    """The ledger, asserting one effect per WorkItem, each under ownership epoch 1."""
    lines = read_ledger(ledger)
    assert Counter(x["work_item_id"] for x in lines) == {f"i{n}": 1 for n in range(ITEMS)}
    assert {x["ownership_epoch"] for x in lines} == {1}
    return lines


def _assert_completed_once(ms: MissionStack, result: Any) -> list[Event]:
    """Mission completed, each item verified at epoch 1, nothing late or re-offered; the
    whole log verifies (``events verify``)."""
    log = _log(ms)
    verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
    assert result.status == "completed"
    assert sorted((i.work_item_id, i.state.value, i.ownership_epoch) for i in result.items) == [
        (f"i{n}", "verified", 1) for n in range(ITEMS)
    ]
    types = Counter(e.type for e in log)
    assert types["work.late_result_recorded"] == 0
    assert types["work.offered"] == ITEMS and types["work.submitted"] == ITEMS
    return log


async def _completed_after(
    ms: MissionStack, handle: WorkflowHandle[Any, Any], restore: Callable[[], object]
) -> tuple[list[Event], float]:
    """``restore`` the Authority (or the way to it), then wait (90 s at most) for the Mission
    to complete once: its log (:func:`_assert_completed_once`) and the seconds it took."""
    loop = asyncio.get_running_loop()
    back = loop.time()
    if inspect.isawaitable(restoring := restore()):
        await restoring
    result = await asyncio.wait_for(handle.result(), 90)
    took = loop.time() - back
    return _assert_completed_once(ms, result), took


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the handlers record each external effect (:data:`LEDGER_ENV`, set here for the
    agents this process runs)."""
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(LEDGER_ENV, str(path))
    return path


def _outage_s(default: float) -> float:
    """The outage to measure, seconds: ``MW_TEST_OUTAGE_S``, else ``default``."""
    return float(os.environ.get("MW_TEST_OUTAGE_S", default))


def _reconciliations(log: list[Event]) -> list[Event]:
    return [e for e in log if e.type == RESOURCE_USAGE_RECORDED]


async def test_mw_11_5_c_authority_killed_mid_run_no_effect_twice(
    dev_env: WorkflowEnvironment, tmp_path: Path, ledger: Path
) -> None:
    outage_s = _outage_s(7.0)
    async with mission_stack(dev_env, tmp_path, authority_process=True) as ms:
        await ms.agent("ada", registry(), capabilities=[CAPABILITY], max_concurrency=ITEMS)
        handle = await ms.start(ms.spec("killed", _items()))
        await until(
            "every item at work",
            lambda: _count(ms, "work.progress_reported") >= ITEMS,
        )
        await ms.stack.server.kill()  # type: ignore[union-attr]
        await asyncio.sleep(outage_s)
        assert read_ledger(ledger) == []  # no irreversible effect without a confirmed lease
        log, took = await _completed_after(ms, handle, ms.stack.server.start)
    _once_each(ledger)
    charges = _reconciliations(log)
    assert charges, "progress buffered during the outage was reconciled"
    for e in charges:
        assert e.body["historical_session"]["agent_id"] == "ada"
        assert e.body["reconciling_session"]["agent_id"] == "ada"
        assert e.body["delta"]["tokens"] > 0
    print(
        f"\nkill -9 outage {outage_s:.1f} s, lease {TIMEOUTS['lease_ms']} ms: effects per item 1,"
        f" {len(charges)} reconciled report(s); Authority back -> Mission completed in "
        f"{took:.2f} s"
    )


async def test_connections_dropped_by_a_proxy_no_effect_twice__MW_11_5_e(
    dev_env: WorkflowEnvironment, tmp_path: Path, ledger: Path
) -> None:
    cut_s = _outage_s(5.0)
    async with mission_stack(dev_env, tmp_path, authority_process=True) as ms:
        proxy = DroppingProxy(ms.stack.server.port)
        await proxy.start()
        try:
            await ms.agent(
                "ada",
                registry(),
                capabilities=[CAPABILITY],
                max_concurrency=ITEMS,
                authority_url=proxy.url,
            )
            handle = await ms.start(ms.spec("cut", _items()))
            working = "work.progress_reported"
            await until("every item at work", lambda: _count(ms, working) >= ITEMS)
            proxy.cut()
            await asyncio.sleep(cut_s)
            assert read_ledger(ledger) == []
            log, took = await _completed_after(ms, handle, proxy.restore)
        finally:
            await proxy.stop()
    _once_each(ledger)
    charges = _reconciliations(log)
    assert charges and proxy.drops > 0
    print(
        f"\nproxy cut {cut_s:.1f} s ({proxy.drops} connections refused): effects per item 1, "
        f"{len(charges)} reconciled report(s); restored -> Mission completed in {took:.2f} s"
    )


async def test_agent_restarted_while_offline_reconciles_its_buffer__MW_11_5_e(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """ada (a ``missionweave worker`` process) is cut off, buffers checkpoints, and is killed
    (-9). Started again once the network is back, it opens a new session and reconciles its
    durable buffer first: the log names the old session as historical and the new one as
    reconciling, and the WorkItem resumes from the buffered checkpoint — its one effect under
    ownership epoch 1."""
    ledger = tmp_path / "ledger.jsonl"
    # a lease long enough for the new process to start before Temporal times the dead one's
    # activity out (the workflow then finds the WorkItem queued at ada, not expired)
    c = contract([CAPABILITY], timeouts={**TIMEOUTS, "lease_ms": 25_000}).wire()
    item = {"work_item_id": "i0", "contract": c, "input": {"steps": 12, "step_ms": 500}}
    async with mission_stack(dev_env, tmp_path, authority_process=True) as ms:
        await ms.process_member("ada", [CAPABILITY])
        proxy = DroppingProxy(ms.stack.server.port)
        await proxy.start()

        async def worker(n: int) -> asyncio.subprocess.Process:
            return await ms.agent_process(
                "ada",
                "tests.support.offline_handlers",
                authority_url=proxy.url,
                env={LEDGER_ENV: str(ledger)},
                log=f"ada-{n}",
            )

        procs = [await worker(1)]
        try:
            presence = ms.stack.client.presence
            present = await until("ada's Presence", lambda: presence(ms.group))
            assert "ada" in present
            handle = await ms.start(ms.spec("restarted", [item]))
            await until("ada at work", lambda: _count(ms, "work.progress_reported") >= 1)
            proxy.cut()
            buffer = tmp_path / "agents" / "ada.offline.sqlite3"
            await until("checkpoints buffered", lambda: _buffered(buffer) >= 2)
            os.kill(procs[0].pid, signal.SIGKILL)
            await procs[0].wait()
            held = _buffered_ids(buffer)
            proxy.restore()
            procs.append(await worker(2))
            await until("the buffer reconciled", lambda: _buffered(buffer) == 0)
            result = await asyncio.wait_for(handle.result(), 90)
            log = _log(ms)
            verify_log(ms.stack.authority.store, ms.group, ms.stack.authority.public_key)
        finally:
            await proxy.stop()
            for p in procs:
                await stop_process(p)
    assert result.status == "completed"
    (i0,) = result.items
    assert (i0.state.value, i0.ownership_epoch) == ("verified", 1)
    # Each buffered Command is applied once: reconciled under the binding, or — when the cut
    # fell while it was in flight — applied as sent, its buffered copy then answered
    # ``idempotency_conflict`` and dropped (MW-11.5-e).
    progress = {e.command_id: e for e in log if e.type == "work.progress_reported"}
    assert held and held <= progress.keys()
    assert len(progress) == sum(e.type == "work.progress_reported" for e in log)
    reconciled_ids = {c for c in held if "reconciled" in progress[c].body}
    assert reconciled_ids, "at least one buffered checkpoint went through reconciliation"
    charges = _reconciliations(log)
    assert {e.command_id for e in charges} == reconciled_ids
    sessions = {
        (
            e.body["historical_session"]["session_epoch"],
            e.body["reconciling_session"]["session_epoch"],
        )
        for e in charges
    }
    ((historical, reconciling),) = sessions
    assert reconciling == historical + 1
    reconciled = [e for e in log if e.type == "work.progress_reported" and "reconciled" in e.body]
    last_buffered = max(e.body["checkpoint"]["step"] for e in reconciled)
    (line,) = read_ledger(ledger)
    assert line["resumed_from"] >= last_buffered  # resumed from the buffered checkpoint
    assert (line["work_item_id"], line["ownership_epoch"]) == ("i0", 1)


def _buffered_ids(path: Path) -> set[str]:
    """The command ids in an agent's offline buffer file."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT command_id FROM buffered")}
    finally:
        conn.close()


def _buffered(path: Path) -> int:
    """Commands in an agent's offline buffer file (0 when there is none)."""
    if not path.exists():
        return 0
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM buffered").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()
