"""Fixtures of the agent runtime's tests (``tests/worker``).

* ``proxy`` — a :class:`~tests.loopback_proxy.DroppingProxy` in front of ``live`` (the
  Authority's server): a test cuts and restores the agent's connections with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.loopback_proxy import DroppingProxy
from tests.serving import LiveServer


@pytest_asyncio.fixture
async def proxy(live: LiveServer) -> AsyncIterator[DroppingProxy]:
    """A proxy to ``live``'s port, stopped at the end."""
    p = DroppingProxy(live.port)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()
