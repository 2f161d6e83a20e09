"""Publishing Artifacts through the Authority: fenced by the lease (MW-11.3-c), with a signed
manifest produced by the actor for its WorkItem (MW-13.1-b)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

import missionweave.artifacts as artifacts
from missionweave.artifacts import (
    ArtifactStore,
    FilesystemStore,
    LeaseInfo,
    ManifestIndex,
    PublishRejected,
    publish_artifact,
)
from missionweave.protocol import Classification, check_event, sign_manifest
from tests.support.artifact_servers import InProcess, manifest, signed
from tests.support.surface import assert_surface
from tests.support.world import World, make_leased_world

ARTIFACTS = {
    "ArtifactError", "ArtifactIntegrityError", "ArtifactNotFound", "ArtifactRef",
    "ArtifactStore", "ArtifactStoreError", "AsyncSubmitter", "FilesystemStore", "LeaseInfo",
    "LineageNode", "LineageStatus", "ManifestError", "ManifestIndex",
    "PublishRejected", "PublishedArtifact", "S3Store",
    "publish_artifact", "to_mermaid", "to_text",
    # through the Authority's grants (MW-13.3-d), and lineage from a Group's log
    "ArtifactAccessDenied", "GatedArtifacts", "GrantFn", "LogManifests", "build_lineage",
    # an S3 write's staged upload, checked and moved by the Authority (MW-13.3-d)
    "adopt_staged", "presign_staged_put",
}  # fmt: skip


def test_artifacts_surface() -> None:
    assert_surface(artifacts, ARTIFACTS)


async def _publish(w: World, st: ArtifactStore, data: bytes, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "mission_id": "m1",
        "media_type": "application/json",
        "schema_id": "report@1",
        "classification": Classification.INTERNAL,
        "agent_card_version": 0,
        "tool_versions": {"sha256sum": "9.4"},
        "model_versions": {"none": "0"},
        "capability_versions": {"dist.verify": "1.0"},
        "created_at_ms": w.clock.now,
    }
    args.update(kw)
    lease = LeaseInfo.from_lease(w.leases["a"])
    # this process holds the store itself: what the Authority's blob route records on an
    # upload through a grant is recorded here (the proof of possession, MW-13.3-d)
    raw = data if isinstance(data, bytes) else await asyncio.to_thread(Path(data).read_bytes)
    w.uploaded("a", hashlib.sha256(raw).hexdigest())
    return await publish_artifact(
        st, InProcess(w.authority), w.workers[0], w.group, lease, data, **args
    )


async def test_publish_valid_manifest_accepted__MW_13_1_b(
    tmp_path: Path, store: ArtifactStore
) -> None:
    w = make_leased_world(tmp_path / "a.db")
    raw = await _publish(w, store, b'{"rows": [1, 2, 3]}')
    assert store.get(raw.ref.hash) == b'{"rows": [1, 2, 3]}'
    m = raw.manifest.manifest
    assert (m.content_hash, m.size_bytes, m.uri) == (raw.ref.hash, raw.ref.size, raw.ref.uri)
    assert (m.producer, m.group_id, m.mission_id, m.work_item_id) == ("worker-0", "g1", "m1", "a")
    (ev,) = raw.result.events
    assert ev.type == "artifact.published" and ev.work_item_id == "a"
    assert ev.body["manifest"] == raw.manifest.wire()
    assert ev.body["artifact_hash"] == raw.ref.hash
    assert ev.body["manifest_id"] == raw.manifest.manifest_id
    assert check_event(ev, w.authority.public_key, None, w.workers[0].public_key) is None
    # a derived Artifact: its lineage comes from the index that publish_artifact fills
    derived = await _publish(
        w, store, b"summary: 3 rows", media_type="text/plain", sources=[raw.ref.hash]
    )
    index = ManifestIndex(store)
    assert index.get(raw.ref.hash) == [raw.manifest]
    tree = index.lineage(derived.ref.hash, public_keys={"worker-0": w.workers[0].public_key})
    assert tree.status == "ok" and [s.hash for s in tree.sources] == [raw.ref.hash]
    # the index can be rebuilt from the Group log alone
    fresh = ManifestIndex(FilesystemStore(tmp_path / "rebuilt"))
    assert fresh.ingest(w.authority.all_events(w.group)) == 2
    assert fresh.get(derived.ref.hash) == [derived.manifest]


async def test_publish_with_stale_lease_rejected__MW_11_3_c(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    st = FilesystemStore(tmp_path / "store")
    old = dict(w.leases["a"])
    w.ok(w.workers[0], "work.checkpoint", w.leased("a", checkpoint={"done": 1}))
    w.start(w.workers[0], "a")  # same owner and ownership epoch, a new lease id
    assert w.leases["a"]["ownership_epoch"] == old["ownership_epoch"]
    head = w.authority.head(w.group)
    lease = LeaseInfo.from_lease(old)
    with pytest.raises(PublishRejected) as exc:
        await publish_artifact(
            st,
            InProcess(w.authority),
            w.workers[0],
            w.group,
            lease,
            b"late",
            mission_id="m1",
            media_type="text/plain",
            schema_id=None,
            classification=Classification.PUBLIC,
            agent_card_version=0,
        )
    assert exc.value.code == "stale_lease"
    assert w.authority.head(w.group) == head
    assert ManifestIndex(st).get(exc.value.content_hash) == []  # refused: not in provenance
    # the lease check comes before the manifest check
    r = w.submit(
        w.workers[0],
        "artifact.publish",
        {**w.leased("a"), "manifest": {"x": 1}, "lease_id": old["lease_id"]},
    )
    assert r.rejection is not None and r.rejection.code == "stale_lease"
    assert (await _publish(w, st, b"on time")).result.accepted
    src = tmp_path / "big.bin"
    src.write_bytes(b"z" * 3_000_000)
    by_path = await _publish(w, st, src)  # a file is streamed, never read whole
    assert by_path.ref.size == 3_000_000 and st.get(by_path.ref.hash) == src.read_bytes()


def test_manifest_signed_by_someone_else_rejected__MW_13_1_b(tmp_path: Path) -> None:
    w = make_leased_world(tmp_path / "a.db")
    me, other = w.workers
    h = "ab" * 32
    cases = {
        "producer is another agent": (signed(other, h), "invalid_manifest"),
        "signed with another key": (sign_manifest(manifest(h), other.key), "manifest_signature"),
        "another key under my name": (
            sign_manifest(manifest(h), other.key).model_copy(update={"public_key": me.public_key}),
            "manifest_signature",
        ),
        "another WorkItem": (signed(me, h, work_item_id="b"), "invalid_manifest"),
        "another Mission": (signed(me, h, mission_id="m2"), "invalid_manifest"),
        "another Group": (signed(me, h, group_id="g2"), "invalid_manifest"),
        "an unpublished card version": (signed(me, h, agent_card_version=3), "invalid_manifest"),
    }
    head = w.authority.head(w.group)
    for name, (sm, code) in cases.items():
        r = w.submit(me, "artifact.publish", w.leased("a", manifest=sm.wire()))
        assert r.status == "rejected", name
        assert r.rejection is not None and r.rejection.code == code, (name, r.rejection)
    r = w.submit(me, "artifact.publish", w.leased("a", manifest={"hash": h}))
    assert r.rejection is not None and r.rejection.code == "invalid_manifest"
    assert "errors" in r.rejection.detail
    assert w.authority.head(w.group) == head  # nothing written
    w.uploaded("a", h)
    assert w.submit(me, "artifact.publish", w.leased("a", manifest=signed(me, h).wire())).accepted
