"""Crediting live leases for time in which the Authority could not serve their owners
(MW-11.5-c), bounded so that a dead owner's WorkItem is still re-offered (MW-11.5-a).

An *incident* is an interval ``[now - gap, now]`` of lease time (:mod:`._lease_clock`) in which
no renewal could have been committed: the Authority down, stalled, cut off, its store failing,
its writer's queue past its bound, or its wall clock stepped forward. :func:`credit_outage`
extends every lease live when the incident began to

    ``min(max(expires_at + gap, now + GRACE_LEASES × lease_ms), ceiling)``

and never shortens one, where ``gap`` is capped at :data:`MAX_CREDIT_MS` per incident and
``ceiling = heard + lease_ms + MAX_CREDIT_MS + GRACE_LEASES × lease_ms`` (``heard``: the last
time the owner started or renewed the lease). So an owner that was renewing keeps its lease
through any incident up to :data:`MAX_CREDIT_MS`, and an owner that is dead — it is never heard
again — loses it at the latest ``MAX_CREDIT_MS + (1 + GRACE_LEASES) × lease_ms`` after it was
last heard, however often the store flaps.

An accepted WorkItem's start deadline (``work_items.start_deadline_ms``) not passed when the
incident began moves by ``gap`` too: its owner could not start it meanwhile (a forward step of
the wall clock refused every such start ``start_deadline_missed``, and the WorkItem waited at
its owner for good — the fault suite's ``clock`` kind, issue 37). A dead owner's accepted
WorkItem is re-offered at the latest the incidents' length after its deadline. A silence
(``renewing_only``) moves none: it credits only the owners it heard, so a silent owner's
queued hold would otherwise lapse before its moved deadline.

The store records the end of the last credited incident (``meta`` ``credited_until_ms``), in
the transaction that extends the leases: an interval is credited once, whichever replica or
cause reports it, and over PostgreSQL the record is taken under an advisory lock of its own
(:data:`LEDGER`), so replicas recovering together serialize on it. The record trims only the
gap a credit adds: every lease live when a replica's own incident began is still considered
(another replica may have seen the same outage begin later, and credited a later interval
that a lease lapsed before), and gets at least the grace from now.
"""

from __future__ import annotations

import json

from ...protocol import WorkContract
from ._store import Store

#: Whole leases an owner gets, from the end of an outage, to renew in (a reconnecting agent
#: under load takes more than one short lease to get its first request through).
GRACE_LEASES = 2
#: The most one incident is credited, milliseconds (10 minutes): a longer outage costs the
#: owners that could not renew for the rest of it their leases.
MAX_CREDIT_MS = 600_000
#: The advisory lock name of the credit record (no Group id has a space).
LEDGER = "credit ledger"


def credit_outage(store: Store, gap_ms: int, now_ms: int, *, renewing_only: bool = False) -> int:
    """Inside a write transaction: credit an incident of ``gap_ms`` ending at ``now_ms`` to
    every lease live when it began (see the module docstring for the new expiry and its
    bounds), once: the part of the interval an earlier credit covered is not credited again.

    Args:
        store: the Authority's store.
        gap_ms: the incident's length, milliseconds (> 0; capped at :data:`MAX_CREDIT_MS`).
        now_ms: its end, epoch milliseconds of lease time.
        renewing_only: credit only leases whose owner was heard (started or renewed) within
            half a lease before the incident began — for a silence, which an owner dead before
            it explains as well as a cut.

    Returns:
        The number of leases extended.

    Implements MW-11.5-c, bounded for MW-11.5-a.
    """
    store.lock_groups([LEDGER])
    row = store.one("meta.credited_until")
    credited_until = int(row[0]) if row is not None else 0
    start = now_ms - min(gap_ms, MAX_CREDIT_MS)
    since = max(start, credited_until)
    gap = max(0, now_ms - since)  # the part of the interval no credit covered yet
    n = 0
    # Every lease live when *this* incident began, even where another replica's credit of the
    # same outage began later (it saw the store fail later) and so never considered a lease
    # that expired meanwhile: each gets at least the grace from now (the fault suite's store
    # kind), and only the uncredited part of the gap on top of its expiry.
    for row in store.all("leases.live_at_with_contract", start):
        lease_ms = WorkContract.model_validate_json(row["contract"]).timeouts.lease_ms
        heard = max([row["started_at_ms"], *json.loads(row["renewals"])])
        if renewing_only and (row["kind"] != "execution" or heard < start - lease_ms // 2):
            continue
        ceiling = heard + lease_ms + MAX_CREDIT_MS + GRACE_LEASES * lease_ms
        credited = min(max(row["expires_at_ms"] + gap, now_ms + GRACE_LEASES * lease_ms), ceiling)
        if credited > row["expires_at_ms"]:
            store.run("leases.set_expires_at_ms", credited, row["lease_id"])
            n += 1
    # an accepted WorkItem's owner could not start it either: its start deadline moves too
    # (a forward clock step otherwise refused every start with start_deadline_missed for good)
    if gap and not renewing_only:  # a silence credits only owners it heard: no deadline moves
        store.run("work_items.credit_start_deadlines", gap, since)
    store.run("meta.set_credited_until", str(max(now_ms, credited_until)))
    return n


__all__ = ["GRACE_LEASES", "LEDGER", "MAX_CREDIT_MS", "credit_outage"]
