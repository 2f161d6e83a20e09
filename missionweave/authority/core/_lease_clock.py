"""The Authority's lease time: the wall clock, made safe to judge leases by (MW-11.5-c).

Leases, offers and deadlines are judged on :class:`LeaseClock`, epoch milliseconds:

* it follows the wall clock while the wall clock moves as elapsed (monotonic) time does;
* **a forward step** of the wall clock (its progress exceeds the monotonic clock's by more
  than :data:`STEP_MS`) is followed — Events keep true times — and the step is kept in
  :meth:`LeaseClock.take_steps`, which the Authority credits to live leases like a stall
  before it judges the next Command (:mod:`._outages`): the step expires nothing;
* **a backward step** never moves lease time back: while the wall clock is behind it, lease
  time advances at :data:`BEHIND_RATE` of elapsed time until the wall clock catches up, so a
  lease of term ``L`` lives at most ``L / BEHIND_RATE`` (= 2 L, within its term plus the
  grace of :data:`._credit.GRACE_LEASES` leases) in elapsed time, and the clock converges;
  across a restart the last lease time the Authority recorded (its alive mark) is the floor;
* **over PostgreSQL** the reference is the database's clock (``clock_timestamp()``), taken at
  the start of every write transaction (:meth:`LeaseClock.sync`) and carried forward on the
  monotonic clock between them, so replicas judge a lease on one clock; a replica's own
  wall-clock step then does not matter at all.

A signature's freshness (a signed read's ``created``, a frame's ``issuedAtMs``) is judged on
the reference clock itself, not on lease time (:func:`freshness_clock`): the signers' clocks
go back with it after a correction, while lease time does not, and judging them on lease time
refused every member's signed reads for twice a forward step once the step was set right
(issue 37, the fault suite's ``clock`` kind).

A Command's ``issued_at_ms`` is the actor's claim, never lease time; :func:`refuse_skewed`
bounds it (``clock_skew``) once its Command id has been looked up (MW-11.3-c).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ...protocol import Command, RejectionCode
from ._command_scope import Reject

#: A wall clock that gains this much more than elapsed time (ms) between two readings
#: stepped forward.
STEP_MS = 3_000
#: Lease time's rate, against elapsed time, while the wall clock is behind it (after a
#: backward step).
BEHIND_RATE = 0.5
#: How far ahead of lease time a Command's ``issued_at_ms`` may be (ms): 10 minutes.
MAX_ISSUED_AHEAD_MS = 600_000
#: How far behind lease time a Command's ``issued_at_ms`` may be (ms): 366 days. A workflow
#: signs a retried Command with its first try's time (and a test's Authority may run on a
#: virtual clock ahead of its actors'), so this outlasts any outage; 0 is still refused.
MAX_ISSUED_AGE_MS = 366 * 86_400_000


def wall_ms() -> int:
    """The system's wall clock, epoch milliseconds."""
    return time.time_ns() // 1_000_000


class LeaseClock:
    """Epoch-millisecond lease time (see the module docstring); callable, thread-safe.

    Args:
        wall: the wall clock, epoch milliseconds (a test injects a stepped one).
        monotonic: elapsed seconds (``time.monotonic``; a test may inject one).
    """

    def __init__(
        self,
        wall: Callable[[], int] = wall_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.wall = wall
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._last = 0  # the last lease time answered
        self._ref: tuple[int, float] | None = None  # (reference ms, monotonic s) of a sync
        self._seen: tuple[int, float] | None = None  # (reference ms, monotonic s) last read
        self._steps = 0

    def __call__(self) -> int:
        with self._lock:
            m = self.monotonic()
            ref = self._ref
            wall = self.wall() if ref is None else ref[0] + int((m - ref[1]) * 1000)
            seen = self._seen
            if seen is None:
                now = max(wall, self._last)
            else:
                elapsed = (m - seen[1]) * 1000
                step = wall - seen[0] - elapsed
                if step > STEP_MS:
                    self._steps += int(step)
                now = max(wall, self._last + int(elapsed * BEHIND_RATE))
            self._seen = (wall, m)
            self._last = now
            return now

    def sync(self, reference_ms: int) -> None:
        """From now on read the reference clock (the database's, epoch ms, read just now) and
        carry it forward on the monotonic clock until the next sync. The first sync starts
        lease time afresh on the reference (the local wall clock judged no lease before it)."""
        with self._lock:
            if self._ref is None:
                self._seen, self._last = None, 0
            self._ref = (reference_ms, self.monotonic())

    def floor(self, at_least_ms: int) -> None:
        """Never answer less than ``at_least_ms`` (the last lease time recorded before a
        restart); from there lease time moves as after a backward step."""
        with self._lock:
            self._last = max(self._last, at_least_ms)

    def reference(self) -> int:
        """The reference clock now, epoch ms — the wall clock, or the database's carried
        forward since the last :meth:`sync` — without lease time's floor: it goes back when
        the wall clock is stepped back."""
        with self._lock:
            ref = self._ref
            if ref is None:
                return self.wall()
            return ref[0] + int((self.monotonic() - ref[1]) * 1000)

    def take_steps(self) -> int:
        """The forward steps seen since the last call, milliseconds (0: none)."""
        with self._lock:
            steps, self._steps = self._steps, 0
            return steps


def freshness_clock(clock: Callable[[], int]) -> Callable[[], int]:
    """The clock a signature's freshness is judged on: a :class:`LeaseClock`'s
    :meth:`~LeaseClock.reference`, any other clock (a test's) itself."""
    return clock.reference if isinstance(clock, LeaseClock) else clock


def refuse_skewed(cmd: Command, now_ms: int) -> None:
    """Refuse a Command whose ``issued_at_ms`` is more than :data:`MAX_ISSUED_AHEAD_MS` ahead
    of lease time ``now_ms`` or more than :data:`MAX_ISSUED_AGE_MS` behind it. Call it after
    the Command id was looked up: a repeated id is answered by its id whatever its time.

    Raises:
        Reject: ``clock_skew`` with ``issued_at_ms`` and ``authority_ms`` (MW-11.3-c).
    """
    if -MAX_ISSUED_AGE_MS <= cmd.issued_at_ms - now_ms <= MAX_ISSUED_AHEAD_MS:
        return
    raise Reject(
        RejectionCode.CLOCK_SKEW,
        f"issued_at_ms is more than {MAX_ISSUED_AHEAD_MS} ms ahead of the Authority's clock "
        f"or more than {MAX_ISSUED_AGE_MS} ms behind it",
        issued_at_ms=cmd.issued_at_ms,
        authority_ms=now_ms,
    )


__all__ = [
    "BEHIND_RATE",
    "MAX_ISSUED_AGE_MS",
    "MAX_ISSUED_AHEAD_MS",
    "STEP_MS",
    "LeaseClock",
    "freshness_clock",
    "refuse_skewed",
    "wall_ms",
]
