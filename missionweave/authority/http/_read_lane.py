"""Writes before reads (issue 37 item 4): the lane reads run in, and when they are shed.

Every read of the log that can be large — a page of ``GET …/events``, a snapshot, a stream's
replay and live follow, a far-behind subscriber's snapshot — runs in the :class:`ReadLane`'s
own threads (:data:`READ_THREADS`), never in the default executor, and the
:class:`~._batch.BatchWriter` commits in a thread of its own: a storm of reads queues behind
itself, not in front of a Command. The lane also says when the Authority is under pressure
(:meth:`ReadLane.pressure`): while a queued Command has waited longer than
:data:`SHED_AFTER_MS`, or more reads wait for a thread than :data:`MAX_READ_BACKLOG`, a new
large read is answered at once 429 ``read_shed`` with ``Retry-After`` (before its signature is
checked), while every Command is still taken.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from ._read_gate import RETRY_AFTER_S

#: Threads that run reads of the log (the Authority serializes its store behind one lock: more
#: would only queue there, in front of the writer).
READ_THREADS = 2
#: Milliseconds the oldest queued Command may wait before new large reads are shed.
SHED_AFTER_MS = 100
#: Reads waiting for a read thread before new large reads are shed.
MAX_READ_BACKLOG = 8

P = ParamSpec("P")
T = TypeVar("T")


class ReadLane:
    """The read threads and the pressure gauge of one app; single event loop.

    Args:
        queued_wait_ms: how long the oldest queued Command has waited, milliseconds
            (``BatchWriter.oldest_wait_ms``).
        threads: read threads (>= 1).
        shed_after_ms: shed reads while a Command has waited longer than this (>= 1).
        max_backlog: shed reads while more than this many wait for a thread (>= 0).

    Raises:
        ValueError: a bound out of range.

    Attributes:
        shed: large reads shed so far (for operators and benchmarks).
    """

    def __init__(
        self,
        queued_wait_ms: Callable[[], float],
        *,
        threads: int = READ_THREADS,
        shed_after_ms: int = SHED_AFTER_MS,
        max_backlog: int = MAX_READ_BACKLOG,
    ) -> None:
        if threads < 1 or shed_after_ms < 1 or max_backlog < 0:
            raise ValueError("need threads >= 1, shed_after_ms >= 1, max_backlog >= 0")
        self._queued_wait_ms = queued_wait_ms
        self.threads, self.shed_after_ms, self.max_backlog = threads, shed_after_ms, max_backlog
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="missionweave-read")
        self._submitted = 0
        self.shed = 0

    @property
    def backlog(self) -> int:
        """Reads submitted and not yet running or done beyond the threads (an estimate)."""
        return max(0, self._submitted - self.threads)

    async def run(self, fn: Callable[P, T], *args: P.args, **kw: P.kwargs) -> T:
        """``fn(*args, **kw)`` in a read thread (with this context, as ``asyncio.to_thread``)."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kw)
        self._submitted += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        finally:
            self._submitted -= 1

    def pressure(self) -> dict[str, Any] | None:
        """The refusal of a new large read now (counted in :attr:`shed`): ``scope``
        ``writes`` (``waited_ms``, ``max_wait_ms``) or ``reads`` (``backlog``,
        ``max_backlog``), and ``retry_after_s``; ``None`` when there is no pressure."""
        waited = self._queued_wait_ms()
        if waited > self.shed_after_ms:
            refusal: dict[str, Any] = {
                "scope": "writes",
                "waited_ms": round(waited),
                "max_wait_ms": self.shed_after_ms,
            }
        elif self.backlog > self.max_backlog:
            refusal = {"scope": "reads", "backlog": self.backlog, "max_backlog": self.max_backlog}
        else:
            return None
        self.shed += 1
        return {**refusal, "retry_after_s": RETRY_AFTER_S}

    def close(self) -> None:
        """Stop the read threads once their reads are done (no new read is taken)."""
        self._pool.shutdown(wait=False)


__all__ = ["MAX_READ_BACKLOG", "READ_THREADS", "SHED_AFTER_MS", "ReadLane"]
