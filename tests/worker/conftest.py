"""Fixtures of the agent runtime's tests (``tests/worker``).

* ``proxy`` — a :class:`~tests.support.loopback_proxy.DroppingProxy` in front of ``live`` (the
  Authority's server): a test cuts and restores the agent's connections with it.
* ``client`` — an :class:`~missionweave.authority.client.AuthorityClient` of ``live`` signing
  as ``world``'s coordinator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from missionweave.authority.client import AuthorityClient
from tests.support.loopback_proxy import DroppingProxy
from tests.support.serving import LiveServer
from tests.support.world import World


@pytest_asyncio.fixture
async def proxy(live: LiveServer) -> AsyncIterator[DroppingProxy]:
    """A proxy to ``live``'s port, stopped at the end."""
    p = DroppingProxy(live.port)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


@pytest_asyncio.fixture
async def client(live: LiveServer, world: World) -> AsyncIterator[AuthorityClient]:
    """A client of ``live`` signing as ``world``'s coordinator, closed at the end."""
    async with AuthorityClient(live.url, signing_key=world.coordinator.key) as c:
        yield c
