"""Child processes die with their parent: one home for how.

A child started by MissionWeave (the Temporal dev server, the Authority's signature-verifier
process) must not outlive the process that started it, however that one ends — ``kill -9``
included, where no ``atexit`` or ``finally`` runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
#: ``prctl`` from the C library, loaded at import (in the parent: nothing is imported between
#: ``fork`` and ``exec``); ``None`` off Linux.
_LIBC = (
    ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    if sys.platform.startswith("linux")
    else None
)


def die_with_parent(sig: int = signal.SIGTERM, *, parent_pid: int | None = None) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux; a no-op
    elsewhere). Safe between ``fork`` and ``exec`` (it only calls ``prctl``).

    Args:
        sig: the signal to receive.
        parent_pid: the parent expected; when given and the parent is already another (it
            died before the call), ``sig`` is raised at once rather than never.
    """
    if _LIBC is None:
        return
    _LIBC.prctl(_PR_SET_PDEATHSIG, sig)
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)


def exit_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Exit this process (``os._exit``) once ``parent_pid`` is no longer its parent, checked
    every ``poll_s`` seconds by a daemon thread.

    For children that a pool may start from any thread (``ProcessPoolExecutor`` spawns from
    the submitting thread): the kernel's parent-death signal follows the *thread* that forked,
    so a short-lived thread's exit would kill the child too early.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


__all__ = ["die_with_parent", "exit_with_parent"]
