"""What the benchmarks that load a real ``missionweave authority serve`` share: the process
started over a database and stopped after, a ``/healthz`` probe in its own process, and the
server's RSS and CPU read from ``/proc``."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int, field: str) -> int:
    """``field`` (``VmRSS``, ``VmHWM``) of process ``pid``, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def probe(url: str, ready: Any, stop: Any, out: Any) -> None:
    """``GET /healthz`` every 20 ms until ``stop`` is set; the latencies (ms) go to ``out``.
    Its own process: the load's client work must not delay the probe's clock."""
    lat: list[tuple[float, float]] = []  # (wall time, ms)
    with httpx.Client(timeout=30) as http:
        while not stop.is_set():
            t = time.perf_counter()
            http.get(url + "/healthz")
            lat.append((time.time(), (time.perf_counter() - t) * 1000))
            ready.set()
            time.sleep(0.02)
    out.put(lat)


class HealthzProbe:
    """:func:`probe` in a spawned process: :meth:`start` it (then the idle server is probed
    for ``idle_s``), :meth:`stop` it for its samples; :meth:`figures` sums them up."""

    def __init__(self, url: str) -> None:
        ctx = mp.get_context("spawn")
        self._ready, self._stop, self._out = ctx.Event(), ctx.Event(), ctx.Queue()
        self._proc = ctx.Process(target=probe, args=(url, self._ready, self._stop, self._out))

    async def start(self, idle_s: float) -> None:
        """Start probing; return after ``idle_s`` of it (what the machine alone costs)."""
        self._proc.start()
        await asyncio.to_thread(self._ready.wait, 60)
        await asyncio.sleep(idle_s)

    async def stop(self) -> list[tuple[float, float]]:
        """Stop probing; every sample, ``(wall time, ms)``."""
        self._stop.set()
        samples: list[tuple[float, float]] = await asyncio.to_thread(self._out.get)
        self._proc.join()
        return samples

    @staticmethod
    def figures(samples: list[tuple[float, float]], start: float, idle_end: float) -> dict:
        """``/healthz`` p50/p99/max (ms) and the count of the samples from ``start`` (wall
        time), and p50/p99 of those before ``idle_end`` (the idle server)."""
        lat = [ms for t, ms in samples if t >= start]
        idle = [ms for t, ms in samples if t < idle_end]
        none = [0.0] * 99
        q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else none
        qi = statistics.quantiles(idle, n=100, method="inclusive") if len(idle) > 1 else none
        return {
            "healthz_p50_ms": round(q[49], 1),
            "healthz_p99_ms": round(q[98], 1),
            "healthz_max_ms": round(max(lat, default=0.0), 1),
            "healthz_samples": len(lat),
            "healthz_idle_p50_ms": round(qi[49], 1),
            "healthz_idle_p99_ms": round(qi[98], 1),
        }


@contextlib.contextmanager
def authority_serve(
    db: Path, key: Path, port: int, args: list[str], log: Path, keep: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``missionweave authority serve`` over ``db`` on 127.0.0.1:``port`` with ``args`` more,
    its stderr in ``log`` (copied to ``keep`` at the end, if given) and no metrics server, once
    ``/healthz`` answers; terminated after the block."""
    url = f"http://127.0.0.1:{port}"
    exe = str(Path(sys.executable).with_name("missionweave"))
    cmd = [exe, "authority", "serve", "--db", str(db), "--key", str(key), "--port", str(port)]
    cmd += ["--metrics-port", "0"]  # no metrics server: its fixed port may be taken
    with log.open("w") as err:
        proc = subprocess.Popen([*cmd, *args], stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(url + "/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
            yield proc
        finally:
            proc.terminate()
            proc.wait(timeout=15)
            if keep is not None:
                keep.write_text(log.read_text())
