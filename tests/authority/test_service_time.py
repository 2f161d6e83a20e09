"""A lease is charged only for time the Authority could serve its owner (issue 37, item 1;
MW-11.5-c), and a dead owner's WorkItem is still re-offered (MW-11.5-a).

Through the Authority's real paths: its clock seam (a :class:`LeaseClock` over a wall clock
and an elapsed clock the test moves, so a step is a step of the wall clock only), its serving
hooks (``credit_on_start``, the alive mark of ``keep_alive``) and, for the full disk, a real
server over SQLite on an 8 MiB tmpfs filled to the last byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from missionweave.authority import Authority, AuthorityConfig, verify_log
from missionweave.authority.client import AuthorityClient
from missionweave.authority.core import LeaseClock
from missionweave.authority.core._credit import GRACE_LEASES, MAX_CREDIT_MS, credit_outage
from missionweave.authority.core._lease_clock import BEHIND_RATE
from missionweave.authority.core._outages import _mark, credit_on_start, note_queued
from missionweave.protocol import MAX_SAFE_INT
from tests.support.disks import fill, small_disk
from tests.support.pg import raw
from tests.support.serving import LiveServer
from tests.support.world import T0, World, make_world

LEASE_MS = 30_000
SLOW = {"start_deadline_ms": 600_000, "lease_ms": LEASE_MS, "heartbeat_ms": 10_000}
SHORT = {"start_deadline_ms": 60_000, "lease_ms": 3_000, "heartbeat_ms": 500}


class SteppedClock(LeaseClock):
    """Lease time over a wall clock and an elapsed clock that move only when told:
    :meth:`advance` moves both (time passes), :meth:`step` the wall clock alone (an operator or
    NTP stepped it). ``now`` reads lease time, as :class:`tests.support.world.Clock` does."""

    def __init__(self, start_ms: int = T0) -> None:
        self.wall_ms = start_ms
        self.elapsed_s = 1_000.0
        super().__init__(wall=lambda: self.wall_ms, monotonic=lambda: self.elapsed_s)

    @property
    def now(self) -> int:
        return self()

    def advance(self, ms: int) -> None:
        self.wall_ms += ms
        self.elapsed_s += ms / 1000

    def step(self, ms: int) -> None:
        self.wall_ms += ms


def serving_world(path: Path, timeouts: dict[str, int]) -> World:
    """A World on a :class:`SteppedClock` whose WorkItem ``a`` is leased to ``worker-0``, its
    Authority serving (``credit_on_start``: its stall watch is on)."""
    w = make_world(path, clock=SteppedClock())
    w.authorize("a", timeouts=timeouts)
    w.lease("a", w.workers[0])
    credit_on_start(w.authority)
    return w


def beat(w: World, ms: int) -> None:
    """Let ``ms`` pass on the serving Authority, with its alive mark every second (the beat
    ``keep_alive`` runs)."""
    for _ in range(ms // 1000):
        w.clock.advance(1000)
        _mark(w.authority)


def test_a_forward_step_of_the_wall_clock_expires_no_lease__MW_11_5_c(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The wall clock jumps 10 minutes ahead while an owner renews every few seconds: the
    jump is credited like a stall before the next Command is judged, so the renewal after it
    is accepted (on main: ``lease_expired``, then the WorkItem re-offered and done twice)."""
    w = serving_world(tmp_path / "a.db", SLOW)
    beat(w, 3_000)
    w.ok(w.workers[0], "lease.renew", w.leased("a"))
    beat(w, 2_000)
    caplog.set_level(logging.WARNING)
    w.clock.step(600_000)
    r = w.submit(w.workers[0], "lease.renew", w.leased("a"))
    assert r.accepted, r.rejection
    assert "clock_step" in caplog.text  # the operator sees the credit in the log
    row = w.authority.lease(w.leases["a"]["lease_id"])
    assert row is not None and row["valid"]
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_a_backward_step_cannot_stretch_a_dead_owners_lease__MW_11_5_a(tmp_path: Path) -> None:
    """The wall clock is set back an hour just after a 30 s lease was granted and its owner
    died: lease time does not go back, and the lease still expires within its term plus the
    grace in elapsed time (on main it lived 3,630 s), after which the WorkItem is offered to
    another agent."""
    w = serving_world(tmp_path / "a.db", SLOW)
    lease_id = w.leases["a"]["lease_id"]
    w.clock.step(-3_600_000)
    elapsed = 0
    while (row := w.authority.lease(lease_id)) is not None and row["valid"]:
        beat(w, 1_000)
        elapsed += 1_000
        assert elapsed <= LEASE_MS * (1 + GRACE_LEASES), "the lease outlived its term + grace"
    assert elapsed >= LEASE_MS  # and it was not cut short
    assert elapsed <= LEASE_MS / BEHIND_RATE + 1_000
    offer = w.offer("a", w.workers[1])
    w.accept(w.workers[1], "a", offer)
    assert w.item("a")["owner"] == w.workers[1].agent_id
    verify_log(w.authority.store, w.group, w.authority.public_key)


