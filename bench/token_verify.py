"""Benchmark: capability-token verifications per second (MW-11.3-d).

Usage: ``python bench/token_verify.py [--seconds S] [--json]``

What is measured, in one process, on a real Authority (SQLite file) holding one leased
WorkItem and its token:

* **in_process/s** — :func:`missionweave.authority.verify_capability_token` on a genuine token:
  canonicalize + SHA-256 its fields, verify the Authority's Ed25519 signature, read its row
  joined with its lease from ``capability_tokens``.
* **forged/s** — the same on a token with a bad signature: refused before any database read
  (what an unauthenticated caller can make the Authority do).
* **http/s**, **http p50/p99 ms** — ``POST /v1/capability-tokens/verify`` over a real loopback
  HTTP server (uvicorn), one request at a time from ``AuthorityClient.verify_token``.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn
from _figures import parser, print_figures

from missionweave.authority import verify_capability_token
from missionweave.authority.client import AuthorityClient
from missionweave.authority.http import create_app
from tests.support.world import make_world


def _rate(fn: Any, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


async def _http(app: Any, token: dict[str, Any], seconds: float) -> tuple[float, list[float]]:
    # IPPROTO_TCP: asyncio then sets TCP_NODELAY on each connection (as _stack does)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no event)
        await asyncio.sleep(0.01)
    lat: list[float] = []
    try:
        async with AuthorityClient(f"http://127.0.0.1:{port}") as client:
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                t = time.perf_counter()
                check = await client.verify_token(token, "search")
                assert check.valid
                lat.append((time.perf_counter() - t) * 1000)
            elapsed = time.perf_counter() - start
    finally:
        server.should_exit = True
        await task
    return len(lat) / elapsed, lat


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        w = make_world(Path(tmp) / "a.db")
        w.clock.now = int(time.time() * 1000)
        w.authorize("a", allowed_tools=["search"])
        assert w.accept(w.workers[0], "a", w.offer("a", w.workers[0])).accepted
        r = w.ok(w.workers[0], "work.start", {"work_item_id": "a", "ownership_epoch": 1})
        token = r.reply["capability_token"]
        forged = {**token, "signature": token["signature"][::-1]}
        genuine = _rate(lambda: verify_capability_token(w.authority, token, "search"), args.seconds)
        refused = _rate(lambda: verify_capability_token(w.authority, forged), args.seconds)
        http, lat = asyncio.run(_http(create_app(w.authority), token, args.seconds))
        w.authority.close()
    q = statistics.quantiles(lat, n=100)
    out = {
        "in_process_per_s": round(genuine),
        "forged_per_s": round(refused),
        "http_per_s": round(http),
        "http_p50_ms": round(q[49], 2),
        "http_p99_ms": round(q[98], 2),
    }
    print_figures(out, args.json)


if __name__ == "__main__":
    main()
