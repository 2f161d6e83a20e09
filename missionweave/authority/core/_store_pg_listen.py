"""``LISTEN missionweave_events``: other replicas' commits wake this one's readers, and a lost
LISTEN connection is re-established (PostgreSQL restart or failover).

:class:`EventListener` holds one connection of its own, taken from a one-connection
:class:`psycopg_pool.ConnectionPool` that reconnects with backoff. Notifications sent while it
was disconnected are lost, so after each reconnect it calls ``on_resume()``: the server wakes
every Group's pumps, which read the log itself and catch their subscribers up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ...metrics import add, series

log = logging.getLogger(__name__)

#: The NOTIFY channel of new Events; the payload is the Group id.
CHANNEL = "missionweave_events"
#: Seconds between the listener's looks at its stop flag (and its waits for a connection).
_TICK_S = 0.5


def connection_options() -> dict[str, Any]:
    """libpq options of every Authority connection: give up connecting after 5 s, and notice a
    server that vanished without closing the socket (a failover's old primary) within about
    25 s through TCP keepalives (ignored on a Unix socket)."""
    return {
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
    }


class EventListener:
    """Calls ``on_group(group_id)`` from a thread of its own each time any replica commits
    Events of a Group (``LISTEN missionweave_events``), and ``on_resume()`` after each
    reconnect of its connection.

    Args:
        url: the database URL.
        on_group: called with the Group id; must be thread-safe (e.g. hand over to a loop with
            ``call_soon_threadsafe``).
        on_resume: called (thread-safe too) once LISTEN is in force again after the connection
            was lost: notifications may have been missed meanwhile.

    Raises:
        psycopg_pool.PoolTimeout: the first connection cannot be made within 30 s.
    """

    def __init__(
        self,
        url: str,
        on_group: Callable[[str], object],
        on_resume: Callable[[], object] | None = None,
    ) -> None:
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=1,
            kwargs={"autocommit": True, **connection_options()},
            reconnect_timeout=10.0,
            name="missionweave-listen",
            open=False,
        )
        self._pool.open(wait=True, timeout=30)
        self._on_group = on_group
        self._on_resume = on_resume
        self._stop = threading.Event()
        self._listening = threading.Event()
        self.reconnects = 0
        self._thread = threading.Thread(target=self._run, name="mw-pg-listen", daemon=True)
        self._thread.start()

    @property
    def listening(self) -> bool:
        """Whether LISTEN is in force now."""
        return self._listening.is_set()

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                conn = self._pool.getconn(timeout=_TICK_S)
            except PoolTimeout:
                continue  # the pool is reconnecting in the background
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                self._listening.set()
                if not first:
                    self.reconnects += 1
                    add(series.AUTHORITY_STORE_RECONNECTS, role="listen")
                    log.warning("LISTEN %s re-established: waking every reader", CHANNEL)
                    if self._on_resume is not None:
                        self._on_resume()
                first = False
                while not self._stop.is_set():
                    for n in conn.notifies(timeout=_TICK_S):
                        self._on_group(n.payload)
            except psycopg.Error as exc:
                if not self._stop.is_set():
                    log.warning("LISTEN connection lost (%s); reconnecting", exc)
            finally:
                self._listening.clear()
                # a broken connection is discarded and replaced by the pool; a sound one
                # (stop) is put back and closed with it
                self._pool.putconn(conn)

    def close(self) -> None:
        """Stop listening and close the connection."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._pool.close()


__all__ = ["CHANNEL", "EventListener", "connection_options"]
