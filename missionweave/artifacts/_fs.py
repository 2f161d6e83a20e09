"""The filesystem artifact store: the embedded default (docs/design.md §8).

Layout under ``root`` (one such tree per Group under ``root/groups/<group_id>/``, which
:meth:`FilesystemStore.for_group` opens; only the Authority and the coordinator open the root)::

    sha256/<hex>             content, read-only (0444) once written
    manifests/<hex>.json     side documents (signed manifests, see ManifestIndex)
    tmp/                     partial writes; same filesystem, so the final rename is atomic
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ._errors import ArtifactIntegrityError, ArtifactNotFound
from ._store import (
    CHUNK_BYTES,
    ArtifactRef,
    HashingReader,
    check_hash,
    check_meta_name,
    group_prefix,
    put_file_once,
    traced,
)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _temp_in(directory: Path) -> Iterator[tuple[BinaryIO, Path]]:
    """A temp file in ``directory``, removed on exit unless the caller renamed it away."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, prefix=".part-")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f, tmp
    finally:
        tmp.unlink(missing_ok=True)


class FilesystemStore:
    """A content-addressed store in a local directory (implements :class:`ArtifactStore`).

    Writes are atomic: the bytes go to a temp file under ``root/tmp`` while being hashed, are
    fsynced, made read-only and renamed to ``root/sha256/<hex>``; the directory is fsynced too.
    A reader never sees a partial object, and a crash leaves at most a stray temp file. Every
    read re-hashes the file (MW-13.1-d).

    Args:
        root: the store directory; created on the first write, never by a read.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()

    def __repr__(self) -> str:
        return f"FilesystemStore({str(self.root)!r})"

    def for_group(self, group_id: str) -> FilesystemStore:
        """The store of Group ``group_id``'s namespace: ``root/groups/<group_id>``.

        Raises:
            ValueError: ``group_id`` cannot name a directory safely.
        """
        return FilesystemStore(self.root / group_prefix(group_id))

    def path(self, content_hash: str) -> Path:
        """The file of ``content_hash`` (whether or not it exists).

        Raises:
            ValueError: ``content_hash`` is not 64 lowercase hex characters.
        """
        return self._path(content_hash)

    def _path(self, content_hash: str) -> Path:
        return self.root / "sha256" / check_hash(content_hash)

    def uri(self, content_hash: str) -> str:
        """``file://`` URI of the object (a location, not an identity)."""
        return self._path(content_hash).as_uri()

    def _ref(self, content_hash: str, size: int, media_type: str | None) -> ArtifactRef:
        return ArtifactRef(
            hash=content_hash, size=size, media_type=media_type, uri=self.uri(content_hash)
        )

    def exists(self, content_hash: str) -> bool:
        """Whether ``sha256/<hex>`` exists (its content is verified on read, not here)."""
        return self._path(content_hash).is_file()

    def _present(self, content_hash: str, size: int) -> bool:
        # A same-size file is taken as present: re-writing it would be the "second write" a
        # content-addressed put must avoid. A size mismatch is certain corruption: replace it.
        try:
            return self._path(content_hash).stat().st_size == size
        except FileNotFoundError:
            return False

    def _commit(self, tmp: Path, content_hash: str, size: int) -> None:
        final = self._path(content_hash)
        if self._present(content_hash, size):
            return  # the temp file is removed by _temp_in
        final.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o444)
        os.replace(tmp, final)
        _fsync_dir(final.parent)

    @traced("put", "filesystem")
    def put(self, data: bytes, media_type: str | None = None) -> ArtifactRef:
        """Store ``data`` (bytes); a no-op, writing nothing, when already present.
        Implements MW-13.1-a."""
        h = hashlib.sha256(data).hexdigest()
        if not self._present(h, len(data)):
            with _temp_in(self.root / "tmp") as (f, tmp):
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                f.close()
                self._commit(tmp, h, len(data))
        return self._ref(h, len(data), media_type)

    @traced("put", "filesystem")
    def put_stream(self, stream: BinaryIO, media_type: str | None = None) -> ArtifactRef:
        """Store what ``stream`` yields, 1 MiB at a time, hashing while writing the temp file.

        Memory stays bounded by :data:`CHUNK_BYTES` whatever the size. When the content turns
        out to be present already, the temp file is dropped and the object is not touched.
        """
        reader = HashingReader(stream)
        with _temp_in(self.root / "tmp") as (f, tmp):
            while chunk := reader.read(CHUNK_BYTES):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
            f.close()
            self._commit(tmp, reader.hexdigest(), reader.size)
        return self._ref(reader.hexdigest(), reader.size, media_type)

    @traced("put", "filesystem")
    def put_file(self, path: str | os.PathLike[str], media_type: str | None = None) -> ArtifactRef:
        """Store a file's content: hashed first, so present content costs one read, no write.

        Raises:
            FileNotFoundError: no file at ``path``.
        """
        return put_file_once(self, path, media_type)

    @traced("get", "filesystem")
    def get(self, content_hash: str) -> bytes:
        """The content of ``content_hash``, verified. Implements MW-13.1-d.

        Raises:
            ValueError: ``content_hash`` is not 64 lowercase hex characters.
            ArtifactNotFound: no such object.
            ArtifactIntegrityError: the file's SHA-256 is not ``content_hash`` (MW-13.1-d).
        """
        path = self._path(content_hash)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(content_hash, str(self.root)) from None
        actual = hashlib.sha256(data).hexdigest()
        if actual != content_hash:
            raise ArtifactIntegrityError(content_hash, actual, str(path))
        return data

    @traced("get", "filesystem")
    def get_to_file(self, content_hash: str, path: str | os.PathLike[str]) -> ArtifactRef:
        """Copy the content to ``path`` in 1 MiB steps, verified before it appears there.

        The copy goes to a temp file beside ``path`` and is renamed into place only when its
        SHA-256 matches; on a mismatch ``path`` is left as it was.

        Raises:
            ValueError: ``content_hash`` is malformed.
            ArtifactNotFound: no such object.
            ArtifactIntegrityError: the stored bytes do not hash to ``content_hash``.
        """
        src = self._path(content_hash)
        dest = Path(path)
        try:
            source = open(src, "rb")  # closed by the with below
        except FileNotFoundError:
            raise ArtifactNotFound(content_hash, str(self.root)) from None
        with source, _temp_in(dest.parent) as (f, tmp):
            reader = HashingReader(source)
            while chunk := reader.read(CHUNK_BYTES):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
            f.close()
            if reader.hexdigest() != content_hash:
                raise ArtifactIntegrityError(content_hash, reader.hexdigest(), str(src))
            os.chmod(tmp, 0o644)  # mkstemp made it 0600; a fetched file is an ordinary file
            os.replace(tmp, dest)
        return ArtifactRef(hash=content_hash, size=reader.size, uri=self.uri(content_hash))

    def read_meta(self, name: str) -> bytes | None:
        """The side document ``root/<name>``, or ``None``."""
        try:
            return (self.root / check_meta_name(name)).read_bytes()
        except FileNotFoundError:
            return None

    def update_meta(self, name: str, update: Callable[[bytes | None], bytes]) -> bytes:
        """Replace ``root/<name>`` with ``update(current)`` atomically, under an exclusive
        ``flock`` on ``<dir>/.lock`` so concurrent writers (threads or processes) never lose
        an update."""
        target = self.root / check_meta_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                current = target.read_bytes() if target.exists() else None
                new = update(current)
                if new != current:
                    with _temp_in(target.parent) as (f, tmp):
                        f.write(new)
                        f.flush()
                        os.fsync(f.fileno())
                        f.close()
                        os.replace(tmp, target)
                    _fsync_dir(target.parent)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
        return new
