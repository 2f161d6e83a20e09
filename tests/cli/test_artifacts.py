"""``missionweave artifacts get|lineage``, run as a user runs it: a real process."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from missionweave.artifacts import FilesystemStore, ManifestIndex
from missionweave.protocol import Actor
from tests.artifact_servers import S3Endpoint, corrupt, signed

EXE = str(Path(sys.executable).with_name("missionweave"))


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "artifacts", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def _three_levels(root: Path) -> list[str]:
    """raw ← cleaned ← report: returns the hashes [report, cleaned, raw]."""
    st = FilesystemStore(root)
    a = Actor.generate("worker-0")
    index = ManifestIndex(st)
    raw = st.put(b"raw,rows\n1,2\n", "text/csv").hash
    cleaned = st.put(b"rows\n1\n2\n", "text/csv").hash
    report = st.put(b'{"rows": 2}', "application/json").hash
    index.add(signed(a, raw, media_type="text/csv"))
    index.add(signed(a, cleaned, media_type="text/csv", sources=[raw]))
    index.add(signed(a, report, sources=[cleaned]))
    return [report, cleaned, raw]


def test_cli_get_verifies_and_fails_in_one_line__MW_13_1_d(tmp_path: Path) -> None:
    root = tmp_path / "data" / "artifacts"
    report, cleaned, _ = _three_levels(root)
    out = tmp_path / "out" / "report.json"
    r = _run("get", report, "-o", str(out), "--store", str(root))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == b'{"rows": 2}' and r.stdout.startswith(f"ok {report}")
    corrupt(FilesystemStore(root), cleaned, b"rows\n1\n3\n")
    r = _run("get", cleaned, "-o", str(tmp_path / "c.csv"), "--store", str(root))
    assert r.returncode == 1
    line = _one_line_error(r)
    assert cleaned in line and hashlib.sha256(b"rows\n1\n3\n").hexdigest() in line
    assert not (tmp_path / "c.csv").exists()
    # the default store is $MISSIONWEAVE_DATA_DIR/artifacts
    r = _run(
        "get",
        report,
        "-o",
        str(tmp_path / "d.json"),
        env={"MISSIONWEAVE_DATA_DIR": str(tmp_path / "data")},
    )
    assert r.returncode == 0, r.stderr
    for args in (
        ("get", "0" * 64, "-o", str(tmp_path / "x"), "--store", str(root)),
        ("get", "not-a-hash", "-o", str(tmp_path / "x"), "--store", str(root)),
        ("get", report, "-o", str(tmp_path / "x"), "--store", str(tmp_path / "nowhere")),
        ("lineage", report, "--store", str(tmp_path / "nowhere")),
    ):
        r = _run(*args)
        assert r.returncode == 2
        _one_line_error(r)


def test_cli_get_into_a_directory_writes_the_hash_there(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    report, _, _ = _three_levels(root)
    out = tmp_path / "out"
    out.mkdir()
    r = _run("get", report, "-o", str(out), "--store", str(root))
    assert r.returncode == 0, r.stderr
    assert (out / report).read_bytes() == b'{"rows": 2}'
    assert r.stdout == f"ok {report} 11 bytes -> {out / report}\n"
    a_file = tmp_path / "f"
    a_file.write_text("")
    r = _run("get", report, "-o", str(a_file / "x"), "--store", str(root))
    assert r.returncode == 2
    assert _one_line_error(r) == f"error: cannot write {a_file / 'x'}: {a_file} is not a directory"


def test_cli_lineage_of_an_artifact_without_manifest_is_an_error(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    report, _, raw = _three_levels(root)
    for h in ("0" * 64, FilesystemStore(root).put(b"unsigned").hash):
        r = _run("lineage", h, "--store", str(root))
        assert r.returncode == 2 and r.stdout == ""
        assert _one_line_error(r) == f"error: no manifest for artifact {h} in {root}"
    # an ancestor without a manifest is part of the answer, not an error
    (root / "manifests" / f"{raw}.json").unlink()
    r = _run("lineage", report, "--store", str(root))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[2] == f"    └── {raw}  (no manifest)"


def test_cli_lineage_tree_and_mermaid__MW_13_1_c(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    report, cleaned, raw = _three_levels(root)
    r = _run("lineage", report, "--store", str(root))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(report) and "application/json" in lines[0]
    assert lines[1] == f"└── {cleaned}  " + lines[1].split("  ", 1)[1]
    assert lines[2].startswith(f"    └── {raw}") and "text/csv" in lines[2]
    r = _run("lineage", report, "--store", str(root), "--mermaid")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("flowchart BT")
    assert f"a{raw[:16]} --> a{cleaned[:16]}" in r.stdout
    assert f"a{cleaned[:16]} --> a{report[:16]}" in r.stdout


def test_cli_lineage_survives_a_deeply_nested_manifest__MW_13_1_c(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    report, cleaned, _ = _three_levels(root)
    deep = b'{"manifests":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    (root / "manifests" / f"{cleaned}.json").write_bytes(deep)
    r = _run("lineage", report, "--store", str(root))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[1] == f"└── {cleaned}  (unverified, 1 rejected)"


def test_cli_get_from_s3__MW_13_1_d(tmp_path: Path, s3_server: S3Endpoint) -> None:
    st = s3_server.store()
    ref = st.put(b"in the bucket")
    env = {
        "MISSIONWEAVE_S3_ACCESS_KEY": s3_server.access_key,
        "MISSIONWEAVE_S3_SECRET_KEY": s3_server.secret_key,
    }
    s3 = ("--s3-endpoint", s3_server.endpoint, "--s3-bucket", st.bucket)
    r = _run("get", ref.hash, "-o", str(tmp_path / "o"), *s3, env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o").read_bytes() == b"in the bucket"
    corrupt(st, ref.hash, b"swapped in the bucket")
    r = _run("get", ref.hash, "-o", str(tmp_path / "p"), *s3, env=env)
    assert r.returncode == 1 and ref.hash in _one_line_error(r)
