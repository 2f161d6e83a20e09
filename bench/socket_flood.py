"""Benchmark: a stranger's flood of unsigned WebSocket upgrades (or of HTTP connections kept
busy with unsigned requests) against what members get (issue 37 item 5).

Usage: ``python bench/socket_flood.py [--sockets N] [--hold SECONDS] [--max-unauthenticated M]
[--max-connections C] [--auth-timeout S] [--keep-busy] [--json]``

One ``missionweave authority serve`` process over a small SQLite log. After 2 s idle, this
process (its open-file soft limit raised to fit) opens N raw WebSocket upgrades of
``/v1/stream`` — 200 handshakes at a time — that never send a frame; then holds them for HOLD
seconds, opening a new one for each the server closes (a stranger who keeps trying). With
``--keep-busy`` each of the N is an HTTP connection that sends an unsigned ``GET /healthz``
every second instead (served, but no proof of a member: closed at the deadline). During
those seconds a member sends a Command (``mission.create``) and a signed page read every
100 ms, and another process probes ``GET /healthz`` every 20 ms on its own connection.

Printed: upgrades answered 101 (``--keep-busy``: unsigned requests answered 200), sockets
the server closed (evicted past its unauthenticated budget, or at the deadline), the fewest
and most sockets held (sampled twice a second), the seconds the flood took to set up,
``/healthz`` p50/p99/max in ms while it is held (and idle before it), Commands accepted and
failed, reads served and failed, the server's peak RSS. The issue's bound: ``/healthz`` p99
under 100 ms and every Command served while 4,200 unauthenticated sockets are held. Nothing
is asserted.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from _figures import parser, print_figures
from _served import HealthzProbe, authority_serve, rss_kb

from missionweave.authority import now_ms
from missionweave.authority.http._connections import raise_open_files
from missionweave.authority.wire._readsig import SignedReads
from missionweave.dev._devserver import free_port
from tests.support.world import World, make_world

_HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def _healthz(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """One unsigned ``GET /healthz`` on this connection; whether it answered 200."""
    writer.write(_HEALTHZ)
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    await reader.readexactly(length)
    return head.startswith(b"HTTP/1.1 200")


class _Flood:
    """The stranger's sockets: opened, held, reopened when the server closes one; with
    ``keep_busy`` each sends an unsigned ``GET /healthz`` every second while held."""

    def __init__(self, port: int, keep_busy: bool = False) -> None:
        self.port, self.keep_busy = port, keep_busy
        self.upgraded = self.closed = self.failed = 0
        self.open: set[asyncio.StreamWriter] = set()

    async def upgrade(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """One unsigned upgrade of ``/v1/stream``, its ``101`` read (``keep_busy``: one
        unsigned ``GET /healthz``, its 200 read); ``None`` if it failed."""
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            if self.keep_busy:
                ok = await _healthz(reader, writer)
            else:
                key = base64.b64encode(os.urandom(16)).decode()
                writer.write(
                    f"GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n".encode()
                )
                ok = (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
        except (OSError, asyncio.IncompleteReadError, IndexError):
            self.failed += 1
            return None
        self.upgraded += ok
        self.open.add(writer)
        return reader, writer

    async def _busy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Unsigned requests every second until the server closes the connection (an
        ``OSError`` or ``IncompleteReadError``) or the caller's timeout ends the flood."""
        while True:
            await asyncio.sleep(1.0)
            await _healthz(reader, writer)
            self.upgraded += 1

    async def hold(self, sock: tuple[Any, Any] | None, until: float) -> None:
        """Hold ``sock`` until ``until`` (monotonic), reopening it whenever the server closes
        it."""
        while time.monotonic() < until:
            if sock is None:
                sock = await self.upgrade()
                continue
            reader, writer = sock
            try:
                left = until - time.monotonic()
                if self.keep_busy:
                    await asyncio.wait_for(self._busy(reader, writer), left)
                while left > 0 and await asyncio.wait_for(reader.read(4096), left):
                    left = until - time.monotonic()
                self.closed += time.monotonic() < until  # EOF in time: the server closed it
            except TimeoutError:  # held to the end (an OSError too: caught first)
                pass
            except (OSError, asyncio.IncompleteReadError, IndexError):
                self.closed += 1
            self.open.discard(writer)
            writer.close()
            sock = None


