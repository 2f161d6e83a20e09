"""Bounds no single member can exhaust (issue 37, item 5), as a client meets them over HTTP:
a flooding member's ``POST /v1/commands`` answered 429 ``rate_limited`` with ``Retry-After``
by a real ``authority serve`` (its ``--command-rate``/``--command-burst``) while another member
and the flooder's own renewal are served; uploads past ``max_upload_bytes`` answered 413
``payload_too_large`` and nothing kept; an upload that fills the disk answered 507
``insufficient_storage`` with no partial file; write grants and uploads refused 507 below the
disk reserve of the artifact store's filesystem.
"""

from __future__ import annotations

import errno
import hashlib
import os
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from missionweave.artifacts import FilesystemStore
from missionweave.authority import now_ms
from missionweave.authority.client import AuthorityClient, AuthorityRequestError
from missionweave.protocol import Actor, RejectionCode
from tests.support.cli_processes import authority_serve
from tests.support.contracts import contract
from tests.support.disks import fill, small_disk
from tests.support.serving import served
from tests.support.world import World, make_world

MIB = 1 << 20


def _files(root: Path) -> list[Path]:
    """Every regular file under ``root`` (an upload's spool or temp file left behind too)."""
    return sorted(p for p in root.rglob("*") if p.is_file())


def _post(url: str, w: World, actor: Actor, type: str, body: dict[str, Any]) -> httpx.Response:
    cmd = actor.command(type, w.group, body, issued_at_ms=now_ms())
    return httpx.post(f"{url}/v1/commands", json=cmd.model_dump(mode="json"))


def test_a_flooding_member_gets_429_with_retry_after_from_authority_serve(
    tmp_path: Path,
) -> None:
    """``authority serve --command-rate 0.2 --command-burst 5``: worker-0 holds a lease and
    floods ``work.propose``; its first five are accepted, then a 429 whose body is the
    rejected SubmitResult (``rate_limited``, ``retry_after_ms``) and whose ``Retry-After``
    header gives the wait in seconds; worker-1's proposal and worker-0's ``lease.renew`` are
    still 200."""
    w = make_world(tmp_path / "a.db")
    w.clock.now = now_ms()  # the served Authority's clock is the real one
    w.authorize("a")
    w.lease("a", w.workers[0])
    key = tmp_path / "authority.pem"
    w.authority.key.to_file(key)
    w.authority.close()
    flags = ("--key", str(key), "--command-rate", "0.2", "--command-burst", "5")
    with authority_serve(tmp_path / "a.db", *flags) as (url, _):
        flooder, other = w.workers

        def propose(actor: Actor, wid: str) -> httpx.Response:
            body = {"work_item_id": wid, "mission_id": "m1", "contract": contract().wire()}
            return _post(url, w, actor, "work.propose", body)

        statuses = [propose(flooder, f"p{i}").status_code for i in range(5)]
        assert statuses == [200] * 5
        refused = next(r for r in (propose(flooder, f"q{i}") for i in range(5)) if r.is_error)
        assert refused.status_code == 429, refused.text
        rejection = refused.json()["rejection"]
        assert rejection["code"] == "rate_limited"
        wait_ms = rejection["detail"]["retry_after_ms"]
        assert wait_ms > 0 and int(refused.headers["Retry-After"]) == -(-wait_ms // 1000)
        assert propose(other, "theirs").status_code == 200
        renew = _post(url, w, flooder, "lease.renew", w.leased("a"))
        assert renew.status_code == 200, renew.text


@pytest.fixture
async def uploads(world: World, tmp_path: Path) -> AsyncIterator[tuple[str, FilesystemStore]]:
    """``world`` served with a 1 MiB upload bound and a filesystem store; worker-0 holds the
    lease of WorkItem ``a``. The URL and the store."""
    world.authority.config = replace(world.authority.config, max_upload_bytes=MIB)
    world.authorize("a")
    world.lease("a", world.workers[0])
    store = FilesystemStore(tmp_path / "artifacts")
    async with served(world, store) as url:
        yield url, store


async def _write_url(url: str, w: World, h: str) -> str:
    """worker-0's write grant of ``h`` under its lease of ``a``: the blob URL."""
    async with AuthorityClient(url, signing_key=w.workers[0].key, clock=w.clock) as c:
        g = await c.artifact_grant(w.group, h, "write", lease_id=w.leases["a"]["lease_id"])
    return urllib.parse.urljoin(url, g.url)


async def test_an_upload_over_the_bound_is_413_and_nothing_is_stored(
    world: World, uploads: tuple[str, FilesystemStore]
) -> None:
    """1 MiB + 1 byte against a 1 MiB bound: 413 ``payload_too_large`` (``bytes``,
    ``max_bytes``), refused by its ``Content-Length`` and, sent without one (chunked), as soon
    as the bytes pass the bound; no file is left in the store. 1 MiB exactly is stored."""
    url, store = uploads
    data = os.urandom(MIB + 1)
    h = hashlib.sha256(data).hexdigest()
    target = await _write_url(url, world, h)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(data), 64 * 1024):
            yield data[i : i + 64 * 1024]

    async with httpx.AsyncClient() as http:
        for content in (data, chunks()):
            r = await http.put(target, content=content)
            assert r.status_code == 413, r.text
            assert r.json()["code"] == "payload_too_large"
            assert r.json()["detail"]["max_bytes"] == MIB
            assert r.json()["detail"]["bytes"] > MIB
            assert _files(store.root) == []
        fits = data[:MIB]
        r = await http.put(
            await _write_url(url, world, hashlib.sha256(fits).hexdigest()), content=fits
        )
        assert r.status_code == 200, r.text
    assert store.for_group(world.group).get(hashlib.sha256(fits).hexdigest()) == fits


