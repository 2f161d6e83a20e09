"""Real ``missionweave`` processes for CLI tests: run a command (:func:`mw`, :func:`amw` from
async tests), start a long-running one (``dev up``, ``worker``) in its own process group, read
what it prints, Ctrl-C it.

``processes`` is a fixture: every :class:`Process` a test appends is killed at its end.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

EXE = str(Path(sys.executable).with_name("missionweave"))
ROOT = Path(__file__).resolve().parent.parent
#: How long ``dev up`` may take to print that the stack is up.
STARTUP_S = 60


def mw(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``missionweave *args`` to its end (from the repository root)."""
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        input=stdin,
        check=False,
    )


def one_line_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    """``r`` failed with exit status 2 and one ``error: …`` line containing ``needles``."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (e.g. a test's tmp path)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().split(") ", 1)[1][:1]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(f"{proc.name}: {cmdline}")
    return found


class Process:
    """A child process whose stdout lines are read by a thread (never blocks the test)."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log.open("w")
        # Its own process group, as a terminal gives it: Ctrl-C reaches it and its children.
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, out: IO[str]) -> None:
        for line in out:
            self.lines.put(line.rstrip("\n"))

    def read_until(self, pattern: str, timeout_s: float) -> dict[str, str]:
        """Lines up to one matching ``pattern``; every ``key  value`` line seen, by key."""
        seen: dict[str, str] = {}
        while True:
            try:
                line = self.lines.get(timeout=timeout_s)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}: {self.stderr()}") from None
            m = re.match(r"^  (\S+(?: \S+)?)\s{2,}(.*)$", line)
            if m:
                seen[m.group(1)] = m.group(2)
            if re.search(pattern, line):
                return seen

    def stderr(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group."""
        os.killpg(self.proc.pid, sig)

    def interrupt(self, timeout_s: float = 60) -> int:
        """Ctrl-C: SIGINT to the whole process group; the exit status."""
        self.signal(signal.SIGINT)
        return self.proc.wait(timeout=timeout_s)

    def close(self) -> None:
        if self.proc.poll() is None:  # SIGKILL ends stopped (SIGSTOP) members of the group too
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def eventually(probe: Callable[[], Any], what: str, proc: Process, timeout_s: float = 30) -> Any:
    """Poll ``probe`` every 0.1 s until it returns something truthy (that value), failing with
    ``proc``'s stderr when ``proc`` exits or ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while not (got := probe()):
        if proc.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {what}: {proc.stderr()}")
        time.sleep(0.1)
    return got


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    """Processes started by a test; any still running at its end is killed."""
    started: list[Process] = []
    yield started
    for p in started:
        p.close()


async def amw(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`mw` from an async test whose event loop runs the stack the command talks to (a
    blocking run would stall that loop: the command's query would wait for itself)."""
    return await asyncio.to_thread(mw, *args, env=env, stdin=stdin)
