"""The commands that serve until Ctrl-C (``worker``, ``coordinator``): one shape for both.

Reach the servers (:func:`~._common.start_service`), start what the command serves, serve it
until it returns or a signal stops it (:func:`~._common.serve_until_signalled`), and end with a
last line saying it stopped — what a user who pressed Ctrl-C waits to read.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from ._common import serve_until_signalled, start_service

if TYPE_CHECKING:
    from temporalio.client import Client


@dataclass(frozen=True, slots=True)
class Servers:
    """Where a serving command finds its servers (``--authority-url``, ``--temporal-address``,
    ``--namespace``)."""

    authority_url: str
    temporal_address: str
    namespace: str


#: What a serving command serves: the coroutine that serves, and the function (or coroutine
#: function) that asks it to stop cleanly.
Serving = tuple[Coroutine[Any, Any, None], Callable[[], object]]
#: What a serving command starts once Temporal answers (given its client).
Start = Callable[["Client"], Serving]


async def serve_service(
    service_name: str,
    servers: Servers,
    start: Start,
    *,
    what: str,
    stop_timeout: float,
    after: Callable[[], None] | None = None,
) -> None:
    """Serve until stopped, then print ``<what> stopped`` on stderr.

    Args:
        service_name: the tracing service name (``missionweave-coordinator``, …).
        servers: the Authority and Temporal to reach first.
        start: given the Temporal client, what to serve and how to stop it.
        what: the served thing in the stop lines (``agent worker-0``, ``coordinator c``).
        stop_timeout: seconds a clean stop may take after the first signal.
        after: a check once serving ended; it raises :class:`~._common.CliError` when the stop
            was not clean, and then no ``stopped`` line is printed.

    Raises:
        CliError: a server does not answer, or ``after`` found the stop not clean.
        Exception: whatever serving raised.
    """
    client = await start_service(
        service_name, servers.authority_url, servers.temporal_address, servers.namespace
    )
    serve, stop = start(client)
    await serve_until_signalled(serve, stop, what=what, stop_timeout=stop_timeout)
    if after is not None:
        after()
    typer.echo(f"{what} stopped", err=True)


__all__ = ["Servers", "Serving", "Start", "serve_service"]
