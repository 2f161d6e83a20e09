"""A wall-clock step of the Authority, found by the fault suite's ``clock`` kind (issue 37): a
forward step expires no accepted WorkItem's start deadline, and a step set right again does not
lock members out — a signature's freshness is judged on the reference clock, not on lease time,
which stays ahead after a forward step was corrected (it never goes back, MW-11.5-c)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from missionweave.authority.core import credit_on_start, freshness_clock
from missionweave.authority.http._frames import check_member_frame
from missionweave.authority.wire import MAX_SKEW_MS, FrameError
from missionweave.protocol import canonical_bytes
from tests.support.world import make_world

from .test_service_time import SteppedClock


def _presence_frame(w, wall_ms: int) -> dict:  # type: ignore[no-untyped-def]
    """A member's frame signed at ``wall_ms`` (its own clock, which was never stepped)."""
    actor = w.workers[0]
    frame = {"group": w.group, "agent": actor.agent_id, "issuedAtMs": wall_ms,
             "nonce": uuid.uuid4().hex}  # fmt: skip
    frame["signature"] = actor.key.sign(canonical_bytes(frame))
    return frame


def test_a_forward_step_set_right_again_refuses_no_members_frame__MW_11_5_c(
    tmp_path: Path,
) -> None:
    """+10 min, 2 s, then back: lease time is still ~10 min ahead (it runs at half rate until
    the wall clock catches up), yet a frame the member signs on its true clock is accepted;
    while the Authority's clock is wrong the same frame is refused (``unauthorized``)."""
    clock = SteppedClock()
    w = make_world(tmp_path / "a.db", clock=clock)
    clock.advance(1_000)
    true_ms = clock.wall_ms
    clock.step(600_000)
    clock()  # the Authority judges a Command meanwhile: lease time follows the step
    with pytest.raises(FrameError):  # the Authority's clock is wrong: refused, as it should be
        check_member_frame(w.authority, _presence_frame(w, true_ms), w.group, "worker-0")
    clock.advance(2_000)
    clock.step(-600_000)
    true_ms = clock.wall_ms
    assert clock() - true_ms > MAX_SKEW_MS  # lease time stays ahead of the corrected clock
    assert freshness_clock(clock)() == true_ms
    check_member_frame(w.authority, _presence_frame(w, true_ms), w.group, "worker-0")


def test_a_forward_step_does_not_miss_an_accepted_work_items_start_deadline__MW_11_5_c(
    tmp_path: Path,
) -> None:
    """A WorkItem accepted with a 60 s start deadline; the wall clock jumps 10 minutes ahead:
    the step is credited to its start deadline as to live leases, so its owner's ``work.start``
    is accepted (before: ``start_deadline_missed`` for every start, the WorkItem stuck at its
    owner — the fault suite's ``clock`` kind)."""
    clock = SteppedClock()
    w = make_world(tmp_path / "a.db", clock=clock)
    credit_on_start(w.authority)  # serving: the stall watch and its step credit are on
    w.authorize("a", timeouts={"start_deadline_ms": 60_000, "lease_ms": 3_000,
                               "heartbeat_ms": 500})  # fmt: skip
    worker = w.workers[0]
    assert w.accept(worker, "a", w.offer("a", worker)).accepted
    clock.advance(1_000)
    clock.step(600_000)
    lease = w.start(worker, "a")
    assert lease["lease_id"]


def test_a_renewal_that_is_the_first_to_see_a_forward_step_is_accepted__MW_11_5_c(
    tmp_path: Path,
) -> None:
    """Nothing reads the clock between the step and the owner's renewal (its Command was
    signed before): the transaction that judges it is the first to see the step, and credits
    it before judging (before: the step was taken from the clock before the clock was read,
    so it was credited only at the next transaction and this renewal was ``lease_expired`` —
    ``4242:clock:step-ahead:1``, a WorkItem stuck)."""
    clock = SteppedClock()
    w = make_world(tmp_path / "a.db", clock=clock)
    w.authorize("a", timeouts={"start_deadline_ms": 60_000, "lease_ms": 2_000,
                               "heartbeat_ms": 500})  # fmt: skip
    w.lease("a", w.workers[0])
    credit_on_start(w.authority)
    clock.advance(500)
    renewal = w.workers[0].command("lease.renew", w.group, w.leased("a"), issued_at_ms=clock())
    clock.step(600_000)
    r = w.authority.submit(renewal)
    assert r.accepted, r.rejection
