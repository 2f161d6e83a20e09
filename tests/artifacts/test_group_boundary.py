"""Artifacts have a Group boundary (issue 24 finding 6, MW-13.3-d): the Authority is the gate.

Two Groups on one Authority: ``g1`` (worker-0 publishes SECRET in Mission m1) and ``g2`` (a
stranger, member of ``g2`` only). The Authority alone holds the artifact store — the
filesystem store, then S3 (moto) — and each Group has its own namespace in it. Through every
path a member of ``g2`` has — ``ctx.fetch``, ``missionweave artifacts get``, a grant for
another object, ``contract.inputs`` — ``g1``'s content stays out of reach, while ``g1``'s own
members read it.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import os
import urllib.parse
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from missionweave.artifacts import (
    ArtifactAccessDenied,
    ArtifactNotFound,
    ArtifactStore,
    FilesystemStore,
    S3Store,
)
from missionweave.authority.client import AuthorityRequestError
from missionweave.authority.wire import GRANT_TTL_MS
from missionweave.authority.wire._readsig import sign_read
from missionweave.protocol import b64u_decode, b64u_encode
from missionweave.worker import authority_artifacts
from tests.support.cli_processes import amw
from tests.support.leased_work import client as _client
from tests.support.leased_work import fetch as _fetch
from tests.support.leased_work import other_group as _other_group
from tests.support.leased_work import publish as _publish
from tests.support.serving import served
from tests.support.world import World

SECRET = b"g1's confidential rows\n"
X = hashlib.sha256(SECRET).hexdigest()
MINE = b"g2's own notes\n"
Y = hashlib.sha256(MINE).hexdigest()


async def test_ctx_fetch_stays_inside_the_group__MW_13_3_d(
    world: World, store: ArtifactStore
) -> None:
    w, g2 = world, _other_group(world)
    async with served(w, store) as url:
        assert await _publish(url, w, "a", w.workers[0], SECRET) == X
        # content is addressed per Group: g1's namespace holds it, no other does
        assert store.for_group("g1").get(X) == SECRET
        assert not store.exists(X) and not store.for_group("g2").exists(X)
        # a member of g1 working in the same Mission reads it (verified, MW-13.1-d)
        assert await _fetch(url, w, "c", w.workers[1], X) == SECRET
        # a member of g2, in g2's Mission, knowing the hash: nothing
        got = await _fetch(url, g2, "b", g2.workers[0], X)
        assert isinstance(got, ArtifactNotFound | ArtifactAccessDenied), got
        # a member of g1 working in another Mission of g1: another Mission's content (13.3-d),
        # answered exactly as content nobody holds (issue 38: no existence oracle)
        w.ok(w.coordinator, "mission.create", {"mission_id": "m3", "title": "later"})
        got = await _fetch(url, replace(w, mission="m3"), "d", w.workers[1], X)
        assert isinstance(got, ArtifactNotFound), got
        # and the stranger asking g1's gate directly is no member
        async with _client(url, g2.workers[0], w) as c:
            with pytest.raises(AuthorityRequestError) as refused:
                await c.artifact_grant("g1", X, mission_id="m1")
        assert (refused.value.status, refused.value.code) == (403, "not_a_member")


async def test_cli_get_signs_its_read_and_stays_in_the_group__MW_13_3_d(
    world: World, tmp_path: Path
) -> None:
    w, g2 = world, _other_group(world)
    store = FilesystemStore(tmp_path / "artifacts")
    keys = {}
    for actor in (w.workers[0], w.workers[1], g2.workers[0]):
        keys[actor.agent_id] = tmp_path / f"{actor.agent_id}.pem"
        actor.key.to_file(keys[actor.agent_id])
    async with served(w, store) as url:
        await _publish(url, w, "a", w.workers[0], SECRET)

        async def get(*args: str) -> Any:
            out = tmp_path / "out" / "x"
            out.unlink(missing_ok=True)
            out.parent.mkdir(exist_ok=True)
            r = await amw("artifacts", "get", X, "-o", str(out), "--authority-url", url, *args)
            return r, (out.read_bytes() if out.exists() else None)

        # a person names a Mission it may read: worker-0 worked in m1 (it produced X)
        r, got = await get("--group", "g1", "--key", str(keys["worker-0"]), "--mission", "m1")
        assert r.returncode == 0, r.stderr
        assert got == SECRET and r.stdout.startswith(f"ok {X}")
        # naming none: no Mission's content at all (issue 38, "a read without a Mission")
        r, got = await get("--group", "g1", "--key", str(keys["worker-0"]))
        assert r.returncode == 1 and "lease_required" in r.stderr and got is None
        # worker-1 never worked in m1 and directs no Mission: as if nothing were there
        r, got = await get("--group", "g1", "--key", str(keys["worker-1"]), "--mission", "m1")
        assert r.returncode == 2 and "not found" in r.stderr and got is None
        # no key: refused before anything is asked
        r, got = await get("--group", "g1")
        assert r.returncode == 2 and "reads are signed" in r.stderr and got is None
        # the stranger: not a member of g1; nothing of the kind in g2
        r, got = await get("--group", "g1", "--key", str(keys["stranger"]))
        assert r.returncode == 1 and "not_a_member" in r.stderr and got is None
        r, got = await get("--group", "g2", "--key", str(keys["stranger"]), "--mission", "m2")
        assert r.returncode == 2 and "not found" in r.stderr and got is None
        # a member reading for another Mission's context: as if nothing were there
        w.ok(w.coordinator, "mission.create", {"mission_id": "m3", "title": "later"})
        r, got = await get("--group", "g1", "--key", str(keys["worker-1"]), "--mission", "m3")
        assert r.returncode == 2 and "not found" in r.stderr and got is None


def _s3_signature(store: S3Store, method: str, key: str, date: datetime.datetime) -> str:
    """The SigV4 query signature S3 expects of ``method`` on ``key`` signed at ``date``."""
    url = store.client.get_presigned_url(
        method,
        store.bucket,
        key,
        expires=datetime.timedelta(milliseconds=GRANT_TTL_MS),
        request_date=date,
    )
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["X-Amz-Signature"][0]


async def test_a_grant_is_one_object_one_operation__MW_13_3_d(
    world: World, store: ArtifactStore
) -> None:
    w, g2 = world, _other_group(world)
    async with served(w, store) as url:
        await _publish(url, w, "a", w.workers[0], SECRET)
        assert await _publish(url, g2, "b", g2.workers[0], MINE) == Y
        async with _client(url, g2.workers[0], w) as c:
            grant_y = await c.artifact_grant("g2", Y, mission_id="m2")
            # writing needs a live lease of the writer's own (b's was released at submit)
            for lease_id in (None, w.leases["a"]["lease_id"], g2.leases["b"]["lease_id"]):
                with pytest.raises(AuthorityRequestError) as no:
                    await c.artifact_grant("g2", X, "write", lease_id=lease_id)
                assert no.value.status == 403, lease_id
        assert grant_y.group_id == "g2" and grant_y.method == "GET"
        own = urllib.parse.urljoin(url, grant_y.url)
        async with httpx.AsyncClient() as http:
            assert (await http.get(own)).content == MINE  # the grant works for its object
            if isinstance(store, S3Store):
                # moto accepts any presigned URL (its signature checks are off), so the
                # scope is shown on the signature itself: it is S3's SigV4 signature of
                # this method on this one key, which no other key or method carries
                parts = urllib.parse.urlsplit(own)
                query = urllib.parse.parse_qs(parts.query)
                assert parts.path.endswith(f"/groups/g2/sha256/{Y}")
                date = datetime.datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(
                    tzinfo=datetime.UTC
                )
                sig = query["X-Amz-Signature"][0]
                assert sig == _s3_signature(store, "GET", f"groups/g2/sha256/{Y}", date)
                assert sig != _s3_signature(store, "GET", f"groups/g1/sha256/{X}", date)
                assert sig != _s3_signature(store, "PUT", f"groups/g2/sha256/{Y}", date)
            else:
                # the blob token's claims retargeted at g1's object, its signature kept
                prefix, _, token = own.rpartition("/")
                payload, _, sig = token.partition(".")
                claims = b64u_decode(payload).replace(Y.encode(), X.encode())
                claims = claims.replace(b'"g2"', b'"g1"')
                r = await http.get(f"{prefix}/{b64u_encode(claims)}.{sig}")
                assert r.status_code == 403 and SECRET not in r.content
                # a read grant is no write grant
                r = await http.put(own, content=SECRET)
                assert r.status_code == 403
        assert store.for_group("g2").get(Y) == MINE and not store.for_group("g2").exists(X)


async def test_filesystem_upload_must_hash_to_its_grant__MW_13_1_d(
    world: World, tmp_path: Path
) -> None:
    w = world
    store = FilesystemStore(tmp_path / "artifacts")
    async with served(w, store) as url:
        async with _client(url, w.workers[0], w) as c:
            w.authorize("a")
            lease = w.lease("a", w.workers[0])
            g = await c.artifact_grant("g1", X, "write", lease_id=lease["lease_id"])
        async with httpx.AsyncClient() as http:
            # a hash and a trailing newline is no hash: a 422, never a 500 (issue 25's attack)
            odd = urllib.parse.urljoin(
                url, f"/v1/groups/g1/artifacts/{X}%0A?operation=write&lease_id={lease['lease_id']}"
            )
            signature = sign_read("GET", odd, w.workers[0].key, created_s=w.clock.now // 1000)
            r = await http.get(odd, headers=signature)
            assert r.status_code == 422 and r.json()["code"] == "invalid_request", r.text
            r = await http.put(urllib.parse.urljoin(url, g.url), content=b"something else")
            assert r.status_code == 422 and r.json()["code"] == "hash_mismatch"
            assert not store.for_group("g1").exists(X)
            r = await http.put(urllib.parse.urljoin(url, g.url), content=SECRET)
            assert r.status_code == 200, r.text
        assert store.for_group("g1").get(X) == SECRET


async def test_contract_inputs_naming_another_groups_artifact_reach_nothing__MW_13_3_d(
    world: World, tmp_path: Path
) -> None:
    """g2 naming g1's hash as an input learns nothing (accepted as any unknown hash would be:
    a refusal would tell g2 that another Group holds it, issue 38) and reads nothing: the
    hash names nothing in g2's namespace."""
    w, g2 = world, _other_group(world)
    async with served(w, FilesystemStore(tmp_path / "artifacts")) as url:
        await _publish(url, w, "a", w.workers[0], SECRET)
        async with _client(url, w.coordinator, w) as c:
            body = g2.authorization("b", inputs=[X])
            cmd = w.coordinator.command("work.authorize", "g2", body, issued_at_ms=w.clock.now)
            r = await c.submit(cmd)
            unknown = g2.authorization("c", inputs=["ee" * 32])
            cmd = w.coordinator.command("work.authorize", "g2", unknown, issued_at_ms=w.clock.now)
            r_unknown = await c.submit(cmd)
        assert r.accepted and r_unknown.accepted, (r.rejection, r_unknown.rejection)
        got = await _fetch(url, g2, "b", g2.workers[0], X)
        assert isinstance(got, ArtifactNotFound), got


