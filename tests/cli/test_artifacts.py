"""``missionweave artifacts get|lineage``, run as a user runs it: a real process, signing its
reads with a member's key against a real Authority, which alone holds the artifact store."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from missionweave.artifacts import ArtifactStore, FilesystemStore
from missionweave.dev import free_port
from missionweave.protocol import Actor
from tests.support.artifact_servers import S3Endpoint, corrupt, signed
from tests.support.cli_processes import amw
from tests.support.serving import served
from tests.support.world import World

RAW, CLEANED, REPORT = b"raw,rows\n1,2\n", b"rows\n1\n2\n", b'{"rows": 2}'


def _three_levels(w: World, store: ArtifactStore, *, raw_manifest: bool = True) -> list[str]:
    """raw ← cleaned ← report, stored in g1's namespace and published by worker-0 in m1
    (``artifact.published``); returns the hashes [report, cleaned, raw]."""
    st = store.for_group(w.group)
    raw, cleaned = st.put(RAW, "text/csv").hash, st.put(CLEANED, "text/csv").hash
    report = st.put(REPORT, "application/json").hash
    a = w.workers[0]
    w.authorize("a")
    w.lease("a", a)
    manifests = [
        signed(a, cleaned, media_type="text/csv", sources=[raw]),
        signed(a, report, sources=[cleaned]),
    ]
    if raw_manifest:
        manifests.insert(0, signed(a, raw, media_type="text/csv"))
    for m in manifests:
        w.uploaded("a", m.manifest.content_hash)
        w.ok(a, "artifact.publish", w.leased("a", manifest=m.wire()))
    return [report, cleaned, raw]


def _key(w: World, tmp_path: Path, actor: Actor | None = None) -> str:
    """A member's key file (worker-0's: it worked in m1, so it may read m1 with ``--mission
    m1``), as a person holding it passes it."""
    actor = actor or w.workers[0]
    path = tmp_path / f"{actor.agent_id}.pem"
    actor.key.to_file(path)
    return str(path)


def _one_line_error(r: Any) -> str:
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return str(lines[0])


async def test_cli_get_verifies_and_fails_in_one_line__MW_13_1_d(
    world: World, tmp_path: Path
) -> None:
    store = FilesystemStore(tmp_path / "data" / "artifacts")
    report, cleaned, _ = _three_levels(world, store)
    async with served(world, store) as url:
        reader = ("--group", "g1", "--key", _key(world, tmp_path), "--authority-url", url)
        reader += ("--mission", "m1")  # a person names a Mission it may read (MW-13.3-d)
        out = tmp_path / "out" / "report.json"
        r = await amw("artifacts", "get", report, "-o", str(out), *reader)
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == REPORT and r.stdout.startswith(f"ok {report}")
        corrupt(store.for_group("g1"), cleaned, b"rows\n1\n3\n")
        r = await amw("artifacts", "get", cleaned, "-o", str(tmp_path / "c.csv"), *reader)
        assert r.returncode == 1
        line = _one_line_error(r)
        assert cleaned in line and hashlib.sha256(b"rows\n1\n3\n").hexdigest() in line
        assert not (tmp_path / "c.csv").exists()
        nowhere = ("--group", "g1", "--key", _key(world, tmp_path))
        dead = f"http://127.0.0.1:{free_port()}"
        for args in (
            ("get", "0" * 64, "-o", str(tmp_path / "x"), *reader),
            ("get", "not-a-hash", "-o", str(tmp_path / "x"), *reader),
            ("get", report, "-o", str(tmp_path / "x"), *nowhere, "--authority-url", dead),
            ("lineage", report, *nowhere, "--authority-url", dead),
            ("lineage", "not-a-hash", *reader[:-2]),  # lineage reads the log: no --mission
        ):
            r = await amw("artifacts", *args)
            assert r.returncode == 2, (args, r.stderr)
            _one_line_error(r)
            assert not (tmp_path / "x").exists()


async def test_cli_get_into_a_directory_writes_the_hash_there(world: World, tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    report, _, _ = _three_levels(world, store)
    async with served(world, store) as url:
        reader = ("--group", "g1", "--key", _key(world, tmp_path), "--authority-url", url)
        reader += ("--mission", "m1")  # a person names a Mission it may read (MW-13.3-d)
        out = tmp_path / "out"
        out.mkdir()
        r = await amw("artifacts", "get", report, "-o", str(out), *reader)
        assert r.returncode == 0, r.stderr
        assert (out / report).read_bytes() == REPORT
        assert r.stdout == f"ok {report} 11 bytes -> {out / report}\n"
        a_file = tmp_path / "f"
        a_file.write_text("")
        r = await amw("artifacts", "get", report, "-o", str(a_file / "x"), *reader)
        assert r.returncode == 2
        line = _one_line_error(r)
        assert line == f"error: cannot write {a_file / 'x'}: {a_file} is not a directory"


async def test_cli_lineage_of_an_artifact_without_manifest_is_an_error(
    world: World, tmp_path: Path
) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    report, _, raw = _three_levels(world, store, raw_manifest=False)
    async with served(world, store) as url:
        reader = ("--group", "g1", "--key", _key(world, tmp_path), "--authority-url", url)
        unsigned = store.for_group("g1").put(b"unsigned").hash
        for h in ("0" * 64, unsigned):
            r = await amw("artifacts", "lineage", h, *reader)
            assert r.returncode == 2 and r.stdout == ""
            assert _one_line_error(r) == f"error: no manifest for artifact {h} in group g1"
        # an ancestor without a manifest is part of the answer, not an error
        r = await amw("artifacts", "lineage", report, *reader)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[2] == f"    └── {raw}  (no manifest)"


async def test_cli_lineage_tree_and_mermaid__MW_13_1_c(world: World, tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    report, cleaned, raw = _three_levels(world, store)
    async with served(world, store) as url:
        reader = ("--group", "g1", "--key", _key(world, tmp_path), "--authority-url", url)
        r = await amw("artifacts", "lineage", report, *reader)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].startswith(report) and "application/json" in lines[0]
        assert lines[1] == f"└── {cleaned}  " + lines[1].split("  ", 1)[1]
        assert lines[2].startswith(f"    └── {raw}") and "text/csv" in lines[2]
        r = await amw("artifacts", "lineage", report, *reader, "--mermaid")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("flowchart BT")
        assert f"a{raw[:16]} --> a{cleaned[:16]}" in r.stdout
        assert f"a{cleaned[:16]} --> a{report[:16]}" in r.stdout


async def test_cli_get_from_s3_needs_no_store_credential__MW_13_1_d__MW_13_3_d(
    world: World, tmp_path: Path, s3_server: S3Endpoint
) -> None:
    """The Authority holds the bucket; the person's process gets a presigned URL for the one
    object, with no S3 credential of its own (none in its environment)."""
    assert not {"MISSIONWEAVE_S3_ACCESS_KEY", "MISSIONWEAVE_S3_SECRET_KEY"} & set(os.environ)
    st = s3_server.store()
    ref = st.for_group("g1").put(b"in the bucket")
    async with served(world, st) as url:
        # a person who directs the Group's Missions (the coordinator) names one it may read;
        # the bytes were put in by the store's holder: an external input (MW-13.3-d)
        key = _key(world, tmp_path, world.coordinator)
        reader = ("--group", "g1", "--key", key, "--authority-url", url, "--mission", "m1")
        r = await amw("artifacts", "get", ref.hash, "-o", str(tmp_path / "o"), *reader)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "o").read_bytes() == b"in the bucket"
        corrupt(st.for_group("g1"), ref.hash, b"swapped in the bucket")
        r = await amw("artifacts", "get", ref.hash, "-o", str(tmp_path / "p"), *reader)
        assert r.returncode == 1 and ref.hash in _one_line_error(r)
