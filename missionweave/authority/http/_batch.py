"""Group commit for the HTTP front: many concurrent requests, one writer, few transactions.

Requests are queued; one writer task takes as many queued requests as fit in ``max_batch``
Commands and hands them to :meth:`Authority.submit_many` in the writer's own thread (never
behind reads, which run in theirs: :mod:`._read_lane`), so a burst of concurrent POSTs costs a
handful of transactions (one fsync each) instead of one per Command. Requests that renew a
lease (:data:`URGENT`) are taken before the others queued with them.
After every commit the touched Groups are announced to the :class:`Notifier`, which wakes the
WebSocket streams (MW-16-d live delivery).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, field

from opentelemetry import context as otel_context

from ...protocol import Command, CommandType
from ..core import Authority, NotReady, StoreUnavailableError, Unready, note_queued
from ..wire import SubmitResult

log = logging.getLogger(__name__)

#: Seconds one write transaction may run before the Authority says it is not ready
#: (``writer_stalled``): a healthy group commit takes milliseconds, a database outage fails
#: it within seconds (``store_unavailable``).
WRITER_STALL_S = 10.0

#: Command types whose requests go before the others in the writer's queue: a late renewal
#: costs an owner its lease (MW-11.5).
URGENT = frozenset({CommandType.LEASE_RENEW})


class Notifier:
    """Per-Group wake-ups for streams waiting on new Events.

    A stream takes a :meth:`waiter` *before* reading the log, then waits on it: an append that
    lands between the read and the wait still wakes it (the waiter is already set).
    """

    def __init__(self) -> None:
        self._waiters: dict[str, asyncio.Event] = {}

    def waiter(self, group_id: str) -> asyncio.Event:
        """The event that the next :meth:`notify` of ``group_id`` sets."""
        ev = self._waiters.get(group_id)
        if ev is None:
            ev = self._waiters[group_id] = asyncio.Event()
        return ev

    def notify(self, group_ids: set[str]) -> None:
        """Wake every stream waiting on one of ``group_ids``."""
        for gid in group_ids:
            ev = self._waiters.pop(gid, None)
            if ev is not None:
                ev.set()

    def notify_all(self) -> None:
        """Wake every stream (notifications were missed: each reads the log itself)."""
        self.notify(set(self._waiters))

    @staticmethod
    async def wait(waiter: asyncio.Event, timeout_s: float) -> None:
        """Wait until ``waiter`` is set or ``timeout_s`` seconds pass (the fallback poll)."""
        try:
            await asyncio.wait_for(waiter.wait(), timeout_s)
        except TimeoutError:
            pass


@dataclass(slots=True)
class _Request:
    commands: list[Command]
    future: asyncio.Future[list[SubmitResult]]
    # the sender's trace context (its HTTP request span): the writer task runs in another
    trace_context: otel_context.Context = field(default_factory=otel_context.get_current)
    queued_at: float = field(default_factory=time.monotonic)  # seconds, monotonic


@dataclass(slots=True, eq=False)
class BatchWriter:
    """Serializes writes to one :class:`Authority` and commits them in groups.

    Args:
        authority: the Authority to write to.
        max_batch: Commands per transaction (a single request larger than this is split into
            consecutive transactions, in order).
        on_commit: called on the event loop after every commit with the Group ids that received
            new Events.
        stall_s: seconds one transaction may run before :meth:`stalled` reports the writer
            stalled (readiness).

    Attributes:
        batches: transactions committed (``submit_many`` calls that returned).
        commands: Commands submitted through those transactions.
        requests: requests answered.
        largest_batch: the most Commands committed in one transaction.

    The writer task starts on the first :meth:`submit` and ends when the queue is empty, so the
    writer needs no lifespan hook (``httpx.ASGITransport`` runs none).
    """

    authority: Authority
    _: KW_ONLY
    max_batch: int = 256
    on_commit: Callable[[set[str]], None] | None = None
    stall_s: float = WRITER_STALL_S
    batches: int = field(default=0, init=False)
    commands: int = field(default=0, init=False)
    requests: int = field(default=0, init=False)
    largest_batch: int = field(default=0, init=False)
    _queue: deque[_Request] = field(default_factory=deque, init=False)
    _urgent: deque[_Request] = field(default_factory=deque, init=False)
    _thread: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="missionweave-writer"),
        init=False,
    )
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _in_flight: int = field(default=0, init=False)
    _began: float | None = field(default=None, init=False)  # the transaction's start, monotonic

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise ValueError("max_batch must be at least 1")

    async def submit(self, commands: Sequence[Command]) -> list[SubmitResult]:
        """Queue ``commands`` (kept in order, never split across other requests' Commands).

        Returns:
            One :class:`SubmitResult` per Command, in order.

        Raises:
            sqlite3.Error: the store failed for this request's transaction.
        """
        if not commands:
            return []
        future: asyncio.Future[list[SubmitResult]] = asyncio.get_running_loop().create_future()
        urgent = any(c.type in URGENT for c in commands)
        (self._urgent if urgent else self._queue).append(_Request(list(commands), future))
        # One writer at a time: the check and the create run without an await in between, and
        # the writer leaves only when it sees an empty queue in the same step.
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="missionweave-batch-writer")
        return await future

    @property
    def queued(self) -> int:
        """Requests waiting for the writer."""
        return len(self._queue) + len(self._urgent)

    def oldest_wait_ms(self) -> float:
        """Milliseconds the longest-waiting queued request has waited (0 when none waits):
        the pressure by which reads are shed (:class:`~._read_lane.ReadLane`)."""
        heads = [q[0].queued_at for q in (self._queue, self._urgent) if q]
        return (time.monotonic() - min(heads)) * 1000 if heads else 0.0

    @property
    def in_flight(self) -> int:
        """Requests in the transaction being written now."""
        return self._in_flight

    def stalled(self) -> Unready | None:
        """A readiness probe: the transaction being written has run more than
        :attr:`stall_s` seconds (a stuck disk or database lock), or ``None``."""
        began = self._began
        if began is None or (held := time.monotonic() - began) <= self.stall_s:
            return None
        return Unready(
            NotReady.WRITER_STALLED,
            f"the writer has held one transaction for {held:.1f} s",
            {"held_s": round(held, 1), "threshold_s": self.stall_s, "queued": self.queued},
        )

    async def drain(self) -> None:
        """Wait until every queued request has been answered."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    async def _run(self) -> None:
        batch: list[_Request] = []
        try:
            while self._queue or self._urgent:
                batch = self._take()
                self._in_flight = len(batch)
                if batch:
                    await self._commit(batch)
                batch = []
                self._in_flight = 0
        except BaseException as exc:  # cancelled (loop shutdown): no caller may hang
            self._in_flight = 0
            self._began = None
            for req in [*batch, *self._urgent, *self._queue]:
                if not req.future.done():
                    req.future.set_exception(
                        exc if isinstance(exc, Exception) else RuntimeError("writer stopped")
                    )
            self._urgent.clear()
            self._queue.clear()
            raise

    def _take(self) -> list[_Request]:
        """The next transaction's requests: urgent ones first, then in arrival order."""
        batch: list[_Request] = []
        size = 0
        for queue in (self._urgent, self._queue):
            while queue and (not batch or size + len(queue[0].commands) <= self.max_batch):
                req = queue.popleft()
                if req.future.done():  # the caller went away before its turn: do not write it
                    continue
                batch.append(req)
                size += len(req.commands)
        return batch

    async def _commit(self, batch: list[_Request]) -> None:
        flat = [c for req in batch for c in req.commands]
        self._began = time.monotonic()
        # a long wait in the queue is the Authority's, not an owner's (MW-11.5-c)
        note_queued(self.authority, int((self._began - batch[0].queued_at) * 1000))
        try:
            contexts = [req.trace_context for req in batch for _ in req.commands]
            loop = asyncio.get_running_loop()
            call = contextvars.copy_context().run  # as asyncio.to_thread does
            results = await loop.run_in_executor(self._thread, call, self._write, flat, contexts)
        except Exception as exc:
            self._began = None
            # the database is away: each request alone would wait for it again; all get the
            # 503 now (a Command that did commit is answered by its id when sent again)
            if len(batch) > 1 and not isinstance(exc, StoreUnavailableError):
                # Do not let one request's failure fail its neighbours: retry each alone.
                # Commands of an already committed chunk come back as idempotent repeats.
                log.warning(
                    "batch of %d requests failed (%r); retrying one by one", len(batch), exc
                )
                for req in batch:
                    await self._commit([req])
                return
            if not isinstance(exc, StoreUnavailableError):
                log.exception("submit failed for %d commands", len(flat))
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(exc)
            return
        self._began = None
        at = 0
        for req in batch:
            part, at = results[at : at + len(req.commands)], at + len(req.commands)
            if not req.future.done():
                req.future.set_result(part)
            self.requests += 1
        touched = {e.group_id for r in results if not r.duplicate for e in r.events}
        if touched and self.on_commit is not None:
            self.on_commit(touched)

    def close(self) -> None:
        """Let the writer's thread end once its transaction is done (after :meth:`drain`)."""
        self._thread.shutdown(wait=False)

    def _write(
        self, commands: list[Command], contexts: list[otel_context.Context]
    ) -> list[SubmitResult]:
        # Runs in a worker thread; counters are only written here while the writer owns it.
        results: list[SubmitResult] = []
        for i in range(0, len(commands), self.max_batch):
            chunk = commands[i : i + self.max_batch]
            traced = contexts[i : i + self.max_batch]
            results.extend(self.authority.submit_many(chunk, trace_contexts=traced))
            self.batches += 1
            self.commands += len(chunk)
            self.largest_batch = max(self.largest_batch, len(chunk))
        return results


__all__ = ["URGENT", "BatchWriter", "Notifier"]
