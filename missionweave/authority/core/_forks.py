"""A failover must not lose what the Authority signed: the heads it signed or served, and the
check that the store still holds them after a reconnect (issue 37, item 6).

With PostgreSQL failover to an asynchronously replicated standby, the new primary can lack
Events this Authority already signed and delivered; appending there would reuse their sequence
numbers under other hashes, and subscribers would hold a forked log. So the Authority keeps, in
memory, the newest ``(seq, hash)`` per Group that it committed or sent to a reader
(:class:`HeadWatch`), and when the store reconnects it reads each of them back
(:meth:`HeadWatch.check`): a missing or different Event raises :class:`StoreForkedError`, which
refuses the store for good (every statement raises it, readiness answers 503 ``log_forked``).
Only synchronous replication makes a failover safe (docs/authority.md, "PostgreSQL restart or
failover").
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ._store import Store, StoreForkedError


class HeadWatch:
    """The newest Event per Group this process signed or served: ``group_id → (seq, hash)``.

    Thread-safe: the writer notes commits, the readers note what they send.
    """

    def __init__(self) -> None:
        self._heads: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()
        #: The forks found by the last :meth:`check` (empty: none).
        self.forks: list[dict[str, Any]] = []

    def note(self, group_id: str, seq: int, event_hash: str) -> None:
        """Remember that Event ``seq`` of ``group_id`` (hash ``event_hash``) left this process."""
        with self._lock:
            held = self._heads.get(group_id)
            if held is None or seq > held[0]:
                self._heads[group_id] = (seq, event_hash)

    def note_rows(self, group_id: str, after_sequence: int, rows: list[str]) -> None:
        """Remember the last of ``rows`` (stored Event JSON texts of sequences
        ``after_sequence + 1 …``), read for a reader."""
        if rows:
            last = json.loads(rows[-1])
            self.note(group_id, after_sequence + len(rows), str(last["hash"]))

    def held(self) -> dict[str, tuple[int, str]]:
        """A copy of the heads held."""
        with self._lock:
            return dict(self._heads)

    def check(self, store: Store) -> None:
        """Read each held head back from ``store`` (called on a new connection after a lost
        one, before anything else runs on it).

        Raises:
            StoreForkedError: some Group's log in the store lacks the held Event or holds
                another one at its sequence; :attr:`forks` lists them.
        """
        forks: list[dict[str, Any]] = []
        for group_id, (seq, event_hash) in sorted(self.held().items()):
            row = store.one("events.one", group_id, seq, group_id, seq)
            found = None if row is None else str(json.loads(row[0])["hash"])
            if found != event_hash:
                forks.append(
                    {"group_id": group_id, "seq": seq, "held_hash": event_hash, "store_hash": found}
                )
        self.forks = forks
        if forks:
            raise StoreForkedError(forks)


__all__ = ["HeadWatch"]
