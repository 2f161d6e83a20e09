"""A full disk is an outage, not a bug (issue 37, found by the fault suite's ``disk`` kind): a
Command the store cannot commit is answered 503 ``store_unavailable`` with ``Retry-After`` —
which a client retries until the store is back — never 500 ``internal_error``, on which an
owner gave up its final report and the WorkItem ran again under a new key."""

from __future__ import annotations

import contextlib
import sqlite3
import warnings
from pathlib import Path

import httpx

from missionweave.authority import AuthorityConfig, now_ms
from missionweave.authority.core import credit_on_start
from missionweave.authority.core._outages import store_failed
from tests.support.disks import fill, small_disk
from tests.support.serving import LiveServer, mission_cmd
from tests.support.world import make_world


async def test_a_command_on_a_full_disk_is_503_store_unavailable__MW_11_5_c(
    tmp_path: Path,
) -> None:
    """A real server over SQLite on an 8 MiB tmpfs with no disk reserve, filled to the last
    byte: ``mission.create`` answers 503 ``store_unavailable``; once space is back the same
    Command (same id) is accepted. Where no tmpfs can be mounted (not root) the disk cannot be
    filled safely: the test then says so in a warning and checks only the accepted Command."""
    with small_disk(tmp_path / "disk", 8) as (disk, kind):
        w = make_world(disk / "a.db", config=AuthorityConfig(disk_reserve_bytes=0))
        w.clock.now = now_ms()
        server = LiveServer(w.authority, poll_interval_s=0.05)
        await server.start()
        try:
            cmd = mission_cmd(w, "m-full").model_dump(mode="json")
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                with contextlib.ExitStack() as full:
                    if kind == "tmpfs":
                        full.callback(fill(disk).unlink)
                        r = await http.post("/v1/commands", json=cmd)
                        assert r.status_code == 503, r.text
                        assert r.json()["code"] == "store_unavailable", r.text
                        assert "retry-after" in r.headers
                    else:
                        warnings.warn("no tmpfs (not root): the full disk is not tried",
                                      stacklevel=1)  # fmt: skip
                r = await http.post("/v1/commands", json=cmd)
                assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        finally:
            await server.stop()
            w.authority.close()


def test_a_store_failure_is_credited_from_the_failed_transactions_start__MW_11_5_c(
    tmp_path: Path,
) -> None:
    """A write that waited for the store and then failed opens the incident at the moment it
    began, not when it gave up (a 2 s wait for a PostgreSQL connection left 2 s leases that
    lapsed meanwhile uncredited — the fault suite's ``store`` kind)."""
    w = make_world(tmp_path / "a.db")
    credit_on_start(w.authority)  # serving: the stall watch is on
    began = w.clock.now
    w.clock.advance(2_000)  # the wait for the store
    store_failed(w.authority, sqlite3.OperationalError("disk I/O error"), began)
    assert w.authority.stall_watch.failing_since_ms == began
