"""The Authority's Event signatures, made for a whole transaction at its end, on two threads
(issue 27, appends at the bound).

An Event's hash covers ``prev_hash`` but not its signature, so the writer builds the hash chain
in order and leaves the Ed25519 signatures (about 40 µs each) for the end of the transaction:
:func:`seal` then signs every Event of the batch before the rows are inserted, half of them on a
helper thread while the writer signs the other half (``cryptography`` releases the GIL while it
signs). No Event is written, returned or published unsigned.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...protocol import Event, SigningKey

#: An Event row as the Store inserts it: (group_id, seq, event_id, type, work_item_id, data).
EventRow = tuple[str, int, str, str, str | None, str]
#: Fewer Events than this are signed on the writer's thread alone.
PARALLEL_MIN = 8

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


@dataclass(slots=True)
class Unsigned:
    """An Event built and hashed, not yet signed.

    ``event`` is the Event returned to the caller, its ``signature`` empty until :func:`seal`;
    ``row`` its row's other columns; ``before`` and ``after`` the stored JSON text either side of
    the signature's value.
    """

    event: Event
    row: tuple[str, int, str, str, str | None]
    before: str
    after: str

    def signed(self, signature: str) -> EventRow:
        # ``event`` was built by ``model_construct`` in this transaction and nobody has read
        # its signature yet: it is completed in place, once, before it leaves the writer.
        object.__setattr__(self.event, "signature", signature)
        return (*self.row, f"{self.before}{signature}{self.after}")


def _sign(key: SigningKey, hashes: Sequence[str]) -> list[str]:
    return [key.sign(bytes.fromhex(h)) for h in hashes]


def seal(key: SigningKey, unsigned: Sequence[Unsigned]) -> list[EventRow]:
    """Sign every Event of ``unsigned`` with ``key``: the rows to insert, in order.

    Raises:
        Exception: whatever signing raised (the caller rolls the transaction back).
    """
    global _pool
    hashes = [u.event.hash for u in unsigned]
    if len(hashes) < PARALLEL_MIN:
        signatures = _sign(key, hashes)
    else:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-signer")
        half = len(hashes) // 2
        first = _pool.submit(_sign, key, hashes[:half])
        rest = _sign(key, hashes[half:])
        signatures = first.result() + rest
    return [u.signed(s) for u, s in zip(unsigned, signatures, strict=True)]
