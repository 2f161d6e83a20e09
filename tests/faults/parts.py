"""The parts of a MissionWeave deployment as separate processes, the way ``docker-compose.yml``
runs them: the Temporal dev server (state in a SQLite file, so a restart keeps every
workflow), the Authority, the coordinator and agents — or ``missionweave dev up`` with its own
Temporal child. Each runs in its own session and process group; the nemesis signals it there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

# The repository root (the parts run from it, with it on ``PYTHONPATH``), the ``missionweave``
# command of this interpreter's environment, and what is running on the machine.
from tests.support.cli_processes import EXE as MW
from tests.support.cli_processes import ROOT, children, processes_mentioning

__all__ = ["MW", "ROOT", "Part", "children", "processes_mentioning", "wait_for"]


class Part:
    """One long-running process, started again with the same command after a kill.

    Args:
        name: ``temporal``, ``authority``, ``coordinator``, ``worker-1`` …
        cmd: its command line.
        log: the file its stdout and stderr go to (appended to on each start).
        env: extra environment variables.
    """

    def __init__(
        self, name: str, cmd: list[str], log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.cmd = cmd
        self.log = log
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        """Start it (again)."""
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts + 1}: {' '.join(self.cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=self.env,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} never started"
        return self.proc.pid

    def alive(self) -> bool:
        """Whether it is running (a stopped process is alive)."""
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to its whole process group."""
        if self.alive():
            os.killpg(self.pid, sig)

    def kill(self) -> None:
        """``kill -9`` its process group, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout_s: float = 15) -> int | None:
        """Ctrl-C (SIGINT to the group, resumed first if frozen), SIGKILL after
        ``timeout_s``; its exit status (``None``: it never ran)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        # whatever it started in its group (none should be left)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.proc.returncode

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of its log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_for(probe: object, what: str, timeout_s: float) -> None:
    """Poll the callable ``probe`` every 0.1 s until it returns something truthy.

    Raises:
        TimeoutError: ``timeout_s`` passed first (naming ``what``).
    """
    assert callable(probe)
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:g} s")
        time.sleep(0.1)
