"""The Mission boundary against a member who asks on purpose (issue 38, items 1 and 2;
MW-13.3-d), through a served Authority and its artifact store (the filesystem store, then S3
on moto):

- a squatter's manifest for bytes it never uploaded is refused — with the answer a hash nobody
  holds gets — and the real producer's publish is accepted; once the squatter really has the
  bytes (it uploads them), both Missions publish them;
- a member reads another Mission's Artifact by no route: no Mission named, another Mission
  named, its own lease, the CLI (``test_group_boundary``);
- unknown and forbidden answer alike: a read of an unknown hash, of another Mission's and of
  another Group's; ``GET /v1/leases/<id>`` of another Group's lease and of none;
- a write grant needs an execution lease, not a queued hold.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from dataclasses import replace
from typing import Any

import httpx
import pytest

from missionweave.artifacts import ArtifactNotFound, ArtifactStore, FilesystemStore, S3Store
from missionweave.authority.client import AuthorityClient, AuthorityRequestError
from missionweave.authority.wire._readsig import sign_read
from missionweave.worker import authority_artifacts
from tests.support.artifact_servers import signed
from tests.support.leased_work import client, fetch, other_group, publish
from tests.support.serving import served
from tests.support.world import World

OUTPUT = b"m2's report, predictable from the log\n"
Y = hashlib.sha256(OUTPUT).hexdigest()
NEVER = "ee" * 32  # nobody holds it


async def _refusal(
    c: AuthorityClient, *args: Any, **kw: Any
) -> tuple[int, str, str, tuple[str, ...]]:
    """The refusal of ``c.artifact_grant(*args, **kw)``: status, code, reason, detail keys."""
    with pytest.raises(AuthorityRequestError) as no:
        await c.artifact_grant(*args, **kw)
    e = no.value
    return e.status, e.code, e.reason, tuple(sorted(e.detail))


def _publish_cmd(w: World, wid: str, h: str) -> Any:
    """``artifact.publish`` of a manifest for ``h`` by ``wid``'s owner, under its lease."""
    row = w.item(wid)
    worker = next(a for a in w.workers if a.agent_id == row["owner"])
    m = signed(worker, h, mission_id=row["mission_id"], work_item_id=wid).wire()
    return w.submit(worker, "artifact.publish", w.leased(wid, manifest=m))


async def test_a_squat_is_refused_and_the_producer_publishes__MW_13_3_d(
    world: World, store: ArtifactStore
) -> None:
    w = world
    squatter, producer = w.workers
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2", "title": "the producer's"})
    w.authorize("a")
    lease = w.lease("a", squatter)["lease_id"]
    async with served(w, store) as url, client(url, squatter, w) as c:
        # the squatter names Y (predicted from the log) without the bytes: refused, exactly
        # as a hash nobody holds; its write grant announces nothing
        squat, nobody = _publish_cmd(w, "a", Y), _publish_cmd(w, "a", NEVER)
        assert squat.rejection is not None and nobody.rejection is not None
        assert squat.rejection.code == "content_not_uploaded"
        assert squat.rejection.reason == nobody.rejection.reason
        assert not (await c.artifact_grant("g1", Y, "write", lease_id=lease)).present
        # the producer's publish, in m2, is accepted
        assert await publish(url, replace(w, mission="m2"), "b", producer, OUTPUT) == Y
        assert store.for_group("g1").get(Y) == OUTPUT
        # the bytes are in the store now; the squatter still proves nothing, learns nothing
        # and reads nothing — with its lease, naming m1, naming m2, or naming no Mission
        again = _publish_cmd(w, "a", Y)
        assert again.rejection is not None and again.rejection.code == "content_not_uploaded"
        assert not (await c.artifact_grant("g1", Y, "write", lease_id=lease)).present
        unknown = await _refusal(c, "g1", NEVER, lease_id=lease)
        assert unknown[:2] == (404, "unknown_artifact")
        assert await _refusal(c, "g1", Y, lease_id=lease) == unknown
        assert await _refusal(c, "g1", Y, mission_id="m1") == unknown
        assert await _refusal(c, "g1", Y, mission_id="m2") == unknown
        assert await _refusal(c, "g1", Y, lease_id=lease, mission_id="m2") == unknown
        assert (await _refusal(c, "g1", Y))[:2] == (403, "lease_required")
        got = await fetch(url, w, "c", squatter, Y)  # ctx.fetch in another WorkItem of m1
        assert isinstance(got, ArtifactNotFound), got
        # producing the same bytes itself (an upload under its own grant) is possession:
        # both Missions publish them, and each reads its own
        gate = authority_artifacts(c, "g1", lease_id=lambda: str(lease))
        assert (await gate.put(OUTPUT, "text/plain")).hash == Y
        assert _publish_cmd(w, "a", Y).accepted
        assert await gate.get(Y) == OUTPUT
    homes = {(r["mission_id"], r["work_item_id"]) for r in _homes(w, Y)}
    assert homes == {("m1", "a"), ("m2", "b")}


def _homes(w: World, h: str) -> list[dict[str, Any]]:
    return [
        e.body["manifest"]["manifest"]
        for e in w.authority.all_events(w.group)
        if e.type == "artifact.published" and e.body["artifact_hash"] == h
    ]


