"""An outage of the Authority never costs an owner its lease (MW-11.5-c; docs/design.md §4,
"One judge for a lease"; docs/authority.md, "Operating").

A lease is judged by the renewals the Authority *could* have received. Time in which no
renewal could reach it is credited to every lease live when that time began
(:func:`._credit.credit_outage`: the gap, at least :data:`GRACE_LEASES` whole leases from now,
capped per incident and per lease so that a dead owner's WorkItem is still re-offered):

* **down** — the server records when it was last alive (:func:`mark_alive`, every second);
  when it starts again :func:`credit_downtime` credits the time since;
* **stalled** — a serving Authority that stood still (SIGSTOP, suspended, starved) heard no
  renewal either: :class:`StallWatch` credits a gap between its own alive marks and
  transactions;
* **cut off** — a serving Authority that heard no request *from anyone* for longer than
  :data:`QUIET_MS` could not have received the owners' renewals: :meth:`StallWatch.heard`
  notices the silence when the next request arrives, and the HTTP front credits it before
  that request is judged (:func:`credit_quiet`). Only leases whose owner renewed shortly
  before the silence began are credited (an owner dead before it is not revived);
* **store failing** — a write transaction failed because the store did (disk full, an I/O
  error, the PostgreSQL connection lost): from the first such failure until the next commit
  nothing could be committed, and the first transaction that commits credits that interval
  (:func:`store_failed`, :func:`store_committed`);
* **queued** — a Command waited in the writer's queue longer than :data:`QUEUE_MS`
  (:func:`note_queued`);
* **clock step** — the wall clock stepped forward (:class:`._lease_clock.LeaseClock`): the
  step is credited like a stall.

Each is credited before the next Command is judged (:func:`start_judging`, at the start of
every write transaction). Stalls and silences are watched on a single-process store only
(SQLite): one quiet replica of several over PostgreSQL is not the Authority being away; store
failures, queue waits and clock steps on both, and over PostgreSQL on the database's clock.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

from ._credit import GRACE_LEASES, MAX_CREDIT_MS, credit_outage
from ._lease_clock import LeaseClock
from ._metrics import record_credit
from ._store import Store, StoreUnavailableError

log = logging.getLogger(__name__)

#: Seconds between two :func:`mark_alive` records of a serving Authority.
ALIVE_INTERVAL_S = 1.0
#: A gap this long (milliseconds, monotonic) between a serving Authority's alive marks or
#: transactions means the Authority itself stalled (frozen, suspended, starved), not its agents.
STALL_MS = 3_000
#: A silence this long (milliseconds, monotonic) in which no request arrived from anyone
#: means the Authority was cut off: owners that were renewing could not reach it.
QUIET_MS = 1_000
#: A Command that waited this long (milliseconds) in the writer's queue is credited as a stall.
QUEUE_MS = 1_000


def mark_alive(store: Store, now_ms: int) -> None:
    """Record that the Authority is serving at ``now_ms`` (the server calls it every second
    inside a write transaction)."""
    store.run("meta.set_alive_at", str(now_ms))


def credit_downtime(store: Store, now_ms: int) -> tuple[int, int]:
    """On start, inside a write transaction: credit the time since the Authority was last
    alive to every lease still live at that moment (:func:`credit_outage`), so that no owner
    loses its lease to the Authority's own outage (MW-11.5-c). Returns ``(downtime_ms,
    leases_extended)``; nothing happens on a first start or when no time passed."""
    row = store.one("meta.alive_at")
    alive = int(row[0]) if row is not None else None
    mark_alive(store, now_ms)
    if alive is None or now_ms <= alive:
        return 0, 0
    return now_ms - alive, credit_outage(store, now_ms - alive, now_ms)


def credit_on_start(authority: Any) -> tuple[int, int]:
    """:func:`credit_downtime` in its own write transaction of ``authority`` (an
    :class:`~missionweave.authority.Authority`); logs what it extended. The last lease time
    recorded is the floor of the Authority's :class:`LeaseClock` (a wall clock set back across
    the restart does not set lease time back). From then on the Authority's own stalls,
    silences, store failures, queue waits and clock steps are credited too
    (:class:`StallWatch`)."""
    clock = authority.clock
    with authority._write():
        _sync(authority)
        row = authority.store.one("meta.alive_at")
        if row is not None and isinstance(clock, LeaseClock):
            clock.floor(int(row[0]))
        downtime, n = credit_downtime(authority.store, clock())
    authority.stall_watch = StallWatch(
        monotonic=clock.monotonic if isinstance(clock, LeaseClock) else time.monotonic
    )
    record_credit("down", n, min(downtime, MAX_CREDIT_MS))
    if n:
        log.warning("the Authority was down %d ms: %d live lease(s) extended by that", downtime, n)
    return downtime, n


def credit_quiet(authority: Any, gap_ms: int) -> int:
    """Credit a silence of ``gap_ms`` that just ended (:meth:`StallWatch.heard`) to the leases
    whose owners were renewing when it began, in a write transaction of ``authority``; the
    leases extended. Call it before the request that ended the silence is judged.

    Raises:
        sqlite3.Error / psycopg.Error: the store could not commit the credit (noted as a store
            failure, :func:`store_failed`, whose credit covers the silence's end).
    """
    try:
        with authority._write(fsync=False):
            n = credit_outage(authority.store, gap_ms, authority.clock(), renewing_only=True)
    except Exception as exc:
        store_failed(authority, exc)
        raise
    record_credit("silent", n, gap_ms)
    if n:
        log.warning("the Authority heard from nobody for %d ms: %d live lease(s) extended",
                    gap_ms, n)  # fmt: skip
    return n


def start_judging(authority: Any) -> None:
    """At the start of each write transaction of ``authority``, before any lease is judged:
    over PostgreSQL, set its :class:`LeaseClock` to the database's clock; on a serving
    Authority, credit what :class:`StallWatch` saw since the last transaction (MW-11.5-c)."""
    _sync(authority)
    watch: StallWatch | None = authority.stall_watch
    if watch is not None:
        clock = authority.clock
        now = clock()  # first: this reading may be the one that sees a step
        steps = clock.take_steps() if isinstance(clock, LeaseClock) else 0
        watch.check(authority.store, now, steps)


def _sync(authority: Any) -> None:
    if isinstance(authority.clock, LeaseClock) and authority.store.backend == "postgres":
        row = authority.store.one("clock.now_ms")
        assert row is not None
        authority.clock.sync(int(row[0]))


def store_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the store could not commit (disk full, an I/O error, a lost or
    closed PostgreSQL connection), as opposed to a conflict or a bug."""
    if isinstance(exc, sqlite3.OperationalError | OSError | StoreUnavailableError):
        return True
    pg = sys.modules.get("psycopg")
    return pg is not None and isinstance(exc, pg.OperationalError | pg.InterfaceError)


def store_failed(authority: Any, exc: BaseException, began_ms: int | None = None) -> None:
    """A write transaction of ``authority`` that began at lease time ``began_ms`` (default:
    now) failed with ``exc``: if the store could not commit (:func:`store_unavailable`; not a
    retryable conflict), the time from ``began_ms`` until the next commit is credited
    (:meth:`StallWatch.failed`). From the transaction's start, not its failure: a transaction
    that waited 2 s for a PostgreSQL connection that never came failed 2 s into the outage,
    and leases of 2 s that lapsed meanwhile were not credited (the fault suite's ``store``
    kind, issue 37)."""
    watch: StallWatch | None = authority.stall_watch
    if watch is not None and store_unavailable(exc) and not authority.store.retryable(exc):
        watch.failed(authority.clock() if began_ms is None else began_ms, exc)


def store_committed(authority: Any) -> None:
    """A write transaction of ``authority`` committed: its credits stand
    (:meth:`StallWatch.committed`)."""
    watch: StallWatch | None = authority.stall_watch
    if watch is not None:
        watch.committed()


def note_queued(authority: Any, waited_ms: int) -> None:
    """The next transaction of ``authority`` holds a Command that waited ``waited_ms`` in the
    writer's queue: past :data:`QUEUE_MS` it is credited before that Command is judged."""
    watch: StallWatch | None = authority.stall_watch
    if watch is not None:
        watch.queued(waited_ms)


class StallWatch:
    """Credits a serving Authority's own stalls to live leases, as a restart credits its
    downtime (MW-11.5-c): a frozen (SIGSTOP), suspended or starved Authority heard no renewal
    either, so the time it stood still must not cost an owner its lease. It also measures the
    silences in which nobody's request arrived (:meth:`heard`), and keeps the incidents that
    end at the next commit: a failing store (:meth:`failed`), a long queue (:meth:`queued`)
    and forward clock steps (passed to :meth:`check`).

    The Authority calls :meth:`check` at the start of every write transaction and every alive
    mark; gaps are measured on the monotonic clock (the Authority's own clock may be a test's
    manual one). Stalls are watched on a single-process store only (SQLite): one stalled
    replica of several over PostgreSQL is not the Authority being away.

    Args:
        threshold_ms: a gap between checks longer than this is a stall.
        quiet_ms: a silence longer than this is a cut (:meth:`heard`).
        queue_ms: a queue wait longer than this is credited (:meth:`queued`).
        monotonic: elapsed seconds (the Authority's :class:`LeaseClock`'s).
    """

    def __init__(
        self,
        threshold_ms: int = STALL_MS,
        quiet_ms: int = QUIET_MS,
        queue_ms: int = QUEUE_MS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold_ms = threshold_ms
        self.quiet_ms = quiet_ms
        self.queue_ms = queue_ms
        self.monotonic = monotonic
        self._seen = monotonic()
        self._heard = self._seen
        #: lease time of the first store failure since the last commit
        self._failed_since: int | None = None
        #: incidents credited in a transaction that has not committed yet, by cause (ms)
        self._pending: dict[str, int] = {}

    def check(self, store: Store, now_ms: int, steps_ms: int = 0) -> int:
        """In a write transaction: credit (:func:`credit_outage`) the longest of the stall
        (the last check more than :attr:`threshold_ms` ago, SQLite only), the store failure,
        the queue wait and the clock ``steps_ms`` not committed yet; the leases extended."""
        now = self.monotonic()
        gap_ms = int((now - self._seen) * 1000)
        self._seen = now
        pending = self._pending
        if gap_ms > self.threshold_ms and store.backend == "sqlite":
            # the stall is a silence too: it is credited here, once
            self._heard = max(self._heard, now)
            pending["stalled"] = max(pending.get("stalled", 0), gap_ms)
        if steps_ms:
            pending["clock_step"] = pending.get("clock_step", 0) + steps_ms
        if self._failed_since is not None:
            pending["store_failed"] = now_ms - self._failed_since
        if pending.get("queued", 0) <= self.queue_ms:
            pending.pop("queued", None)
        if not pending:
            return 0
        cause, gap = max(pending.items(), key=lambda kv: kv[1])
        n = credit_outage(store, gap, now_ms)
        record_credit(cause, n, min(gap, MAX_CREDIT_MS))  # counted even if it rolls back: rare
        if n:
            log.warning("the Authority could not serve for %d ms (%s): %d live lease(s) "
                        "extended by that", gap, cause, n)  # fmt: skip
        return n

    def failed(self, now_ms: int, exc: BaseException) -> None:
        """The store could not commit at ``now_ms`` (lease time): credit from the first such
        failure until the next commit."""
        if self._failed_since is None:
            self._failed_since = now_ms
            log.error("the store could not commit (%s): crediting live leases until it does",
                      exc)  # fmt: skip

    @property
    def failing_since_ms(self) -> int | None:
        """Lease time (epoch ms) of the first store failure not yet followed by a commit, or
        ``None`` while the store commits (for a readiness check)."""
        return self._failed_since

    def queued(self, waited_ms: int) -> None:
        """A Command of the next transaction waited ``waited_ms`` in the writer's queue."""
        self._pending["queued"] = max(self._pending.get("queued", 0), waited_ms)

    def committed(self) -> None:
        """A write transaction committed: what it credited stands; the incidents end."""
        if self._failed_since is not None:
            log.warning("the store commits again: the failure was credited to live leases")
        self._failed_since = None
        self._pending.clear()

    def heard(self, backend: str) -> int:
        """A request arrived from a client: the length of the silence it ends (milliseconds)
        when that is longer than :attr:`quiet_ms` on a ``sqlite`` store, else 0."""
        now = self.monotonic()
        gap_ms = int((now - self._heard) * 1000)
        self._heard = now
        return gap_ms if gap_ms > self.quiet_ms and backend == "sqlite" else 0


async def keep_alive(authority: Any, interval_s: float = ALIVE_INTERVAL_S) -> None:
    """Record every ``interval_s`` that ``authority`` is serving, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await asyncio.to_thread(_mark, authority)
        except Exception as exc:  # a busy or unreachable database: the next beat records it
            log.info("alive mark not written: %s", exc)


def _mark(authority: Any) -> None:
    try:
        with authority._write(fsync=False):
            start_judging(authority)
            mark_alive(authority.store, authority.clock())
    except Exception as exc:
        store_failed(authority, exc)
        raise
    store_committed(authority)


__all__ = [
    "ALIVE_INTERVAL_S",
    "GRACE_LEASES",
    "QUEUE_MS",
    "QUIET_MS",
    "STALL_MS",
    "StallWatch",
    "credit_downtime",
    "credit_on_start",
    "credit_outage",
    "credit_quiet",
    "keep_alive",
    "mark_alive",
    "note_queued",
    "start_judging",
    "store_committed",
    "store_failed",
    "store_unavailable",
]
