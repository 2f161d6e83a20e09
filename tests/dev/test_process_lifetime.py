"""No process outlives the one that started it, however that one ends (``kill -9``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.cli_processes import (
    EXE,
    authority_serve,
    descendants,
    logged_process,
    stack_command,
    wait_for_output,
)
from tests.support.waits import WAIT_S


def _kill_and_outlive_none(proc: subprocess.Popen[Any], children: set[int], secs: float) -> None:
    """``kill -9`` ``proc``; fail unless every one of ``children`` is gone within ``secs``."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=WAIT_S)
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
    with authority_serve(tmp_path / "a.db") as (_, proc):
        deadline = time.monotonic() + 30
        while len(children := descendants(proc.pid)) < 2:  # the resource tracker, the verifier
            assert proc.poll() is None and time.monotonic() < deadline, "no verifier started"
            time.sleep(0.1)
        _kill_and_outlive_none(proc, children, 10)


def test_nothing_outlives_a_killed_dev_stack(tmp_path: Path) -> None:
    """``kill -9`` of ``missionweave dev up`` takes the Temporal dev server, the Authority's
    verifier process and multiprocessing's resource tracker with it (issue 11, item 14)."""
    log = tmp_path / "dev.log"
    args = [EXE, *stack_command("dev up", tmp_path / "data", ui=False)]
    with logged_process(args, log) as proc:
        wait_for_output(proc, log, "is up", timeout_s=90)
        children = descendants(proc.pid)
        assert len(children) >= 3, children  # the dev server, the verifier and its tracker
        _kill_and_outlive_none(proc, children, 15)
