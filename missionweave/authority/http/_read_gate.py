"""How many large reads the Authority serves at once: per reader key and in total.

A page of Events is streamed from the Store a chunk at a time, so one read holds at most
:data:`~._limits.READ_CHUNK_BYTES` of it in memory; the gate bounds how many run at once, so a
flood of signed reads by one member (or by many) costs the server a bounded amount of memory
and CPU, and ``/healthz`` and the writers keep answering. A read past a bound is answered at
once with 429 ``too_many_reads`` and a ``Retry-After`` header, never queued.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

#: Large reads (pages of Events, snapshots) one reader key may have in flight.
MAX_READS_PER_KEY = 4
#: Large reads in flight for all readers together.
MAX_READS_TOTAL = 32
#: Seconds a refused reader is told to wait (the ``Retry-After`` header).
RETRY_AFTER_S = 1


class ReadGate:
    """Counts large reads in flight; single event loop (no lock needed: no ``await`` inside).

    Args:
        per_key: most reads in flight per reader key (>= 1).
        total: most reads in flight in all (>= 1).

    Raises:
        ValueError: a bound below 1.
    """

    def __init__(self, per_key: int = MAX_READS_PER_KEY, total: int = MAX_READS_TOTAL) -> None:
        if per_key < 1 or total < 1:
            raise ValueError("read bounds must be >= 1")
        self.per_key, self.total = per_key, total
        self._by_key: Counter[str] = Counter()
        self._all = 0
        #: Reads refused so far (for operators and benchmarks).
        self.refused = 0

    @property
    def in_flight(self) -> int:
        """Reads in flight now."""
        return self._all

    def enter(self, key: str) -> dict[str, Any] | None:
        """Take a slot for ``key``: ``None`` when taken (call :meth:`leave` once done), else
        the refusal's detail (``scope`` ``key`` or ``total``, ``in_flight``, ``max``,
        ``retry_after_s``)."""
        refused = self.full(key)
        if refused is None:
            self._by_key[key] += 1
            self._all += 1
        return refused

    def full(self, key: str) -> dict[str, Any] | None:
        """The refusal :meth:`enter` would answer for ``key`` now (counted), else ``None``
        (nothing taken). Safe to ask before the read's signature is checked: only reads
        that were verified hold slots, so naming a key takes nothing from it — and a read
        refused so costs no signature check."""
        if self._by_key.get(key, 0) >= self.per_key:
            scope, now, most = "key", self._by_key[key], self.per_key
        elif self._all >= self.total:
            scope, now, most = "total", self._all, self.total
        else:
            return None
        self.refused += 1
        return {"scope": scope, "in_flight": now, "max": most, "retry_after_s": RETRY_AFTER_S}

    def leave(self, key: str) -> None:
        """Give back a slot taken by :meth:`enter`."""
        self._all -= 1
        self._by_key[key] -= 1
        if self._by_key[key] <= 0:
            del self._by_key[key]


__all__ = ["MAX_READS_PER_KEY", "MAX_READS_TOTAL", "RETRY_AFTER_S", "ReadGate"]
