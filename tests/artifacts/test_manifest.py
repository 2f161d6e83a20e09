"""Signed manifests (MW-13.1-b), the manifest index and provenance lineage (MW-13.1-c)."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from missionweave.artifacts import ArtifactStore, ManifestError, ManifestIndex, to_mermaid, to_text
from missionweave.protocol import (
    Actor,
    ArtifactManifest,
    CanonicalizationError,
    Classification,
    SigningKey,
    canonical_bytes,
    digest,
    sign_manifest,
    verify_manifest,
)
from tests.support.artifact_servers import manifest, signed

H = [hashlib.sha256(bytes([i])).hexdigest() for i in range(8)]

MW_13_1_B_FIELDS = {
    "content_hash", "media_type", "schema_id", "producer", "agent_card_version", "mission_id",
    "group_id", "work_item_id", "sources", "tool_versions", "model_versions",
    "capability_versions", "created_at_ms", "classification", "size_bytes", "uri",
}  # fmt: skip


def test_every_manifest_field_is_required__MW_13_1_b() -> None:
    full = manifest(H[0]).model_dump(mode="json")
    assert set(full) == MW_13_1_B_FIELDS
    for name in MW_13_1_B_FIELDS:
        partial = {k: v for k, v in full.items() if k != name}
        with pytest.raises(ValidationError) as exc:
            ArtifactManifest.model_validate(partial)
        assert exc.value.errors()[0]["type"] == "missing", name
    with pytest.raises(ValidationError):
        ArtifactManifest.model_validate({**full, "reasoning": "step by step…"})  # extra=forbid
    with pytest.raises(ValidationError):
        ArtifactManifest.model_validate({**full, "classification": "secret"})
    with pytest.raises(ValidationError):
        ArtifactManifest.model_validate({**full, "sources": ["not-a-hash"]})


def test_manifest_is_integers_only_and_its_id_is_its_digest__MW_13_1_b() -> None:
    m = manifest(H[0], sources=[H[2], H[1], H[2]])
    assert m.sources == [H[1], H[2]]  # sorted, unique: one canonical form
    assert m.manifest_id == digest(m.wire()) == hashlib.sha256(m.signing_bytes()).hexdigest()
    assert m.signing_bytes() == canonical_bytes(m.wire())
    with pytest.raises(CanonicalizationError):
        canonical_bytes({**m.wire(), "size_bytes": 1.5})


def test_manifest_sign_verify_and_tamper__MW_13_1_b() -> None:
    producer = Actor.generate("worker-0")
    s = signed(producer, H[0])
    assert verify_manifest(s, producer.public_key)
    assert not verify_manifest(s, SigningKey.generate().public_key)
    for change in (
        {"size_bytes": 2},
        {"sources": [H[1]]},
        {"classification": Classification.PUBLIC},
        {"uri": "s3://elsewhere/x"},
        {"producer": "worker-1"},
    ):
        forged = s.model_copy(update={"manifest": s.manifest.model_copy(update=change)})
        assert not verify_manifest(forged, producer.public_key), change
    # a manifest re-signed by another key does not pass as the producer's
    other = sign_manifest(s.manifest, SigningKey.generate())
    assert not verify_manifest(other, producer.public_key)


def _chain(index: ManifestIndex, a: Actor) -> None:
    """H0 ← H1 ← {H2, H3}; H2 ← H4 (three levels of ancestors below H0)."""
    index.add(signed(a, H[0], sources=[H[1]]))
    index.add(signed(a, H[1], sources=[H[2], H[3]], work_item_id="b"))
    index.add(signed(a, H[2], sources=[H[4]], media_type="text/csv"))
    index.add(signed(a, H[3]))
    index.add(signed(a, H[4], classification="confidential"))


def test_lineage_tree_and_mermaid_three_levels__MW_13_1_c(store: ArtifactStore) -> None:
    a = Actor.generate("worker-0")
    index = ManifestIndex(store)
    _chain(index, a)
    tree = index.lineage(H[0])
    assert tree.status == "ok" and [s.hash for s in tree.sources] == [H[1]]
    level1 = tree.sources[0]
    assert sorted(s.hash for s in level1.sources) == sorted([H[2], H[3]])
    level2 = {s.hash: s for s in level1.sources}
    assert [s.hash for s in level2[H[2]].sources] == [H[4]]
    assert level2[H[2]].sources[0].manifests[0].manifest.classification == "confidential"
    assert {n.hash for n in tree.walk()} == set(H[:5])
    text = to_text(tree)
    lines = text.splitlines()
    assert lines[0].startswith(H[0]) and "by worker-0" in lines[0]
    assert any(line.strip("│├└─ ").startswith(H[4]) and line.startswith("    ") for line in lines)
    assert len(lines) == 5
    mm = to_mermaid(tree)
    assert mm.startswith("flowchart BT")
    for child, parent in ((H[1], H[0]), (H[2], H[1]), (H[3], H[1]), (H[4], H[2])):
        assert f"a{child[:16]} --> a{parent[:16]}" in mm
    assert mm.count("-->") == 4 and mm.count('["') == 5


def test_lineage_is_cycle_safe_and_shares_diamonds__MW_13_1_c(store: ArtifactStore) -> None:
    a = Actor.generate("worker-0")
    index = ManifestIndex(store)
    # H0 ← {H1, H2} ← H3 (a diamond) and H3 ← H0 (a cycle, impossible for honest hashes but a
    # forged or buggy index must not hang the tool)
    index.add(signed(a, H[0], sources=[H[1], H[2]]))
    index.add(signed(a, H[1], sources=[H[3]]))
    index.add(signed(a, H[2], sources=[H[3]]))
    index.add(signed(a, H[3], sources=[H[0]]))
    tree = index.lineage(H[0])
    h1, h2 = tree.sources
    assert h1.sources[0] is h2.sources[0]  # one node for H3, reached twice
    assert h1.sources[0].sources[0].status == "cycle"
    assert "(see above)" in to_text(tree)
    mm = to_mermaid(tree)
    assert f"a{H[0][:16]} --> a{H[3][:16]}" in mm and mm.count('["') == 4


def test_lineage_follows_only_verified_manifests__MW_13_1_c(store: ArtifactStore) -> None:
    a, mallory = Actor.generate("worker-0"), Actor.generate("worker-1")
    index = ManifestIndex(store)
    index.add(signed(a, H[0], sources=[H[1]]))
    forged = signed(a, H[1], sources=[H[5]])
    forged = forged.model_copy(update={"signature": signed(mallory, H[1]).signature})
    with pytest.raises(ManifestError):
        index.add(forged)
    # slip the forged manifest into the index behind its back
    store.update_meta(
        f"manifests/{H[1]}.json", lambda _: json.dumps({"manifests": [forged.wire()]}).encode()
    )
    tree = index.lineage(H[0])
    assert tree.sources[0].status == "unverified" and tree.sources[0].sources == []
    assert "(unverified, 1 rejected)" in to_text(tree)
    # pinned keys: a manifest signed by a key other than the producer's pinned key is refused
    index.add(signed(mallory, H[2]))
    assert index.lineage(H[2], public_keys={"worker-1": a.public_key}).status == "unverified"
    assert index.lineage(H[2], public_keys={"worker-1": mallory.public_key}).status == "ok"
    assert index.lineage(H[6]).status == "no_manifest"


def test_index_is_idempotent_and_keeps_every_producer__MW_13_1_b(store: ArtifactStore) -> None:
    a, b = Actor.generate("worker-0"), Actor.generate("worker-1")
    index = ManifestIndex(store)
    first = signed(a, H[0])
    index.add(first)
    index.add(first)
    index.add(signed(b, H[0], work_item_id="b"))
    got = index.get(H[0])
    assert len(got) == 2 and {m.manifest.producer for m in got} == {"worker-0", "worker-1"}
    assert store.read_meta(f"manifests/{H[0]}.json") is not None


def _deep_chain(index: ManifestIndex, n: int) -> list[str]:
    """hashes[0] ← hashes[1] ← … ← hashes[n-1]: a chain of ``n`` manifests."""
    a = Actor.generate("worker-0")
    hashes = [hashlib.sha256(b"deep %d" % i).hexdigest() for i in range(n)]
    for i, h in enumerate(hashes):
        index.add(signed(a, h, sources=hashes[i + 1 : i + 2]))
    return hashes


def test_lineage_of_a_chain_deeper_than_the_stack_is_walked__MW_13_1_c(
    store: ArtifactStore,
) -> None:
    index = ManifestIndex(store)
    n = 1500  # deeper than Python's recursion limit (1000)
    hashes = _deep_chain(index, n)
    tree = index.lineage(hashes[0], max_depth=10_000)
    nodes = list(tree.walk())
    assert [node.hash for node in nodes] == hashes
    assert all(node.status == "ok" for node in nodes)
    assert len(to_text(tree).splitlines()) == n
    assert to_mermaid(tree).count("-->") == n - 1
    # the default bound stops the walk with a marked node, never an error
    bounded = [node for node in index.lineage(hashes[0]).walk()]
    assert bounded[-1].status == "depth_limit" and len(bounded) == 258


def test_a_deeply_nested_manifest_document_is_corrupt_not_a_crash__MW_13_1_c(
    store: ArtifactStore,
) -> None:
    index = ManifestIndex(store)
    a = Actor.generate("worker-0")
    index.add(signed(a, H[0], sources=[H[1]]))
    deep = b'{"manifests":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    store.update_meta(f"manifests/{H[1]}.json", lambda _: deep)
    with pytest.raises(ManifestError):
        index.get(H[1])
    tree = index.lineage(H[0])
    assert tree.status == "ok" and tree.sources[0].status == "unverified"
    assert tree.sources[0].rejected == 1
