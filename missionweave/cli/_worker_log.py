"""What ``missionweave worker`` prints: ``--log-level``, a handler's ``ctx.logger`` lines with
the WorkItem they are about, and one line per outage of Temporal or the Authority.

While a server is away, the Temporal SDK's core retries its polls and warns about each retry
(several multi-line warnings a second), and the Authority's stream reconnects quietly. Here
those repeats are dropped (:class:`QuietRetries`) and a :class:`ConnectionWatch` per server
says, once, that it is unreachable and, once, that it answers again and after how long.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum

from ..metrics import CORE_LOGGER

log = logging.getLogger("missionweave.connection")


class LogLevel(StrEnum):
    """``--log-level`` values."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


#: Seconds between two probes of a server.
PROBE_INTERVAL_S = 2.0
#: Seconds a probe may take before the server counts as unreachable.
PROBE_TIMEOUT_S = 3.0

#: A record repeating that a server is unreachable: the SDK core's retry warnings, the
#: Authority stream's reconnections.
_RETRY = re.compile(
    r"retried \d+ times|tcp connect error|Connection refused|transport error"
    r"|dropped: .*; reconnecting",
    re.IGNORECASE,
)
#: A MissionWeave record that only repeats that the Authority is unreachable (a Presence
#: report, a renewal not delivered: each is sent again by itself).
_UNREACHABLE = re.compile(r"AuthorityUnavailable|ConnectError|All connection attempts failed")
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class QuietRetries(logging.Filter):
    """Drops the records that only repeat that a server is unreachable (the
    :class:`ConnectionWatch` lines say it once per outage): the Temporal SDK core's retries
    (logger :data:`~missionweave.metrics.CORE_LOGGER`), the Authority stream's reconnections
    and MissionWeave's own records of a request that did not reach the Authority (sent again
    by itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if name == log.name:
            return True
        if name.startswith(CORE_LOGGER) or name.endswith("_subscriber"):
            return _RETRY.search(record.getMessage()) is None
        if name.startswith("missionweave."):
            return _UNREACHABLE.search(record.getMessage()) is None
        return True


class WorkItemFormatter(logging.Formatter):
    """``time LEVEL logger: message``, and ``[work_item_id]`` after a handler's lines
    (``ctx.logger`` records carry it)."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        work_item = getattr(record, "work_item_id", None)
        return f"{line} [{work_item}]" if work_item else line


def setup_worker_logging(level: str) -> None:
    """Log to stderr: MissionWeave's loggers (the handlers' ``missionweave.handler``
    included) at ``level``, everything else at WARNING, without the retry repeats.

    Args:
        level: a :class:`LogLevel` value.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(WorkItemFormatter(_FORMAT))
    handler.addFilter(QuietRetries())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("missionweave").setLevel(level.upper())


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.split(": tonic::")[0][:160]


class ConnectionWatch:
    """Probes one server every :data:`PROBE_INTERVAL_S` and logs (WARNING, logger
    ``missionweave.connection``) one line when it stops answering and one when it answers
    again, with the outage's length.

    Args:
        name: what to call it (``Temporal``, ``the Authority``).
        address: where it is.
        probe: an awaitable call that raises when the server does not answer.
        interval_s: seconds between probes.
    """

    def __init__(
        self,
        name: str,
        address: str,
        probe: Callable[[], Awaitable[object]],
        *,
        interval_s: float = PROBE_INTERVAL_S,
    ) -> None:
        self.name, self.address, self.probe = name, address, probe
        self.interval_s = interval_s
        self.down_since: float | None = None

    async def check(self) -> bool:
        """Probe once; log a change. Whether the server answered."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self.probe()
        except Exception as exc:
            if self.down_since is None:
                self.down_since = time.monotonic()
                log.warning(
                    "%s at %s is unreachable (%s); retrying quietly until it answers",
                    self.name, self.address, _why(exc),
                )  # fmt: skip
            return False
        if self.down_since is not None:
            away = time.monotonic() - self.down_since
            self.down_since = None
            log.warning("%s at %s answers again (away %.0f s)", self.name, self.address, away)
        return True

    async def run(self) -> None:
        """Probe until cancelled."""
        while True:
            await self.check()
            await asyncio.sleep(self.interval_s)


__all__ = [
    "ConnectionWatch",
    "LogLevel",
    "QuietRetries",
    "WorkItemFormatter",
    "setup_worker_logging",
]
