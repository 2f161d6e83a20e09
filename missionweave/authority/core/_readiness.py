"""Whether the Authority can serve now: the one home of its readiness (``GET /readyz``).

Liveness (``/healthz``) says the process answers; readiness says it can do its work. A
:class:`Readiness` holds probes, each a cheap callable returning ``None`` (fine) or an
:class:`Unready` (code, reason, detail); :meth:`Authority.readiness
<missionweave.authority.Authority.readiness>` runs them. The Authority adds its own (the
store answers, its log is not forked, its disk is above the reserve); other parts add theirs
with :meth:`Readiness.add` (the HTTP front: its writer is not stalled).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ...protocol import RejectionCode
from ._forks import HeadWatch
from ._reserve import DiskReserve
from ._store import Store

log = logging.getLogger(__name__)


class NotReady(StrEnum):
    """Why the Authority is not ready (the ``code`` of each :class:`Unready`)."""

    #: the database does not answer
    STORE_UNAVAILABLE = RejectionCode.STORE_UNAVAILABLE.value
    #: the store's log differs from what this Authority signed or served
    LOG_FORKED = RejectionCode.LOG_FORKED.value
    #: the data directory's free space is below its reserve
    DISK_BELOW_RESERVE = "disk_below_reserve"
    #: the writer has held one transaction too long
    WRITER_STALLED = "writer_stalled"


@dataclass(frozen=True, slots=True)
class Unready:
    """One reason the Authority is not ready: a stable ``code``, a human ``reason``, and
    machine-readable ``detail``."""

    code: NotReady
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """As JSON: ``{"code", "reason", "detail"}``."""
        return {"code": str(self.code), "reason": self.reason, "detail": self.detail}


#: A readiness probe: cheap, thread-safe, never blocking long (it runs on every ``/readyz``).
Probe = Callable[[], Unready | None]


class Readiness:
    """The probes of one Authority. Thread-safe to run; add probes before serving."""

    def __init__(self) -> None:
        self._probes: list[Probe] = []

    def add(self, probe: Probe) -> Callable[[], None]:
        """Run ``probe`` in every check from now on; returns the function that removes it."""
        self._probes.append(probe)
        return lambda: self._probes.remove(probe)

    def reasons(self) -> list[Unready]:
        """Every probe's reason, in the order they were added (empty: ready). A probe that
        raises is logged and skipped: a broken probe must not take the Authority out."""
        out: list[Unready] = []
        for probe in list(self._probes):
            try:
                got = probe()
            except Exception:
                log.exception("readiness probe %r failed", probe)
                continue
            if got is not None:
                out.append(got)
        return out


def store_probe(store: Store, heads: HeadWatch) -> Probe:
    """The store answers (:meth:`Store.probe`) and its log is not forked (:class:`HeadWatch`)."""

    def probe() -> Unready | None:
        if heads.forks:
            return Unready(
                NotReady.LOG_FORKED,
                "the store's log lacks or differs from Events this Authority signed or served",
                {"forks": heads.forks},
            )
        why = store.probe()
        if why is None:
            return None
        return Unready(NotReady.STORE_UNAVAILABLE, why, {"store": store.location})

    return probe


def disk_probe(reserve: DiskReserve, extra: Iterable[str | Path] = ()) -> Probe:
    """Every directory ``reserve`` watches (the SQLite database's), and ``extra`` (the artifact
    store's root), has at least the reserve free — the same judge as the 507
    ``insufficient_storage`` refusals (:mod:`._reserve`)."""
    more = tuple(extra)

    def probe() -> Unready | None:
        short = reserve.shortfall(more)
        if short is None:
            return None
        return Unready(NotReady.DISK_BELOW_RESERVE, short.reason(), short._asdict())

    return probe


__all__ = [
    "NotReady",
    "Probe",
    "Readiness",
    "Unready",
    "disk_probe",
    "store_probe",
]