async def test_writes_of_a_path_and_a_stream_through_a_grant__MW_13_1_a(
    world: World, store: ArtifactStore, tmp_path: Path
) -> None:
    """A file and a stream of unknown length (6 MiB, more than one chunk) go through write
    grants into the Group's namespace; a second put of present content sends nothing."""
    w = world
    w.authorize("a")
    lease = w.lease("a", w.workers[0])
    big = os.urandom(6 << 20)
    path = tmp_path / "big.bin"
    path.write_bytes(big)
    async with served(w, store) as url, _client(url, w.workers[0], w) as c:
        gate = authority_artifacts(c, "g1", lease_id=lambda: str(lease["lease_id"]))
        ref = await gate.put(path, "application/octet-stream")
        assert ref.hash == hashlib.sha256(big).hexdigest() and ref.size == len(big)
        assert ref.uri == f"{url}/v1/groups/g1/artifacts/{ref.hash}"
        streamed = await gate.put(io.BytesIO(big[::-1]))
        assert (await c.artifact_grant("g1", ref.hash, "write", lease_id=lease["lease_id"])).present
        assert await gate.get(streamed.hash) == big[::-1]
    assert store.for_group("g1").get(ref.hash) == big


async def test_a_promoted_artifact_is_read_from_the_promoting_group__MW_13_3_d(
    world: World, tmp_path: Path
) -> None:
    """Cross-Group transfer is explicit: once g1's MissionOwner promotes X (a verifiable
    ``artifact.promoted`` Event), a member of g2 working in g2's Mission may read it — from
    g1's namespace, copied nowhere; before, it may not."""
    w, g2 = world, _other_group(world)
    store = FilesystemStore(tmp_path / "artifacts")
    async with served(w, store) as url:
        await _publish(url, w, "a", w.workers[0], SECRET)
        got = await _fetch(url, g2, "b", g2.workers[0], X)
        assert isinstance(got, ArtifactNotFound | ArtifactAccessDenied), got
        r = w.ok(
            w.coordinator, "artifact.promote", {"artifact_hash": X, "classification": "internal"}
        )
        assert [e.type for e in r.events] == ["artifact.promoted"]
        assert await _fetch(url, g2, "c", g2.workers[0], X) == SECRET
    assert not store.for_group("g2").exists(X)
