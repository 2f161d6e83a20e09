"""No process outlives the one that started it, however that one ends (``kill -9``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    pairs = [tuple(int(x) for x in line.split()) for line in out.splitlines() if line.strip()]
    found, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in pairs if p in frontier} - found
        found |= frontier
    return found


def _kill_and_outlive_none(proc: subprocess.Popen[bytes], children: set[int], secs: float) -> None:
    """``kill -9`` ``proc``; fail unless every one of ``children`` is gone within ``secs``."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + secs
    while any(_alive(c) for c in children):
        assert time.monotonic() < deadline, f"outlived {proc.args[1:3]}: {children}"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_verifier_process_dies_with_a_killed_authority(tmp_path: Path) -> None:
    """``authority serve`` starts its signature-verifier process (and multiprocessing's
    resource tracker) at start-up; a ``kill -9`` of the server takes both with it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = str(Path(sys.executable).with_name("missionweave"))
    proc = subprocess.Popen(
        [exe, "authority", "serve", "--db", str(tmp_path / "a.db"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        children: set[int] = set()
        while len(children) < 2:  # the resource tracker and the verifier
            assert proc.poll() is None and time.monotonic() < deadline, "no verifier started"
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            except httpx.TransportError:
                pass
            children = _children(proc.pid)
            time.sleep(0.1)
        _kill_and_outlive_none(proc, children, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_nothing_outlives_a_killed_dev_stack(tmp_path: Path) -> None:
    """``kill -9`` of ``missionweave dev up`` takes the Temporal dev server, the Authority's
    verifier process and multiprocessing's resource tracker with it (issue 11, item 14)."""
    exe = str(Path(sys.executable).with_name("missionweave"))
    log = tmp_path / "dev.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                exe,
                "dev",
                "up",
                "--data-dir",
                str(tmp_path / "data"),
                "--temporal-port",
                "0",
                "--ui-port",
                "0",
                "--authority-port",
                "0",
                "--headless",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while "is up" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        children = _children(proc.pid)
        assert len(children) >= 3, children  # the dev server, the verifier and its tracker
        _kill_and_outlive_none(proc, children, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