async def test_unknown_and_forbidden_answer_alike__MW_13_3_d(world: World, tmp_path: Any) -> None:
    """Another Group's hash, another Mission's and an unknown one: one read answer. Another
    Group's lease and no lease: one ``GET /v1/leases/<id>`` answer."""
    w, g2 = world, other_group(world)
    store = FilesystemStore(tmp_path / "artifacts")
    async with served(w, store) as url:
        assert await publish(url, g2, "b", g2.workers[0], OUTPUT) == Y  # g2's content
        x = await publish(url, w, "a", w.workers[0], b"m1's rows\n")  # m1's content
        w.ok(w.coordinator, "mission.create", {"mission_id": "m3", "title": "later"})
        async with client(url, w.workers[1], w) as c:
            w.authorize("d", mission="m3")
            lease = w.lease("d", w.workers[1])["lease_id"]
            answers = {
                h: await _refusal(c, "g1", h, lease_id=lease) for h in (NEVER, Y, x)
            }  # unknown, another Group's, another Mission's
            assert len(set(answers.values())) == 1, answers
            assert answers[NEVER][:2] == (404, "unknown_artifact")
        g2_lease = str(g2.leases["b"]["lease_id"])
        async with httpx.AsyncClient() as http:

            async def lease_answer(lease_id: str) -> tuple[int, str]:
                u = urllib.parse.urljoin(url, f"/v1/leases/{lease_id}")
                signature = sign_read("GET", u, w.workers[1].key, created_s=w.clock.now // 1000)
                r = await http.get(u, headers=signature)
                return r.status_code, r.text.replace(lease_id, "<id>")

            forbidden, unknown = await lease_answer(g2_lease), await lease_answer("lease_nope")
        assert forbidden == unknown and forbidden[0] == 404, (forbidden, unknown)


async def test_a_write_grant_needs_an_execution_lease__MW_13_3_d(
    world: World, tmp_path: Any
) -> None:
    """A queued hold (accepted, not started) writes nothing; the execution lease does."""
    w = world
    w.authorize("a")
    assert w.accept(w.workers[0], "a", w.offer("a", w.workers[0])).accepted
    hold = str(w.item("a")["lease_id"])
    async with served(w, FilesystemStore(tmp_path / "artifacts")) as url:
        async with client(url, w.workers[0], w) as c:
            refused = await _refusal(c, "g1", Y, "write", lease_id=hold)
            assert refused[:2] == (403, "lease_required"), refused
            lease = w.start(w.workers[0], "a")["lease_id"]
            assert (await c.artifact_grant("g1", Y, "write", lease_id=lease)).method == "PUT"


async def test_s3_staged_bytes_are_checked_by_the_authority__MW_13_3_d(
    world: World, s3_server: Any
) -> None:
    """S3 (moto): a write grant is a presigned PUT of the lease's own staging object, bound to
    the content's checksum; the Authority hashes what was staged before it records anything.
    Other bytes at the staging URL (sent without the checksum header: moto does not check it,
    so the Authority must) are refused 422 and kept nowhere; nothing staged is a 404."""
    w = world
    store: S3Store = s3_server.store()
    w.authorize("a")
    lease = w.lease("a", w.workers[0])["lease_id"]
    async with served(w, store) as url, client(url, w.workers[0], w) as c:
        with pytest.raises(AuthorityRequestError) as nothing:
            await c.artifact_uploaded("g1", Y, lease)
        assert (nothing.value.status, nothing.value.code) == (404, "unknown_artifact")
        g = await c.artifact_grant("g1", Y, "write", lease_id=lease)
        assert g.confirm and g.headers == {"x-amz-checksum-sha256": _b64(Y)}
        assert f"/groups/g1/uploads/{lease}/{Y}" in g.url and "x-amz-checksum-sha256" in g.url
        async with httpx.AsyncClient() as http:
            assert (await http.put(g.url, content=b"other bytes")).status_code == 200
        with pytest.raises(AuthorityRequestError) as bad:
            await c.artifact_uploaded("g1", Y, lease)
        assert (bad.value.status, bad.value.code) == (422, "hash_mismatch")
        assert not store.for_group("g1").exists(Y)
        assert _publish_cmd(w, "a", Y).rejection is not None
        # the real bytes, with the bound header: adopted, recorded, publishable
        async with httpx.AsyncClient() as http:
            r = await http.put(g.url, content=OUTPUT, headers=g.headers)
            assert r.status_code == 200, r.text
        assert await c.artifact_uploaded("g1", Y, lease) == len(OUTPUT)
        assert store.for_group("g1").get(Y) == OUTPUT
        assert _publish_cmd(w, "a", Y).accepted


def _b64(h: str) -> str:
    import base64

    return base64.b64encode(bytes.fromhex(h)).decode()


async def test_s3_staged_bytes_past_the_upload_bound_are_refused_and_kept_nowhere__MW_13_3_d(
    world: World, s3_server: Any
) -> None:
    """The upload bound holds on S3 too (found by attack: a staged upload had none): a
    confirmed upload larger than ``max_upload_bytes`` is refused 413 ``payload_too_large``,
    its staged object removed, nothing adopted or recorded, so its publish is refused."""
    w = world
    w.authority.config = replace(w.authority.config, max_upload_bytes=len(OUTPUT) - 1)
    store: S3Store = s3_server.store()
    w.authorize("a")
    lease = w.lease("a", w.workers[0])["lease_id"]
    async with served(w, store) as url, client(url, w.workers[0], w) as c:
        g = await c.artifact_grant("g1", Y, "write", lease_id=lease)
        async with httpx.AsyncClient() as http:
            r = await http.put(g.url, content=OUTPUT, headers=g.headers)
            assert r.status_code == 200, r.text
        with pytest.raises(AuthorityRequestError) as big:
            await c.artifact_uploaded("g1", Y, lease)
        assert (big.value.status, big.value.code) == (413, "payload_too_large")
        assert not store.for_group("g1").exists(Y)
        with pytest.raises(AuthorityRequestError) as gone:  # the staged object went too
            await c.artifact_uploaded("g1", Y, lease)
        assert (gone.value.status, gone.value.code) == (404, "unknown_artifact")
        assert _publish_cmd(w, "a", Y).rejection is not None
