"""Benchmark: what a flood of reads by one member costs the Authority (issue 24, finding 5).

Usage: ``python bench/hostile_reads.py [--reads N] [--subscriptions S] [--events E]
[--pad BYTES] [--json]``

One ``missionweave authority serve`` process over a SQLite log of E Events of about 2×PAD bytes
each (progress reports carrying a checkpoint), so that one page of ``GET …/events?limit=1000``
is about 4 MB (the page bound). Then, all at once, from one member's key:

* N concurrent signed page reads of that page (``after_sequence=0&limit=1000``), each sent
  once; a read answered 429 (``too_many_reads``) is counted and retried after its
  ``Retry-After`` until every read has been served;
* S WebSocket subscriptions ``SUBSCRIBE afterSequence 0``, each read to the head (or answered
  ``CURSOR_TOO_OLD``);
* ``GET /healthz`` every 20 ms on its own connection.

Printed: the server's peak RSS (``VmHWM``) and its RSS before the load, ``/healthz`` p50/p99/max
in ms (probed from its own process; also over 3 s before the load: what the machine alone
costs), reads served, 429 answers, other failures, Events received
by the subscriptions, the seconds until everything was served and the server's CPU seconds
meanwhile. Nothing is asserted; the issue's bound is RSS <= 512 MB
with ``/healthz`` under 100 ms.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _figures import parser, print_figures
from _served import HealthzProbe, authority_serve, cpu_s, rss_kb
from websockets.asyncio.client import connect

from missionweave.authority import now_ms
from missionweave.authority.wire._readsig import sign_read
from missionweave.dev._devserver import free_port
from tests.support.serving import signed_subscribe
from tests.support.world import World, make_world


def _build(db: Path, events: int, pad: int) -> World:
    """A Group whose log holds ``events`` padded progress reports."""
    w = make_world(db)
    w.clock.now = now_ms()
    w.authorize("pad")
    offer = w.offer("pad", w.workers[0])
    assert w.accept(w.workers[0], "pad", offer).accepted
    w.start(w.workers[0], "pad")
    for i in range(events):
        if i % 200 == 0:
            w.clock.now = now_ms()
        body = w.leased("pad", report={"phase": "padding"}, checkpoint={"pad": f"{i % 10}" * pad})
        w.ok(w.workers[0], "progress.report", body)
    return w


async def _get(host: str, port: int, target: str, headers: dict[str, str]) -> tuple[int, int]:
    """One ``GET`` on its own connection (``Connection: close``): the status and the body's
    size, counted as it arrives and never kept (the client's own cost stays small)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        lines = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        size = 0
        while chunk := await reader.read(1 << 20):
            size += len(chunk)
        retry = 1.0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"retry-after:"):
                retry = float(line.split(b":", 1)[1])
        return status, size if status != 429 else -int(retry * 1000)
    finally:
        writer.close()


async def _read(url: str, target: str, w: World, out: dict[str, int]) -> None:
    host, port = url.removeprefix("http://").split(":")
    while True:
        headers = sign_read("GET", url + target, w.workers[1].key)
        try:
            status, size = await asyncio.wait_for(_get(host, int(port), target, headers), 300)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
            out["failed"] += 1
            return
        if status == 429:
            out["429"] += 1
            await asyncio.sleep(-size / 1000)
            continue
        if status == 200:
            out["served"] += 1
            out["bytes"] = max(out["bytes"], size)
        else:
            out["failed"] += 1
        return


async def _subscribe(ws_url: str, w: World, head: int, out: dict[str, int]) -> None:
    try:
        # no client pings: a busy bench process must not drop its own sockets
        async with connect(ws_url, max_size=None, ping_interval=None) as ws:
            await ws.send(json.dumps(signed_subscribe(w.workers[1], w.group, 0, now_ms())))
            for _ in range(head):
                text = await asyncio.wait_for(ws.recv(), 300)
                if str(text).startswith('{"type":"ERROR"'):
                    frame = json.loads(text)
                    out["too_old" if frame["code"] == "CURSOR_TOO_OLD" else "failed"] += 1
                    return
                out["events"] += 1
    except Exception:
        out["failed"] += 1


async def _load(url: str, ws_url: str, w: World, head: int, n: int, s: int, pid: int) -> dict:
    reads = {"served": 0, "429": 0, "failed": 0, "bytes": 0}
    subs = {"events": 0, "too_old": 0, "failed": 0}
    probe = HealthzProbe(url)
    await probe.start(3.0)  # the idle server first: what the machine alone costs a probe
    start = time.time()
    page = f"/v1/groups/{w.group}/events?after_sequence=0&limit=1000"
    t0, cpu0 = time.perf_counter(), cpu_s(pid)
    await asyncio.gather(
        *(_read(url, page, w, reads) for _ in range(n)),
        *(_subscribe(ws_url, w, head, subs) for _ in range(s)),
    )
    elapsed = time.perf_counter() - t0
    samples = await probe.stop()
    return {
        "page_bytes": reads["bytes"],
        "reads_served": reads["served"],
        "reads_429": reads["429"],
        "reads_failed": reads["failed"],
        "subscription_events": subs["events"],
        "subscriptions_too_old": subs["too_old"],
        "subscriptions_failed": subs["failed"],
        "seconds": round(elapsed, 2),
        "server_cpu_s": round(cpu_s(pid) - cpu0, 1),
        **HealthzProbe.figures(samples, start, start),
        "rss_peak_mb": round(rss_kb(pid, "VmHWM") / 1024, 1),
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--reads", type=int, default=500, help="concurrent page reads")
    p.add_argument("--subscriptions", type=int, default=100, help="subscriptions from 0")
    p.add_argument("--events", type=int, default=1000, help="Events in the log")
    p.add_argument("--pad", type=int, default=2100, help="checkpoint bytes per Event")
    p.add_argument("--server-log", type=Path, default=None, help="keep the server's stderr here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "authority.db"
        w = _build(db, args.events, args.pad)
        head, _ = w.authority.head(w.group)
        key = Path(tmp) / "authority.pem"
        w.authority.key.to_file(key)
        w.authority.close()
        port = free_port()
        url, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/v1/stream"
        log = Path(tmp) / "server.log"
        flags = ["--operator-key", w.coordinator.public_key]
        with authority_serve(db, key, port, flags, log, args.server_log) as proc:
            before = round(rss_kb(proc.pid, "VmRSS") / 1024, 1)
            figures: dict[str, Any] = {"events": head, "rss_before_mb": before}
            figures.update(
                asyncio.run(_load(url, ws_url, w, head, args.reads, args.subscriptions, proc.pid))
            )
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
