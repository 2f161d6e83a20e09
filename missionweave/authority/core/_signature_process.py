"""Command signature verification off the writer: a process beside the Authority's writer.

Verifying an Ed25519 signature needs the Command's RFC 8785 canonical bytes, and canonicalizing is
pure-Python work that would hold the GIL the writer needs. So batches are verified in a separate
process (started with ``spawn``, lazily, shared by every Authority of this process) while the
writer applies the same batch optimistically; the writer waits for the verdicts before it
commits, and redoes the batch with inline verification if any signature it relied on failed.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import os
import signal
import threading
from concurrent.futures import Future, ProcessPoolExecutor

from ..._lifetime import exit_with_parent
from ...protocol import canonical_bytes, verify

log = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_broken = False


def verify_batch(items: list[tuple[str, str]]) -> list[bool]:
    """For each ``(command_json, public_key)``: whether the Command's signature verifies.

    ``command_json`` must be ``Command.model_dump_json()`` output (all fields present).

    Runs in the verifier process. Never raises for bad input: an unparsable Command is ``False``.
    """
    out: list[bool] = []
    for raw, key in items:
        # ``raw`` is ``Command.model_dump_json()`` (every field present), so the parsed dict less
        # its signature is exactly what the actor signed; no model round trip is needed.
        try:
            value = json.loads(raw)
            signature = value.pop("signature")
            out.append(verify(key, signature, canonical_bytes(value)))
        except Exception:  # any malformed input simply does not verify
            out.append(False)
    return out


def _child_of(parent_pid: int) -> None:
    """In the verifier process: Ctrl-C reaches the whole process group, but only the parent
    decides when to stop (it shuts the pool down at exit); and when the parent dies without
    that (``kill -9``), this process dies too instead of lingering with parent PID 1."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent(parent_pid)


def submit(items: list[tuple[str, str]]) -> Future[list[bool]] | None:
    """Start verifying ``items`` in the verifier process; ``None`` if it cannot run here."""
    global _pool, _broken
    with _lock:
        if _broken:
            return None
        if _pool is None:
            try:
                _pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_child_of,
                    initargs=(os.getpid(),),
                )
                atexit.register(shutdown)
            except (OSError, ValueError) as exc:  # pragma: no cover - platform without processes
                log.warning("verifier process unavailable (%s); verifying inline", exc)
                _broken = True
                return None
        try:
            return _pool.submit(verify_batch, items)
        except RuntimeError as exc:  # broken pool, or spawn impossible from this __main__
            log.warning("verifier process unusable; verifying inline from now on: %s", exc)
            _broken = True
            _pool = None
            return None


def warm_up(timeout_s: float = 30.0) -> bool:
    """Start the verifier process now and wait (at most ``timeout_s`` seconds) until it answers,
    so that the first large batch does not wait for it to spawn and import (1–2 s). Blocking:
    call it from a thread. Returns whether the process answered; never raises."""
    pending = submit([])
    if pending is None:
        return False
    try:
        pending.result(timeout=timeout_s)
    except Exception as exc:  # a broken pool is noticed again, and handled, by submit()
        log.warning("verifier process did not start: %s", exc)
        return False
    return True


def shutdown() -> None:
    """Stop the verifier process (registered with :mod:`atexit`)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=True, cancel_futures=True)
            _pool = None
