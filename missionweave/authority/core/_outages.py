"""An outage of the Authority never costs an owner its lease (MW-11.5-c; docs/design.md §4,
"One judge for a lease").

A lease is judged by the renewals the Authority *could* have received. Time in which no
renewal could reach it is credited to every lease live when that time began: the gap itself,
and then at least :data:`GRACE_LEASES` whole leases (the contract's ``lease_ms``) from now, so
that an owner that reconnects has time to renew in before anyone may take its WorkItem:

* **down** — the server records when it was last alive (:func:`mark_alive`, every second);
  when it starts again :func:`credit_downtime` credits the time since;
* **stalled** — a serving Authority that stood still (SIGSTOP, suspended, starved) heard no
  renewal either: :class:`StallWatch` credits a gap between its own alive marks and
  transactions;
* **cut off** — a serving Authority that heard no request *from anyone* for longer than
  :data:`QUIET_MS` could not have received the owners' renewals: :meth:`StallWatch.heard`
  notices the silence when the next request arrives, and the HTTP front credits it before
  that request is judged (:func:`credit_quiet`). Only leases whose owner renewed shortly
  before the silence began are credited (an owner dead before it is not revived).

A new expiry is ``max(expires_at + gap, now + GRACE_LEASES × lease_ms)``. Stalls and silences
are watched on a single-process store only (SQLite): one quiet replica of several over
PostgreSQL is not the Authority being away.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from ...protocol import WorkContract
from ._metrics import record_credit
from ._store import Store

log = logging.getLogger(__name__)

#: Whole leases an owner gets, from the end of an outage, to renew in (a reconnecting agent
#: under load takes more than one short lease to get its first request through).
GRACE_LEASES = 2
#: Seconds between two :func:`mark_alive` records of a serving Authority.
ALIVE_INTERVAL_S = 1.0
#: A gap this long (milliseconds, monotonic) between a serving Authority's alive marks or
#: transactions means the Authority itself stalled (frozen, suspended, starved), not its agents.
STALL_MS = 3_000
#: A silence this long (milliseconds, monotonic) in which no request arrived from anyone
#: means the Authority was cut off: owners that were renewing could not reach it.
QUIET_MS = 1_000


def mark_alive(store: Store, now_ms: int) -> None:
    """Record that the Authority is serving at ``now_ms`` (the server calls it every second
    inside a write transaction)."""
    store.run("meta.set_alive_at", str(now_ms))


def credit_outage(store: Store, gap_ms: int, now_ms: int, *, renewing_only: bool = False) -> int:
    """Inside a write transaction: extend every lease live when an outage of ``gap_ms`` ending
    at ``now_ms`` (epoch ms) began to ``max(expires_at + gap_ms, now_ms + GRACE_LEASES ×
    lease_ms)``.

    Args:
        store: the Authority's store.
        gap_ms: the outage's length, milliseconds (> 0).
        now_ms: its end, epoch milliseconds.
        renewing_only: credit only leases whose owner was heard (started or renewed) within
            half a lease before the outage began — for a silence, which an owner dead before
            it explains as well as a cut.

    Returns:
        The number of leases extended.

    Implements MW-11.5-c.
    """
    since = now_ms - gap_ms
    n = 0
    for row in store.all("leases.live_at_with_contract", since):
        lease_ms = WorkContract.model_validate_json(row["contract"]).timeouts.lease_ms
        if renewing_only:
            heard = max([row["started_at_ms"], *json.loads(row["renewals"])])
            if row["kind"] != "execution" or heard < since - lease_ms // 2:
                continue
        expires = max(row["expires_at_ms"] + gap_ms, now_ms + GRACE_LEASES * lease_ms)
        store.run("leases.set_expires_at_ms", expires, row["lease_id"])
        n += 1
    return n


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
    :class:`~missionweave.authority.Authority`); logs what it extended. From then on the
    Authority's own stalls and silences are credited too (:class:`StallWatch`)."""
    with authority._write():
        downtime, n = credit_downtime(authority.store, authority.clock())
    authority.stall_watch = StallWatch()
    record_credit("down", n)
    if n:
        log.warning("the Authority was down %d ms: %d live lease(s) extended by that", downtime, n)
    return downtime, n


def credit_quiet(authority: Any, gap_ms: int) -> int:
    """Credit a silence of ``gap_ms`` that just ended (:meth:`StallWatch.heard`) to the leases
    whose owners were renewing when it began, in a write transaction of ``authority``; the
    leases extended. Call it before the request that ended the silence is judged."""
    with authority._write(fsync=False):
        n = credit_outage(authority.store, gap_ms, authority.clock(), renewing_only=True)
    record_credit("silent", n)
    if n:
        log.warning("the Authority heard from nobody for %d ms: %d live lease(s) extended",
                    gap_ms, n)  # fmt: skip
    return n


class StallWatch:
    """Credits a serving Authority's own stalls to live leases, as a restart credits its
    downtime (MW-11.5-c): a frozen (SIGSTOP), suspended or starved Authority heard no renewal
    either, so the time it stood still must not cost an owner its lease. It also measures the
    silences in which nobody's request arrived (:meth:`heard`).

    The Authority calls :meth:`check` at the start of every write transaction and every alive
    mark; the gap is measured on the monotonic clock (the Authority's own clock may be a test's
    manual one). Only a single-process store (SQLite) is watched: one stalled replica of
    several over PostgreSQL is not the Authority being away.
    """

    def __init__(self, threshold_ms: int = STALL_MS, quiet_ms: int = QUIET_MS) -> None:
        self.threshold_ms = threshold_ms
        self.quiet_ms = quiet_ms
        self._seen = time.monotonic()
        self._heard = self._seen

    def check(self, store: Store, now_ms: int) -> int:
        """In a write transaction: credit the stall (:func:`credit_outage`) if the last check
        was more than :attr:`threshold_ms` ago; the leases extended."""
        now = time.monotonic()
        gap_ms = int((now - self._seen) * 1000)
        self._seen = now
        if gap_ms <= self.threshold_ms or store.backend != "sqlite":
            return 0
        # the stall is a silence too: it is credited here, once
        self._heard = max(self._heard, now)
        n = credit_outage(store, gap_ms, now_ms)
        record_credit("stalled", n)  # counted even if the transaction rolls back: rare
        if n:
            log.warning("the Authority stood still %d ms: %d live lease(s) extended by that",
                        gap_ms, n)  # fmt: skip
        return n

    def heard(self, backend: str) -> int:
        """A request arrived from a client: the length of the silence it ends (milliseconds)
        when that is longer than :attr:`quiet_ms` on a ``sqlite`` store, else 0."""
        now = time.monotonic()
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
    with authority._write(fsync=False):
        if authority.stall_watch is not None:
            authority.stall_watch.check(authority.store, authority.clock())
        mark_alive(authority.store, authority.clock())


__all__ = [
    "ALIVE_INTERVAL_S",
    "GRACE_LEASES",
    "QUIET_MS",
    "STALL_MS",
    "StallWatch",
    "credit_downtime",
    "credit_on_start",
    "credit_outage",
    "credit_quiet",
    "keep_alive",
    "mark_alive",
]
