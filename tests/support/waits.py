"""Waiting in tests: on a condition, never on a guessed timing, with one generous bound.

A test waits for what must happen (a cursor reaching the head, a Mission's result, a process's
line) by polling it; :data:`WAIT_S` only bounds a wait that would otherwise hang, so it is
sized for a loaded 2-core machine running the suite on several workers, not for a quiet one —
a wait returns as soon as its condition holds, and the per-test timeout (``timeout`` in
``pyproject.toml``) stops a test whose waits add up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

#: Upper bound of any single wait for something that must happen, seconds.
WAIT_S = 60.0


async def until(what: str, probe: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    """Poll ``probe`` (sync or async) every 50 ms until it returns something truthy; that value.

    Raises:
        AssertionError: ``timeout_s`` passed first (the message names ``what``).
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        got = probe()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def eventually(cond: Callable[[], bool | Awaitable[bool]], timeout_s: float = WAIT_S) -> None:
    """Wait until ``cond()`` (sync or async) holds; :func:`until` without a name.

    Raises:
        AssertionError: ``timeout_s`` passed first.
    """
    await until("the condition", cond, timeout_s)


__all__ = ["WAIT_S", "eventually", "until"]