def test_a_clock_set_back_across_a_restart_does_not_set_lease_time_back__MW_11_5_a(
    tmp_path: Path,
) -> None:
    """The Authority restarts with its wall clock an hour behind: the last lease time it
    recorded (its alive mark) is the floor, so the dead owner's lease still expires within its
    term plus the grace in elapsed time."""
    w = serving_world(tmp_path / "a.db", SLOW)
    lease_id = w.leases["a"]["lease_id"]
    beat(w, 2_000)
    db, key, config = w.authority.db_path, w.authority.key, w.authority.config
    w.authority.close()
    clock = SteppedClock(start_ms=w.clock.wall_ms - 3_600_000)
    w.authority, w.clock = Authority(db, key, config, clock=clock), clock
    credit_on_start(w.authority)
    assert w.clock.now >= T0  # not an hour back
    elapsed = 0
    while (row := w.authority.lease(lease_id)) is not None and row["valid"]:
        beat(w, 1_000)
        elapsed += 1_000
        assert elapsed <= LEASE_MS * (1 + GRACE_LEASES), "the lease outlived its term + grace"
    w.authority.close()


def test_issued_at_far_from_the_authoritys_clock_is_clock_skew_but_a_repeat_is_answered__MW_11_3_c(
    tmp_path: Path,
) -> None:
    """``issued_at_ms`` is the actor's claim: 0 and 2**53 - 1 are refused ``clock_skew``,
    writing nothing. A Command id already used is looked up first: the same Command sent again
    long after (its time now far outside the bound) is answered by its id."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", timeouts=SLOW)
    w.lease("a", w.workers[0])
    worker = w.workers[0]
    for issued in (0, MAX_SAFE_INT):
        head = w.authority.head(w.group)
        cmd = worker.command("lease.renew", w.group, w.leased("a"), issued_at_ms=issued)
        r = w.authority.submit(cmd)
        assert r.rejection is not None and r.rejection.code == "clock_skew", r.rejection
        assert r.rejection.detail["issued_at_ms"] == issued
        assert w.authority.head(w.group) == head
    first = worker.command("lease.renew", w.group, w.leased("a"), issued_at_ms=w.clock.now)
    assert w.authority.submit(first).accepted
    w.clock.advance(2 * 366 * 86_400_000)  # the retry arrives two years later
    again = w.authority.submit(first)
    assert again.accepted and again.duplicate, again.rejection
    late = w.coordinator.command("mission.create", w.group, {"mission_id": "m2", "title": "t"},
                          issued_at_ms=first.issued_at_ms)  # fmt: skip
    r = w.authority.submit(late)
    assert r.rejection is not None and r.rejection.code == "clock_skew"


def test_a_flapping_store_does_not_hold_a_dead_owners_work_forever__MW_11_5_a(
    tmp_path: Path,
) -> None:
    """The store fails for 4 s out of every 5 (the writer's transactions raise ``database or
    disk is full``) for 20 minutes: every recovery is credited, yet the dead owner's lease
    ends within the documented bound — ``MAX_CREDIT_MS + (1 + GRACE_LEASES) × lease_ms``
    after it was last heard — while a live owner renewing between the failures keeps its
    lease throughout."""
    w = make_world(tmp_path / "a.db", clock=SteppedClock())
    w.authorize("a", timeouts=SLOW)
    w.authorize("b", timeouts=SLOW)
    w.lease("a", w.workers[0])  # its owner dies now
    w.lease("b", w.workers[1])  # its owner keeps renewing
    credit_on_start(w.authority)
    heard = w.clock.now
    bound = MAX_CREDIT_MS + (1 + GRACE_LEASES) * LEASE_MS
    dead = w.leases["a"]["lease_id"]
    elapsed = 0
    with _failing_store(w) as failing:
        while (row := w.authority.lease(dead)) is not None and row["valid"]:
            failing(True)
            for _ in range(4):  # the alive marks fail
                w.clock.advance(1_000)
                with contextlib.suppress(Exception):
                    _mark(w.authority)
            watch = w.authority.stall_watch
            assert watch is not None and watch.failing_since_ms is not None  # for /readyz
            failing(False)
            w.clock.advance(1_000)
            _mark(w.authority)  # the first commit credits the failure
            assert watch.failing_since_ms is None
            r = w.submit(w.workers[1], "lease.renew", w.leased("b"))
            assert r.accepted, r.rejection
            elapsed += 5_000
            assert w.clock.now - heard <= bound + 5_000, "a flapping store held the work"
    assert elapsed >= 4 * LEASE_MS  # the credits did hold it past its plain term
    offer = w.offer("a", w.workers[1])
    w.accept(w.workers[1], "a", offer)


@contextlib.contextmanager
def _failing_store(w: World) -> Iterator[Callable[[bool], None]]:
    """``failing(on)``: while on, every write transaction of ``w``'s Authority fails as
    SQLite does on a full disk (a stand-in for the tmpfs of the test below, to run 20
    minutes of lease time in a moment)."""
    import sqlite3

    store = w.authority.store
    begin = store.begin
    state = {"on": False}

    def failing_begin(*, durable: bool = True) -> None:
        if state["on"]:
            raise sqlite3.OperationalError("database or disk is full")
        begin(durable=durable)

    store.begin = failing_begin  # type: ignore[method-assign]
    try:
        yield lambda on: state.__setitem__("on", on)
    finally:
        store.begin = begin  # type: ignore[method-assign]


# ----------------------------------------------------------------------- a real full disk


class WallLeaseClock(LeaseClock):
    """The production lease clock, with the ``now`` a World reads."""

    @property
    def now(self) -> int:
        return self()

    def advance(self, ms: int) -> None:
        raise AssertionError("real time only moves by itself")


async def test_an_owner_renewing_through_a_full_disk_keeps_its_lease__MW_11_5_c(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real server over SQLite on an 8 MiB tmpfs; the owner of a 3 s lease renews every
    0.8 s. The disk fills for 5 s: the renewals fail (the store cannot commit). When space
    comes back, the first commit credits the failure to live leases, and the owner's next
    renewal is accepted — on main it was ``lease_expired`` from about 3.2 s on, also after
    space came back. Where no tmpfs can be mounted (not root), the store's write transactions
    fail as SQLite's do on a full disk instead (``_failing_store``), and a warning says so."""
    with small_disk(tmp_path / "disk", 8) as (disk, kind):
        mounted = kind == "tmpfs"
        if not mounted:
            warnings.warn("no tmpfs (not root): a failing store stands in for the full disk",
                          stacklevel=1)  # fmt: skip
        # no disk reserve: SQLite itself meets the full disk (the reserve: test_command_bounds)
        no_reserve = AuthorityConfig(disk_reserve_bytes=0)
        w = make_world(disk / "a.db", config=no_reserve, clock=WallLeaseClock())
        w.authorize("a", timeouts=SHORT)
        worker = w.workers[0]
        server = LiveServer(w.authority, poll_interval_s=0.05)
        await server.start()
        try:
            w.lease("a", worker)  # once serving: the server's start takes no time of the lease
            async with AuthorityClient(server.url, signing_key=worker.key) as client:

                async def renew() -> object:
                    cmd = worker.command("lease.renew", w.group, w.leased("a"))
                    try:
                        return await client.submit(cmd)
                    except Exception as exc:  # the server's 500 while the disk is full
                        return exc

                r = await renew()
                assert getattr(r, "accepted", False), r
                caplog.set_level(logging.WARNING)
                with contextlib.ExitStack() as full:
                    if mounted:
                        full.callback(fill(disk).unlink)
                    else:
                        full.enter_context(_failing_store(w))(True)
                    failures = 0
                    end = time.monotonic() + 5.0
                    while time.monotonic() < end:
                        r = await renew()
                        failures += not getattr(r, "accepted", False)
                        code = getattr(getattr(r, "rejection", None), "code", None)
                        assert code != "lease_expired", r
                        await asyncio.sleep(0.8)
                    assert failures >= 3, "the full disk did not stop the renewals"
                r = await renew()  # space is back
            assert getattr(r, "accepted", False), r
            # the operator sees the incident open and close in the log
            assert "the store could not commit" in caplog.text
            assert "the store commits again" in caplog.text
            row = w.authority.lease(w.leases["a"]["lease_id"])
            assert row is not None and row["valid"]
        finally:
            await server.stop()
            w.authority.close()


