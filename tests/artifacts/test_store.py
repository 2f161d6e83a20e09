"""The artifact store contract, run on both backends (filesystem and a real S3 API server)."""

from __future__ import annotations

import hashlib
import io
import os
import stat
from pathlib import Path

import pytest

from missionweave.artifacts import (
    ArtifactIntegrityError,
    ArtifactNotFound,
    ArtifactRef,
    ArtifactStore,
    FilesystemStore,
    S3Store,
)
from tests.support.artifact_servers import corrupt

MiB = 1 << 20


class Trickle(io.RawIOBase):
    """A stream of unknown length that hands out at most 64 KiB per read (like a socket)."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = 65536 if n < 0 else min(n, 65536)
        chunk = bytes(self._data[self._pos : self._pos + n])
        self._pos += len(chunk)
        return chunk


def test_put_get_by_our_sha256__MW_13_1_a(store: ArtifactStore) -> None:
    data = b'{"files": 3}'
    ref = store.put(data, "application/json")
    assert ref == ArtifactRef(
        hash=hashlib.sha256(data).hexdigest(),
        size=len(data),
        media_type="application/json",
        uri=store.uri(ref.hash),
    )
    assert ref.uri.endswith(f"sha256/{ref.hash}")
    assert store.exists(ref.hash)
    assert store.get(ref.hash) == data
    assert store.put(b"").hash == hashlib.sha256(b"").hexdigest()
    assert store.get(hashlib.sha256(b"").hexdigest()) == b""


def test_multipart_stream_over_5_mib__MW_13_1_a(store: ArtifactStore, tmp_path: Path) -> None:
    data = os.urandom(12 * MiB)
    ref = store.put_stream(Trickle(data), "application/octet-stream")  # type: ignore[arg-type]
    assert (ref.hash, ref.size) == (hashlib.sha256(data).hexdigest(), 12 * MiB)
    assert store.get(ref.hash) == data
    out = tmp_path / "out" / "copy.bin"
    got = store.get_to_file(ref.hash, out)
    assert got.hash == ref.hash and got.size == ref.size
    assert out.read_bytes() == data
    src = tmp_path / "src.bin"
    src.write_bytes(data[: 6 * MiB])
    assert store.put_file(src).hash == hashlib.sha256(data[: 6 * MiB]).hexdigest()
    if isinstance(store, S3Store):  # no temporary upload is left behind
        keys = {o.object_name for o in store.client.list_objects(store.bucket, recursive=True)}
        small = hashlib.sha256(src.read_bytes()).hexdigest()
        assert keys == {f"sha256/{ref.hash}", f"sha256/{small}"}


def test_put_of_present_content_writes_nothing__MW_13_1_a(
    store: ArtifactStore, tmp_path: Path
) -> None:
    data = b"report v1 " * 100
    ref = store.put(data)
    # Replace the stored bytes with same-size garbage: a put that wrote again would repair it.
    corrupt(store, ref.hash, b"X" * len(data))
    for again in (
        lambda: store.put(data),
        lambda: store.put_stream(io.BytesIO(data)),
        lambda: store.put_file(_file(tmp_path, data)),
    ):
        assert again() == ArtifactRef(hash=ref.hash, size=ref.size, uri=ref.uri)
        with pytest.raises(ArtifactIntegrityError):
            store.get(ref.hash)


def _file(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "in.bin"
    p.write_bytes(data)
    return p


def test_read_verifies_hash__MW_13_1_d(store: ArtifactStore, tmp_path: Path) -> None:
    data = b"the genuine artifact"
    ref = store.put(data)
    corrupt(store, ref.hash, b"a tampered artifact, longer")
    bad = hashlib.sha256(b"a tampered artifact, longer").hexdigest()
    with pytest.raises(ArtifactIntegrityError) as exc:
        store.get(ref.hash)
    assert (exc.value.expected, exc.value.actual) == (ref.hash, bad)
    assert ref.hash in str(exc.value) and bad in str(exc.value)
    out = tmp_path / "out.bin"
    out.write_bytes(b"previous")
    with pytest.raises(ArtifactIntegrityError):
        store.get_to_file(ref.hash, out)
    assert out.read_bytes() == b"previous"  # never replaced by unverified bytes
    assert not any(p.name.startswith(".part-") for p in tmp_path.iterdir())
    # a put of the right content repairs an object whose size is wrong
    assert store.put(data).hash == ref.hash
    assert store.get(ref.hash) == data


def test_unknown_hash_is_not_found__MW_13_1_d(store: ArtifactStore, tmp_path: Path) -> None:
    missing = hashlib.sha256(b"never stored").hexdigest()
    assert not store.exists(missing)
    with pytest.raises(ArtifactNotFound) as exc:
        store.get(missing)
    assert exc.value.content_hash == missing
    with pytest.raises(ArtifactNotFound):
        store.get_to_file(missing, tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("bad", ["", "../etc/passwd", "A" * 64, "0" * 63, "sha256/" + "0" * 64])
def test_malformed_hash_is_refused(store: ArtifactStore, bad: str) -> None:
    for call in (store.get, store.exists, store.uri):
        with pytest.raises(ValueError):
            call(bad)


def test_side_documents_update_in_place(store: ArtifactStore) -> None:
    assert store.read_meta("manifests/x.json") is None
    assert store.update_meta("manifests/x.json", lambda cur: (cur or b"") + b"a") == b"a"
    assert store.update_meta("manifests/x.json", lambda cur: (cur or b"") + b"b") == b"ab"
    assert store.read_meta("manifests/x.json") == b"ab"
    with pytest.raises(ValueError):
        store.read_meta("../outside")


def test_filesystem_objects_are_read_only_and_written_atomically(tmp_path: Path) -> None:
    fs = FilesystemStore(tmp_path / "a")
    assert not (tmp_path / "a").exists()  # a store is created by writing, never by reading
    ref = fs.put_stream(io.BytesIO(b"x" * (3 * MiB + 7)))
    path = tmp_path / "a" / "sha256" / ref.hash
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert list((tmp_path / "a" / "tmp").iterdir()) == []
    assert ref.uri == path.as_uri()


def test_each_group_has_its_own_namespace__MW_13_3_d(store: ArtifactStore) -> None:
    """Content is addressed per Group: the same hash in one Group's namespace reaches nothing
    of another's, side documents included, and an id cannot climb out of ``groups/``."""
    g1, g2 = store.for_group("g1"), store.for_group("g2")
    ref = g1.put(b"g1 only", "text/plain")
    assert g1.get(ref.hash) == b"g1 only" and f"groups/g1/sha256/{ref.hash}" in ref.uri
    assert not g2.exists(ref.hash) and not store.exists(ref.hash)
    with pytest.raises(ArtifactNotFound):
        g2.get(ref.hash)
    g1.update_meta("manifests/x.json", lambda _: b"{}")
    assert g2.read_meta("manifests/x.json") is None and store.read_meta("manifests/x.json") is None
    assert g2.put(b"g1 only").hash == ref.hash and g2.get(ref.hash) == b"g1 only"  # its own copy
    for bad in ("", ".", "..", "a/b", "a\\b", "g\x00", "x" * 201):
        with pytest.raises(ValueError):
            store.for_group(bad)