async def test_an_upload_that_fills_the_disk_is_507_and_leaves_no_partial_file(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The artifact store on an 8 MiB tmpfs, no reserve: a 5 MiB upload is spooled, then its
    copy into the store runs out of space — 507 ``insufficient_storage``, never a 500
    ``OSError``, and neither the spool nor the store's temp file is left. Without a tmpfs
    (not root) the store's write stands in for the full disk: it raises ``ENOSPC``."""
    world.authority.config = replace(world.authority.config, max_upload_bytes=64 * MIB)
    world.authority.disk_reserve.reserve_bytes = 0
    world.authorize("a")
    world.lease("a", world.workers[0])
    data = os.urandom(5 * MIB)
    h = hashlib.sha256(data).hexdigest()
    with small_disk(tmp_path / "disk", 8) as (disk, kind):
        if kind == "stand-in":

            def full(*_: object) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(FilesystemStore, "put_file", full)
        store = FilesystemStore(disk / "artifacts")
        async with served(world, store) as url:
            target = await _write_url(url, world, h)
            async with httpx.AsyncClient() as http:
                r = await http.put(target, content=data)
        assert r.status_code == 507, r.text
        assert r.json()["code"] == "insufficient_storage"
        assert _files(store.root) == []


async def test_below_the_reserve_of_the_artifact_disk_write_grants_and_uploads_are_507(
    world: World, tmp_path: Path
) -> None:
    """The artifact store on a 16 MiB tmpfs filled to 2 MiB free, a 4 MiB reserve: a write
    grant and an upload under an earlier grant are refused 507 ``insufficient_storage``
    (naming the directory) and nothing is stored, while Commands — whose database is on
    another disk — are still accepted. Without a tmpfs (not root) the free-space probe stands
    in."""
    world.authority.disk_reserve.reserve_bytes = 4 * MIB
    world.authorize("a")
    world.lease("a", world.workers[0])
    data = b"some content"
    h = hashlib.sha256(data).hexdigest()
    with small_disk(tmp_path / "disk", 16) as (disk, kind):
        store = FilesystemStore(disk / "artifacts")
        async with served(world, store) as url:
            target = await _write_url(url, world, h)
            probe = world.authority.disk_reserve.probe
            if kind == "tmpfs":
                fill(disk, 2 * MIB)
            else:
                world.authority.disk_reserve.probe = lambda p: (
                    replace_free(probe(p), 2 * MIB) if str(p).startswith(str(disk)) else probe(p)
                )
            async with AuthorityClient(
                url, signing_key=world.workers[0].key, clock=world.clock
            ) as c:
                with pytest.raises(AuthorityRequestError) as refused:
                    await c.artifact_grant(
                        world.group, h, "write", lease_id=world.leases["a"]["lease_id"]
                    )
                assert (refused.value.status, refused.value.code) == (
                    507,
                    RejectionCode.INSUFFICIENT_STORAGE,
                )
                async with httpx.AsyncClient() as http:
                    r = await http.put(target, content=data)
                assert r.status_code == 507 and r.json()["code"] == "insufficient_storage"
                assert r.json()["detail"]["path"].startswith(str(disk))
                assert not store.for_group(world.group).exists(h)
                body = {"work_item_id": "p", "mission_id": "m1", "contract": contract().wire()}
                cmd = world.workers[1].command(
                    "work.propose", world.group, body, issued_at_ms=world.clock.now
                )
                assert (await c.submit(cmd)).accepted


def replace_free(usage: Any, free: int) -> Any:
    """``usage`` (``shutil.disk_usage``'s answer) with ``free`` bytes free."""
    return usage._replace(free=free)