async def _member(url: str, w: World, until: float, out: dict[str, int]) -> None:
    """A Command and a signed page read every 100 ms until ``until``."""
    async with httpx.AsyncClient(
        base_url=url, auth=SignedReads(w.workers[1].key), timeout=30
    ) as http:
        i = 0
        while time.monotonic() < until:
            i += 1
            cmd = w.coordinator.command(
                "mission.create",
                w.group,
                {"mission_id": f"f{i}", "title": "x"},
                issued_at_ms=now_ms(),
            )
            try:
                r = await http.post("/v1/commands", json=cmd.model_dump(mode="json"))
                ok = r.status_code == 200 and r.json()["status"] == "accepted"
                out["commands_accepted" if ok else "commands_failed"] += 1
                page = await http.get(f"/v1/groups/{w.group}/events?limit=100")
                out["reads_served" if page.status_code == 200 else "reads_failed"] += 1
            except httpx.HTTPError:
                out["commands_failed"] += 1
            await asyncio.sleep(0.1)


async def _load(
    url: str, port: int, w: World, n: int, hold_s: float, keep_busy: bool
) -> dict[str, Any]:
    probe = HealthzProbe(url)
    await probe.start(2.0)  # the idle server first: what the machine alone costs a probe
    idle_end = time.time()
    flood = _Flood(port, keep_busy)
    began = time.perf_counter()
    socks: list[Any] = []
    for i in range(0, n, 200):  # 200 handshakes at a time (the listen backlog holds them)
        socks += await asyncio.gather(*(flood.upgrade() for _ in range(i, min(n, i + 200))))
    setup_s = time.perf_counter() - began
    start = time.time()  # the probe's samples from here on are under the held flood
    until = time.monotonic() + hold_s
    tasks = [asyncio.create_task(flood.hold(s, until)) for s in socks]
    member = {"commands_accepted": 0, "commands_failed": 0, "reads_served": 0, "reads_failed": 0}
    held: list[int] = []

    async def count() -> None:  # the sockets held, twice a second
        while time.monotonic() < until - 0.5:
            held.append(len(flood.open))
            await asyncio.sleep(0.5)

    await asyncio.gather(_member(url, w, until, member), count())
    await asyncio.gather(*tasks)
    samples = await probe.stop()
    return {
        "sockets": n,
        "keep_busy": keep_busy,
        "flood_setup_s": round(setup_s, 1),
        "upgrades_101": flood.upgraded,
        "closed_by_server": flood.closed,
        "connect_failures": flood.failed,
        "held_min": min(held, default=0),
        "held_max": max(held, default=0),
        **member,
        **HealthzProbe.figures(samples, start, idle_end),
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--sockets", type=int, default=4200, help="unsigned upgrades held")
    p.add_argument("--hold", type=float, default=10.0, help="seconds the flood lasts")
    p.add_argument("--max-unauthenticated", type=int, default=None, help="the server's budget")
    p.add_argument("--max-connections", type=int, default=None, help="the server's total")
    p.add_argument("--auth-timeout", type=float, default=None, help="the server's deadline, s")
    p.add_argument("--server-log", type=Path, default=None, help="keep the server's stderr here")
    p.add_argument(
        "--keep-busy",
        action="store_true",
        help="HTTP connections sending an unsigned GET /healthz every second, not upgrades",
    )
    args = p.parse_args()
    raise_open_files(args.sockets + 512)
    flags: list[str] = []
    for name in ("max_unauthenticated", "max_connections", "auth_timeout"):
        if getattr(args, name) is not None:
            flags += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "authority.db"
        w = make_world(db)
        key = Path(tmp) / "authority.pem"
        w.authority.key.to_file(key)
        w.authority.close()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        flags += ["--operator-key", w.coordinator.public_key]
        log = Path(tmp) / "server.log"
        with authority_serve(db, key, port, flags, log, args.server_log) as proc:
            figures = asyncio.run(_load(url, port, w, args.sockets, args.hold, args.keep_busy))
            figures["rss_peak_mb"] = round(rss_kb(proc.pid, "VmHWM") / 1024, 1)
    print_figures(figures, args.json)


if __name__ == "__main__":
    main()
