"""A small filesystem for the tests of a full disk (issue 37): a tmpfs mount where the test may
mount one, else a stand-in the test must name."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_disk(where: Path, mib: int) -> Iterator[tuple[Path, str]]:
    """A directory on a ``mib`` MiB filesystem: a tmpfs mount where this process may mount
    one (root, as on the development machine), else a plain directory whose free space the
    test stands in for (``"stand-in"``): its free-space probe is replaced. Yields the
    directory and which it is (``"tmpfs"`` or ``"stand-in"``)."""
    where.mkdir()
    mounted = (
        os.geteuid() == 0
        and shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(where)],
            capture_output=True,
        ).returncode
        == 0
    )
    try:
        yield where, "tmpfs" if mounted else "stand-in"
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], check=True)


def fill(where: Path, leave_bytes: int = 0) -> Path:
    """A file in ``where`` taking its free space down to about ``leave_bytes`` (0: to the
    last byte — written until the filesystem says ``ENOSPC``)."""
    filler = where / "filler"
    free = shutil.disk_usage(where).free
    with filler.open("wb", buffering=0) as f:
        f.write(b"\0" * max(0, free - leave_bytes))
        if leave_bytes == 0:  # the last blocks the estimate left
            for size in (65_536, 1):
                with contextlib.suppress(OSError):
                    while True:
                        f.write(b"\0" * size)
    return filler
