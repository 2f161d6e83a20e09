"""Events read a chunk at a time and streamed on, never built whole (section 16 delivery).

A page of ``GET /v1/groups/{g}/events`` (up to :data:`~._limits.MAX_PAGE_BYTES`) and a
WebSocket replay are read from the Store in chunks of about :data:`~._limits.READ_CHUNK_BYTES`
and sent as the Events' stored JSON, unparsed: one read holds one chunk in memory, however
large its page, and costs no parse or re-serialization of what it sends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from ..core import Authority
from ..wire import CursorTooOldError, UnknownGroupError
from ._limits import READ_CHUNK_BYTES
from ._read_lane import ReadLane

#: Rows asked of the Store for a first chunk (later ones follow the rows' measured size).
FIRST_CHUNK_ROWS = 64


class EventReader:
    """One Group's Events after a sequence, read off the event loop a chunk at a time, in the
    read lane's threads (never in front of a Command: :mod:`._read_lane`).

    Args:
        authority: the Authority.
        group_id: the Group.
        after: the last sequence already delivered.
        lane: the read lane the chunks are read in.

    Attributes:
        last: the sequence of the last row read.
    """

    def __init__(self, authority: Authority, group_id: str, after: int, lane: ReadLane) -> None:
        self.authority, self.group_id, self.last, self.lane = authority, group_id, after, lane
        self._rows = FIRST_CHUNK_ROWS

    async def chunk(
        self, most: int = 10_000, page_left: int | None = None, *, first_free: bool = True
    ) -> tuple[list[str], bool, bool]:
        """The next rows (at most ``most``, about :data:`READ_CHUNK_BYTES`), as
        :meth:`~missionweave.authority.Authority.event_chunk` returns them: ``(rows,
        page_full, more)``.

        Raises:
            UnknownGroupError, CursorTooOldError: as ``event_chunk``.
        """
        n = max(1, min(most, self._rows, 10_000))
        rows, full, more = await self.lane.run(
            self.authority.event_chunk,
            self.group_id,
            self.last,
            n,
            READ_CHUNK_BYTES,
            page_left,
            first_free=first_free,
        )
        if rows:  # ask for about a chunk's worth of rows of this size next time
            mean = max(1, sum(map(len, rows)) // len(rows))
            self._rows = max(1, min(10_000, READ_CHUNK_BYTES // mean + 1))
            self.last += len(rows)
        return rows, full, more


async def page_body(
    reader: EventReader,
    first: list[str],
    first_more: bool,
    limit: int,
    max_bytes: int,
) -> AsyncIterator[bytes]:
    """The JSON body ``{"events": [...], "head_seq": N}`` of one page, a chunk at a time.

    ``first`` is the page's first chunk, read before the answer started (so that an unknown
    Group or a cursor below the online window is still answered with its status). The page
    ends at ``limit`` Events, at ``max_bytes`` of them, or at the head; a Group archived or
    gone meanwhile ends it early (the reader pages on and is answered then).
    """
    yield b'{"events":['
    sent, size, rows, more = 0, 0, first, first_more
    while True:
        if rows:  # one send per chunk: few passes through the event loop per page
            yield (b"," if sent else b"") + ",".join(rows).encode()
            sent += len(rows)
            size += sum(map(len, rows))
        if not more or sent >= limit or size >= max_bytes:
            break
        try:
            rows, full, more = await reader.chunk(limit - sent, max_bytes - size, first_free=False)
        except (CursorTooOldError, UnknownGroupError):
            break
        if full:
            more = False
        if not rows:
            break
    try:
        head_seq, _ = await reader.lane.run(reader.authority.head, reader.group_id)
    except UnknownGroupError:
        head_seq = reader.last
    yield b'],"head_seq":' + json.dumps(head_seq).encode() + b"}"


__all__ = ["FIRST_CHUNK_ROWS", "EventReader", "page_body"]
