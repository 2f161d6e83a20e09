"""A test seam: step this process's wall clock while it runs (the fault suite's ``clock`` kind,
issue 37). Read only when :data:`WALL_OFFSET_ENV` is set; never set it in production.

A real step of the system clock (``date -s``, an NTP step) would move every process of the
machine, and ``libfaketime`` (Debian's 0.9.10) either steps the monotonic clock with the wall
clock or, told not to (``FAKETIME_DONT_FAKE_MONOTONIC``), makes CPython's ``time.sleep`` fail
with ``EINVAL``. So ``authority serve`` started with ``MISSIONWEAVE_TEST_WALL_OFFSET_FILE=PATH``
adds the integer in that file (milliseconds, may be negative; re-read at most every 50 ms) to
``time.time()`` and ``time.time_ns()`` — what every wall-clock reading of the Authority goes
through (its ``LeaseClock``, Event times, signed-read freshness) — and leaves ``time.monotonic``
alone, as a real step does.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: The environment variable naming the offset file.
WALL_OFFSET_ENV = "MISSIONWEAVE_TEST_WALL_OFFSET_FILE"
#: Seconds an offset read is reused.
_REREAD_S = 0.05


def install_wall_offset() -> bool:
    """Wrap ``time.time``/``time.time_ns`` when :data:`WALL_OFFSET_ENV` is set; whether it
    was. A missing or unreadable file counts as offset 0."""
    name = os.environ.get(WALL_OFFSET_ENV)
    if not name:
        return False
    path = Path(name)
    real_ns = time.time_ns
    offset = [0]  # ms
    read_at = [-1.0]  # monotonic seconds of the last read

    def offset_ms() -> int:
        now = time.monotonic()
        if now - read_at[0] > _REREAD_S:
            try:
                offset[0] = int(path.read_text().strip() or 0)
            except (OSError, ValueError):
                offset[0] = 0
            read_at[0] = now
        return offset[0]

    def time_ns() -> int:
        return real_ns() + offset_ms() * 1_000_000

    time.time_ns = time_ns
    time.time = lambda: time_ns() / 1e9
    return True
