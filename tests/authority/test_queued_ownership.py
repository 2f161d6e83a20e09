"""Queued ownership is a renewable, fenced lease (MW-11.3-a) on a real Authority: an accepted
WorkItem that has not started is held under an ownership lease (kind ``queued``) bound to its
ownership epoch; the owner renews it with ``lease.renew`` while it waits for a slot; a hold
that is not renewed lapses before the start deadline, and a stale epoch cannot renew it."""

from __future__ import annotations

from pathlib import Path

from tests.support.world import make_world

LEASE_MS = 30_000  # the verify preset's
START_DEADLINE_MS = 60_000


def test_queued_ownership_is_a_renewable_fenced_lease__MW_11_3_a(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    worker = w.workers[0]
    t0 = w.clock.now
    accepted = w.accept(worker, "a", w.offer("a", worker))
    assert accepted.accepted
    hold = accepted.reply["hold"]
    (event,) = [e for e in w.authority.events(w.group) if e.type == "work.offer_accepted"]
    assert event.body["hold"] == hold  # the grant: epoch, start deadline and the hold
    assert event.body["start_deadline_ms"] == t0 + START_DEADLINE_MS
    assert hold["kind"] == "queued" and hold["ownership_epoch"] == 1
    assert hold["expires_at_ms"] == t0 + LEASE_MS

    body = {"work_item_id": "a", "lease_id": hold["lease_id"], "ownership_epoch": 1}
    w.clock.advance(20_000)
    renewed = w.ok(worker, "lease.renew", body)
    # renewed by one lease length, never past the start deadline
    assert renewed.reply["expires_at_ms"] == t0 + 50_000
    assert "capability_token" not in renewed.reply  # a hold grants no execution
    stale = w.submit(worker, "lease.renew", {**body, "ownership_epoch": 2})
    assert stale.rejection is not None and stale.rejection.code == "stale_ownership_epoch"
    other = w.submit(w.workers[1], "lease.renew", body)
    assert other.status == "rejected"

    # not renewed again: the hold lapses before the start deadline, and the item is re-offered
    w.clock.advance(30_001)
    assert w.clock.now < t0 + START_DEADLINE_MS
    w.offer("a", w.workers[1])
    closed = [e for e in w.authority.events(w.group) if e.type == "ownership.closed"]
    assert [e.body["reason"] for e in closed] == ["ownership_lease_expired"]
    late = w.submit(worker, "lease.renew", body)
    assert late.status == "rejected"
    start = w.submit(worker, "work.start", {"work_item_id": "a", "ownership_epoch": 1})
    assert start.status == "rejected"


def test_a_renewed_hold_keeps_the_item_and_work_start_releases_it__MW_11_3_a(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    worker = w.workers[0]
    hold = w.accept(worker, "a", w.offer("a", worker)).reply["hold"]
    body = {"work_item_id": "a", "lease_id": hold["lease_id"], "ownership_epoch": 1}
    for _ in range(2):
        w.clock.advance(LEASE_MS - 5_000)
        w.ok(worker, "lease.renew", body)
    # past one lease length from acceptance, still the owner's: no re-offer
    refused = w.submit(w.coordinator, "work.offer", w.offer_body("a", "worker-1"))
    assert refused.rejection is not None and refused.rejection.code == "owner_active"
    started = w.ok(worker, "work.start", {"work_item_id": "a", "ownership_epoch": 1})
    assert started.reply["lease"]["lease_id"] != hold["lease_id"]
    released = [
        e.body
        for e in w.authority.events(w.group)
        if e.type == "lease.released" and e.body["lease_id"] == hold["lease_id"]
    ]
    assert released == [{"lease_id": hold["lease_id"], "kind": "queued", "reason": "started"}]
    again = w.submit(worker, "lease.renew", body)  # the hold is over
    assert again.rejection is not None and again.rejection.code == "stale_lease"


def test_a_hold_never_outlives_the_start_deadline__MW_11_3_a(tmp_path: Path) -> None:
    """A lease longer than the start deadline: the hold is granted, and renewed, only up to
    the start deadline — ownership never outlasts the time the grant gave to start."""
    w = make_world(tmp_path / "a.db")
    w.authorize("a", timeouts={"lease_ms": 90_000, "start_deadline_ms": START_DEADLINE_MS})
    worker = w.workers[0]
    t0 = w.clock.now
    hold = w.accept(worker, "a", w.offer("a", worker)).reply["hold"]
    assert hold["expires_at_ms"] == t0 + START_DEADLINE_MS
    w.clock.advance(10_000)
    body = {"work_item_id": "a", "lease_id": hold["lease_id"], "ownership_epoch": 1}
    assert w.ok(worker, "lease.renew", body).reply["expires_at_ms"] == t0 + START_DEADLINE_MS