# ----------------------------------------------------------------------- over PostgreSQL


@pytest.mark.parametrize("store_backend", ["postgres"], indirect=True)
def test_over_postgresql_lease_time_is_the_databases_clock__MW_11_5_c(
    tmp_path: Path, store_backend: str
) -> None:
    """Two replicas over one PostgreSQL database, one's wall clock an hour fast and the
    other's an hour slow: both judge leases on the database's clock — a lease granted through
    the fast one expires one term after the database's ``now()``, and the slow one sees it
    live — and a step of a replica's own wall clock changes nothing."""
    fast = SteppedClock(start_ms=time.time_ns() // 1_000_000)  # the Group is created on it
    w = make_world(tmp_path / "a.db", clock=fast)
    assert isinstance(w.db, str) and w.db.startswith("postgres")
    db_now = raw(w.db, "SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)")
    fast.wall_ms = db_now[0][0] + 3_600_000
    w.authorize("a", timeouts=SLOW)
    lease = w.lease("a", w.workers[0])
    (after,) = raw(w.db, "SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)")
    # granted on the database's clock: one term from its now, not from the fast wall clock
    assert db_now[0][0] + LEASE_MS <= lease["expires_at_ms"] <= after[0] + LEASE_MS
    slow = SteppedClock(start_ms=db_now[0][0] - 3_600_000)
    replica = Authority(w.db, w.authority.key, w.authority.config, clock=slow)
    try:
        r = replica.submit(w.workers[0].command("lease.renew", w.group, w.leased("a"),
                                                issued_at_ms=after[0]))  # fmt: skip
        assert r.accepted, r.rejection  # not judged an hour early or an hour late
        slow.step(-3_600_000)  # this replica's wall clock moves: its lease time does not
        r = replica.submit(w.workers[0].command("lease.renew", w.group, w.leased("a"),
                                                issued_at_ms=after[0]))  # fmt: skip
        assert r.accepted, r.rejection
        assert abs(replica.clock() - after[0]) < 60_000
    finally:
        replica.close()
        w.authority.close()


@pytest.mark.parametrize("store_backend", ["sqlite", "postgres"], indirect=True)
def test_an_incident_is_credited_once_whichever_replica_reports_it__MW_11_5_c(
    tmp_path: Path, store_backend: str
) -> None:
    """Two replicas (two Authorities on one database) both saw the store fail for 5 s and both
    credit it on recovery: the store's record of the last credited incident makes the second
    credit only what the first did not cover, so no lease gets the outage twice."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", timeouts=SLOW)
    lease = w.lease("a", w.workers[0])
    other = Authority(w.db, w.authority.key, w.authority.config, clock=w.clock)
    try:
        w.clock.advance(5_000)
        with w.authority._write():
            assert credit_outage(w.authority.store, 5_000, w.clock.now) == 1
        with other._write():
            assert credit_outage(other.store, 5_000, w.clock.now) == 0  # already credited
        w.clock.advance(1_000)
        with other._write():  # a later incident overlapping it: only its new second
            assert credit_outage(other.store, 3_000, w.clock.now) == 1
        row = w.authority.lease(lease["lease_id"])
        assert row is not None
        # credited twice it would be 4 s later (5 s, then the 3 s in full)
        assert row["expires_at_ms"] == max(lease["expires_at_ms"] + 6_000,
                                           w.clock.now + GRACE_LEASES * LEASE_MS)  # fmt: skip
    finally:
        other.close()


def test_a_replica_that_saw_the_store_fail_first_credits_the_leases_that_lapsed_first__MW_11_5_c(
    tmp_path: Path, store_backend: str
) -> None:
    """Replica B saw the store fail late (its first request came late) and credits first; a
    lease that lapsed before B's incident began is not B's to credit. Replica A saw the store
    fail early and credits the same outage after B: the ledger trims the gap A adds, but A
    still credits every lease live when *its* incident began, so the lease that lapsed
    meanwhile gets the grace (the fault suite's store kind: such leases were never credited,
    and their WorkItems ran again)."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", timeouts=SHORT)
    lease = w.lease("a", w.workers[0])
    expires = lease["expires_at_ms"]
    b = Authority(w.db, w.authority.key, w.authority.config, clock=w.clock)
    try:
        w.clock.now = expires + 3_000  # the lease lapsed 3 s ago, mid-outage
        with b._write():  # B: an incident of 2 s, begun after the lapse — nothing of its own
            assert credit_outage(b.store, 2_000, w.clock.now) == 0
        w.clock.advance(500)
        with w.authority._write():  # A: the same outage, seen from 1 s before the lapse
            assert credit_outage(w.authority.store, 4_500, w.clock.now) == 1
        row = w.authority.lease(lease["lease_id"])
        assert (
            row is not None
            and row["expires_at_ms"] >= w.clock.now + GRACE_LEASES * SHORT["lease_ms"]
        )
    finally:
        b.close()


def test_a_renewal_that_waited_in_the_writers_queue_is_not_judged_late__MW_11_5_c(
    tmp_path: Path,
) -> None:
    """The owner's renewal waited 5 s in the writer's queue behind other work and its lease
    lapsed meanwhile on the Authority's clock: the wait is credited before the renewal is
    judged (``note_queued``, which the HTTP front's writer calls), so it is accepted; a wait
    under the bound credits nothing."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", timeouts=SHORT)
    lease = w.lease("a", w.workers[0])
    credit_on_start(w.authority)
    note_queued(w.authority, 500)  # an ordinary wait
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2", "title": "t"})
    row = w.authority.lease(lease["lease_id"])
    assert row is not None and row["expires_at_ms"] == lease["expires_at_ms"]
    w.clock.advance(5_000)  # the renewal sat in the queue while the lease ran out
    note_queued(w.authority, 5_000)
    r = w.submit(w.workers[0], "lease.renew", w.leased("a"))
    assert r.accepted, r.rejection
