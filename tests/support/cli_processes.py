"""Real ``missionweave`` processes for CLI tests: run a command (:func:`mw`, :func:`amw` from
async tests), start a long-running one (``dev up``, ``worker``) in its own process group, read
what it prints, Ctrl-C it; ``authority serve`` on a free port; the processes a test leaves.

Every :class:`Process` a test appends to the ``processes`` fixture (``tests/conftest.py``) is
killed at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from missionweave.authority.wire._readsig import SignedReads
from missionweave.dev import free_port
from missionweave.protocol import SigningKey

from .waits import WAIT_S

EXE = str(Path(sys.executable).with_name("missionweave"))
ROOT = Path(__file__).resolve().parents[2]
#: The terminal width of the CLI's tables in these tests: no cell wraps.
COLUMNS = "240"
#: How long ``dev up`` may take to print that the stack is up.
STARTUP_S = 60


def mw(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``missionweave *args`` to its end (from the repository root), with ``env`` over this
    process's environment and a terminal :data:`COLUMNS` wide (a table's width would otherwise
    follow wherever the suite runs: a terminal, a pipe, an xdist worker)."""
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": COLUMNS, **(env or {})},
        input=stdin,
        check=False,
    )


async def amw(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`mw` from an async test whose event loop runs the stack the command talks to (a
    blocking run would stall that loop: the command's query would wait for itself)."""
    return await asyncio.to_thread(mw, *args, env=env, stdin=stdin)


def one_line_error(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    """``r`` failed with exit status 2 and one ``error: …`` line containing ``needles``."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def stack_command(command: str, data: Path, *extra: str, ui: bool = True) -> list[str]:
    """The arguments of ``missionweave <command>`` (``dev up``, ``demo``) on the data directory
    ``data`` with every port chosen free (``0``), ``dev up``'s metrics port too unless
    ``extra`` names one; ``ui=False``: ``--headless``."""
    metrics = command == "dev up" and not {"--metrics-port", "--no-metrics"} & set(extra)
    return [
        *command.split(),
        "--data-dir",
        str(data),
        "--temporal-port",
        "0",
        *(("--ui-port", "0") if ui else ("--headless",)),
        "--authority-port",
        "0",
        *(("--metrics-port", "0") if metrics else ()),
        *extra,
    ]


def mission_spec(
    mission_id: str, title: str, items: list[dict[str, Any]], group: str = "demo"
) -> dict[str, Any]:
    """A MissionSpec as ``mission start`` reads it: offers live 5 s, re-offered after 0.3 s."""
    return {
        "group_id": group,
        "mission_id": mission_id,
        "title": title,
        "items": items,
        "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
    }


@contextlib.contextmanager
def listening_port() -> Iterator[int]:
    """A loopback port this process listens on while the block runs (taken for anyone else)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


# ----------------------------------------------------------------- the processes of the machine


def _live_processes() -> Iterator[tuple[int, int, str]]:
    """``(pid, parent pid, command line)`` of every live process but zombies."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, ppid = (entry / "stat").read_text().rsplit(") ", 1)[1].split()[:2]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError, ValueError):
            continue
        if state != "Z":
            yield int(entry.name), int(ppid), cmdline.decode(errors="replace")


def processes_mentioning(text: str) -> list[str]:
    """``pid: command line`` of live processes but this one that mention ``text`` (a test's
    tmp path, a run's directory)."""
    return [
        f"{pid}: {cmdline[:200]}"
        for pid, _, cmdline in _live_processes()
        if text in cmdline and pid != os.getpid()
    ]


def children(pid: int, needle: str = "") -> list[int]:
    """Pids of live children of ``pid`` whose command line mentions ``needle``."""
    return [c for c, parent, cmdline in _live_processes() if parent == pid and needle in cmdline]


def descendants(pid: int) -> set[int]:
    """Pids of every live process below ``pid`` (children, theirs, …)."""
    table = [(c, parent) for c, parent, _ in _live_processes()]
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, parent in table if parent in frontier} - found
        found |= frontier
    return found


# ------------------------------------------------------------------------------ processes


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

    def lines_until(self, pattern: str, timeout_s: float) -> list[str]:
        """The lines up to and including the first one matching ``pattern``, as printed."""
        lines: list[str] = []
        while True:
            try:
                lines.append(self.lines.get(timeout=timeout_s))
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}: {self.stderr()}") from None
            if re.search(pattern, lines[-1]):
                return lines

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


def eventually(
    probe: Callable[[], Any], what: str, proc: Process, timeout_s: float = WAIT_S
) -> Any:
    """Poll ``probe`` every 0.1 s until it returns something truthy (that value), failing with
    ``proc``'s stderr when ``proc`` exits or ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while not (got := probe()):
        if proc.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {what}: {proc.stderr()}")
        time.sleep(0.1)
    return got


@contextlib.contextmanager
def logged_process(args: list[str], log: Path) -> Iterator[subprocess.Popen[str]]:
    """``args`` running with its stdout and stderr both written to ``log`` (in this process's
    group: a signal to it reaches it alone); killed at the end if still running."""
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_for_output(
    proc: subprocess.Popen[str], log: Path, pattern: str, timeout_s: float = 240
) -> re.Match[str]:
    """The first match of ``pattern`` (a line, ``re.M``) in the output ``proc`` writes to
    ``log``, polled every 0.2 s until ``proc`` exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(), re.M)
        if found:
            return found
        time.sleep(0.2)
    found = re.search(pattern, log.read_text(), re.M)
    assert found, log.read_text()
    return found


@contextlib.contextmanager
def authority_serve(db: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``missionweave authority serve --db db *extra`` on a free loopback port, once its
    ``/healthz`` answers 200 (within :data:`~tests.support.waits.WAIT_S`): its URL and process (no
    metrics endpoint unless ``extra`` gives a port). Its stderr goes to ``db``'s name with
    ``.log``; it is terminated at the end."""
    port = free_port()
    log = db.with_suffix(".log")
    url = f"http://127.0.0.1:{port}"
    args = [EXE, "authority", "serve", "--db", str(db), "--metrics-port", "0", *extra]
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*args, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, f"server exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"server did not start: {log.read_text()}"
            time.sleep(0.1)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=WAIT_S)


# ------------------------------------------------------------------------------ dev up


@dataclass
class DevStack:
    """A running ``missionweave dev up``: its data directory, its process and what its banner
    said (``Temporal``, ``Authority``, ``Group``, … by key)."""

    data: Path
    process: Process
    info: dict[str, str]

    @property
    def temporal(self) -> str:
        return self.info["Temporal"].split()[0]

    @property
    def authority(self) -> str:
        return self.info["Authority"]

    @property
    def coordinator_key(self) -> Path:
        return self.data / "keys" / "coordinator.pem"

    @property
    def env(self) -> dict[str, str]:
        """This environment with the stack's addresses, as a user exports them (tables
        :data:`COLUMNS` wide)."""
        return {
            **os.environ,
            "COLUMNS": COLUMNS,
            "TEMPORAL_ADDRESS": self.temporal,
            "MISSIONWEAVE_AUTHORITY_URL": self.authority,
        }

    def add_agent(self, agent: str, agent_key: Path) -> subprocess.CompletedProcess[str]:
        """``group add``: ``agent`` in Group ``demo`` by its owner, its key created at
        ``agent_key`` when missing."""
        return mw(
            "group",
            "add",
            "--key",
            str(self.coordinator_key),
            "--group",
            "demo",
            "--agent-id",
            agent,
            "--agent-key",
            str(agent_key),
            "--create-key",
            env=self.env,
        )

    def read(self, what: str, **params: int) -> Any:
        """A signed read of Group ``demo``'s ``what`` (``agents``, ``events``) as its owner."""
        reads = SignedReads(SigningKey.from_file(self.coordinator_key))
        url = f"{self.authority}/v1/groups/demo/{what}"
        return httpx.get(url, timeout=5, auth=reads, params=params).json()

    def events(self) -> list[dict[str, Any]]:
        """Group ``demo``'s log (its first 1000 Events)."""
        events: list[dict[str, Any]] = self.read("events", after_sequence=0, limit=1000)["events"]
        return events


def dev_up(tmp_path: Path, processes: list[Process], *extra: str, ui: bool = False) -> DevStack:
    """``missionweave dev up`` on free ports under ``tmp_path/data`` (``ui=False``: headless),
    once its banner is printed."""
    data = tmp_path / "data"
    stack = Process([EXE, *stack_command("dev up", data, *extra, ui=ui)], tmp_path / "dev.log")
    processes.append(stack)
    return DevStack(data, stack, stack.read_until(r"^  Group ", STARTUP_S))
