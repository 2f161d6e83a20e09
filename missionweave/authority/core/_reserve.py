"""The Authority's disk reserve: free space it keeps for the writes that must always commit
(issue 37, item 5; docs/authority.md "Disk space").

Below the reserve on a directory the Authority writes to — its SQLite database's, its
filesystem artifact store's — it refuses new content and new work with ``insufficient_storage``
(507) and still commits lease renewals and the Commands that end work (:mod:`._upkeep`), so
that a full disk never costs a healthy owner its lease. :func:`reserve_status` is the check a
readiness probe reports.

With PostgreSQL the database's disk is not the Authority's to see: only local directories (the
artifact store's) are watched, and a full database disk shows as store errors.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ...protocol import Rejection, RejectionCode

#: The free space kept by default on each watched directory, bytes.
DEFAULT_RESERVE_BYTES = 64 * 1024 * 1024

#: ``shutil.disk_usage``'s shape: what a free-space probe answers (``.free`` in bytes).
Probe = Callable[[str], Any]


class Shortfall(NamedTuple):
    """A watched directory below the reserve (or that would be, once ``needed_bytes`` are
    written): its ``path``, ``free_bytes`` and the ``reserve_bytes`` it should keep."""

    path: str
    free_bytes: int
    reserve_bytes: int
    needed_bytes: int = 0

    def reason(self) -> str:
        """One line for a person: where, how much is free, what is kept."""
        mib = 1024 * 1024
        what = f"{self.path} has {self.free_bytes / mib:.1f} MiB free"
        if self.needed_bytes:
            what += f"; {self.needed_bytes / mib:.1f} MiB more would take it"
        return f"{what} below the Authority's disk reserve of {self.reserve_bytes / mib:.1f} MiB"

    def rejection(self) -> Rejection:
        """The structured ``insufficient_storage`` refusal (answered 507)."""
        return Rejection(
            code=RejectionCode.INSUFFICIENT_STORAGE,
            reason=f"{self.reason()}: new content and new work are refused until space is freed",
            detail=self._asdict(),
        )


@dataclass(slots=True)
class DiskReserve:
    """The reserve kept on a set of directories.

    Attributes:
        reserve_bytes: the free space kept on each; 0 disables the check.
        paths: the watched directories (a missing one is judged by its nearest existing
            ancestor: where it will be created).
        probe: the free-space probe (``shutil.disk_usage``; tests stand in for a full disk).
    """

    reserve_bytes: int = DEFAULT_RESERVE_BYTES
    paths: list[str] = field(default_factory=list)
    probe: Probe = shutil.disk_usage

    def watch(self, path: str | Path) -> None:
        """Watch ``path`` too (a directory, or a file whose directory is meant)."""
        p = Path(path)
        text = str(p if p.is_dir() else p.parent)
        if text not in self.paths:
            self.paths.append(text)

    def shortfall(self, extra: Iterable[str | Path] = (), needed: int = 0) -> Shortfall | None:
        """The first watched directory (then ``extra``) that is below the reserve, or would be
        once ``needed`` more bytes are written there; ``None`` when none is."""
        if self.reserve_bytes <= 0:
            return None
        for path in (*self.paths, *map(str, extra)):
            free = int(self.probe(str(_existing(Path(path)))).free)
            if free - needed < self.reserve_bytes:
                return Shortfall(path, free, self.reserve_bytes, needed)
        return None


def _existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def reserve_status(reserve: DiskReserve, extra: Iterable[str | Path] = ()) -> str | None:
    """Why the Authority is short of disk, for a readiness probe: ``None`` when every watched
    directory (the SQLite database's, and ``extra``, e.g. the artifact store's root) has at
    least the reserve free; else one line naming the directory and its free space."""
    found = reserve.shortfall(extra)
    return None if found is None else found.reason()


__all__ = ["DEFAULT_RESERVE_BYTES", "DiskReserve", "Shortfall", "reserve_status"]
