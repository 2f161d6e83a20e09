"""``GET /readyz`` says why the Authority cannot serve, and ``/healthz`` stays liveness
(issue 37, item 3). The store's own reasons (``store_unavailable``, ``log_forked``) are shown
through a killed PostgreSQL in ``test_store_outage.py``; here the disk reserve, the stalled
writer and a probe of another part, over the in-process server on a SQLite file.

The disk below its reserve is a small tmpfs filled past it (a plain directory stands in where
the test cannot mount one: see :func:`tests.support.disks.small_disk`). Strangers read the codes
only; an operator's signed request reads why.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx

from missionweave.authority import AuthorityConfig, now_ms
from missionweave.authority.core import NotReady, Unready
from missionweave.authority.core._store import redact
from missionweave.protocol import Actor
from tests.support.disks import small_disk
from tests.support.serving import LiveServer, mission_cmd, signed_http
from tests.support.waits import until
from tests.support.world import make_world


async def _readyz(url: str, operator: Actor | None = None) -> tuple[int, dict[str, Any]]:
    """``/readyz`` as a stranger sees it, or signed by ``operator``; ``/healthz`` 200 too."""
    client = signed_http(url, operator) if operator else httpx.AsyncClient(base_url=url)
    async with client as http:
        ready, health = await http.get("/readyz"), await http.get("/healthz")
    assert health.status_code == 200  # liveness holds whatever readiness says
    return ready.status_code, ready.json()


async def test_readyz_says_the_disk_is_below_its_reserve_and_200_after_space_returns(
    tmp_path: Path,
) -> None:
    """The SQLite file on a small filesystem (an 8 MiB tmpfs, else a stand-in directory:
    :func:`tests.support.disks.small_disk`; the reserve is set just below what is free when
    the test starts, so either shows it): a file
    filling it past the reserve makes the Authority not ready (``disk_below_reserve``, with
    the free bytes and the reserve), removing it ready again; ``/healthz`` 200 throughout. A
    probe another part adds joins the reasons, in the order added."""
    with small_disk(tmp_path / "disk", 8) as (disk, _):
        # 2 MiB below what is free: the new database and its WAL take less than that
        reserve = shutil.disk_usage(disk).free - 2 * 2**20
        w = make_world(disk / "a.db", config=AuthorityConfig(disk_reserve_bytes=reserve))
        w.clock.now = now_ms()
        server = LiveServer(w.authority, poll_interval_s=0.05)
        await server.start()
        try:
            assert await _readyz(server.url) == (200, {"ready": True})
            (disk / "filler").write_bytes(b"\0" * 3 * 2**20)
            status, body = await _readyz(server.url)  # a stranger: the code, no host facts
            assert status == 503 and body["code"] == NotReady.DISK_BELOW_RESERVE, body
            assert body["detail"]["reasons"] == [{"code": NotReady.DISK_BELOW_RESERVE}]
            assert str(disk) not in str(body), body
            status, body = await _readyz(server.url, w.coordinator)  # an operator: why
            assert status == 503 and body["code"] == NotReady.DISK_BELOW_RESERVE, body
            (reason,) = body["detail"]["reasons"]
            assert reason["detail"]["reserve_bytes"] == reserve
            assert reason["detail"]["free_bytes"] < reserve
            other = Unready(NotReady.WRITER_STALLED, "a test says so", {"by": "test"})
            remove = w.authority.probes.add(lambda: other)
            status, body = await _readyz(server.url)
            assert [r["code"] for r in body["detail"]["reasons"]] == [
                NotReady.DISK_BELOW_RESERVE,
                NotReady.WRITER_STALLED,
            ]
            remove()
            (disk / "filler").unlink()
            assert await _readyz(server.url) == (200, {"ready": True})
        finally:
            await server.stop()
            w.authority.close()


async def test_readyz_says_the_writer_stalled_while_one_transaction_hangs(tmp_path: Path) -> None:
    """The Authority's lock is held (as by a transaction stuck on its disk) while a Command
    waits: ``writer_stalled`` once the writer has waited past its bound, 200 again after."""
    w = make_world(tmp_path / "a.db")
    w.clock.now = now_ms()
    server = LiveServer(w.authority, poll_interval_s=0.05)
    await server.start()
    release = threading.Event()
    held = threading.Event()

    def stuck() -> None:
        with w.authority._lock:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=stuck)
    holder.start()
    try:
        held.wait(10)
        server.app.state.writer.stall_s = 0.2
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            post = asyncio.create_task(
                http.post("/v1/commands", json=mission_cmd(w, "late").model_dump(mode="json"))
            )

            async def stalled() -> bool:
                status, body = await _readyz(server.url)
                return status == 503 and body["code"] == NotReady.WRITER_STALLED

            await until("/readyz 503 writer_stalled", stalled)
            release.set()
            r = await post
            assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
        assert await _readyz(server.url) == (200, {"ready": True})
    finally:
        release.set()
        holder.join()
        await server.stop()
        w.authority.close()


def test_readyz_names_the_store_without_its_password() -> None:
    """``/readyz`` answers strangers (it is not signed) with the store's location when the
    database does not answer (``detail.store``, and the reason): that location is
    :func:`redact`'s, which must drop every password libpq takes from a URL — in the user part
    (also with no user name, or an ``@`` inside the password) and as a ``password=`` query
    parameter (before, the last two and the parameter were answered as given)."""
    for url in (
        "postgresql://mw:s3cret@db:5432/mw",
        "postgresql://:s3cret@db/mw",
        "postgresql://mw:s3c@ret@db/mw",
        "postgresql://mw@db/mw?sslmode=require&password=s3cret",
        "postgres://db/mw?PASSWORD=s3cret&user=mw",
    ):
        shown = redact(url)
        assert "s3c" not in shown and "ret@" not in shown, shown
        assert "db" in shown and "***" in shown, shown
    assert redact("/var/lib/mw/a.db") == "/var/lib/mw/a.db"
