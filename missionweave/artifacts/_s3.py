"""The S3 artifact store (MinIO or any S3 API) through the ``minio`` client (docs/design.md §8)."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO, cast

import urllib3
from minio import Minio
from minio.commonconfig import CopySource
from minio.error import MinioException, S3Error

from ._errors import ArtifactIntegrityError, ArtifactNotFound, ArtifactStoreError
from ._fs import _temp_in
from ._store import (
    CHUNK_BYTES,
    ArtifactRef,
    HashingReader,
    check_meta_name,
    content_key,
    group_prefix,
    put_file_once,
    traced,
)

#: S3's smallest multipart part (5 MiB); every part but the last must be at least this big.
MIN_PART_BYTES = 5 << 20
_MISSING = frozenset({"NoSuchKey", "NoSuchObject", "ResourceNotFound", "NoSuchBucket"})


class S3Store:
    """A content-addressed store in one S3 bucket (implements :class:`ArtifactStore`).

    Keys: content under ``sha256/<hex>``, side documents under ``manifests/<hex>.json``,
    partial uploads under ``tmp/`` (give that prefix a lifecycle rule expiring objects after a
    day: a crash can leave one behind) — each under :attr:`prefix`, which is
    ``groups/<group_id>/`` in the view :meth:`for_group` returns: content is addressed per
    Group. Only the Authority (and the coordinator) hold the credentials; agents get one
    object at a time through :meth:`presign`, granted by the Authority.

    How a stream of unknown length is stored (:meth:`put_stream`): its SHA-256 is not known
    until the last byte, and the object key depends on it. So the stream is uploaded once, as
    a multipart upload in ``part_size``-byte parts (minio's ``put_object`` with ``length=-1``;
    sequential, so at most about two parts are in memory), to a unique temporary key
    ``tmp/<uuid>`` while a :class:`HashingReader` hashes exactly the bytes sent. Then, unless
    ``sha256/<hex>`` already holds that content, a server-side copy (``copy_object``, which
    minio turns into a multipart ``compose_object`` above 5 GiB) creates the final key, and the
    temporary object is deleted. The bytes cross the network once; the final key is written
    once, whole, or not at all. Hashing first would need a seekable stream or a local spool
    file; :meth:`put_file` does hash first, to skip the upload of content already present.
    :meth:`put` (bytes in memory) knows its hash up front and writes the final key directly.

    Args:
        endpoint: ``host:port`` of the S3 API, without a scheme.
        access_key: the access key id.
        secret_key: the secret key.
        bucket: the bucket; created if missing (unless ``create_bucket`` is false).
        secure: use HTTPS.
        region: the bucket's region (``None``: ask the server).
        part_size: multipart part size in bytes (≥ 5 MiB; 8 MiB by default).
        create_bucket: create the bucket when it does not exist.

    Raises:
        ValueError: ``part_size`` is below 5 MiB.
        ArtifactStoreError: the server cannot be reached, or the bucket is missing and
            ``create_bucket`` is false.
    """

    def __init__(
        self,
        endpoint: str,
        access_key: str,
        secret_key: str,
        bucket: str,
        *,
        secure: bool = False,
        region: str | None = None,
        part_size: int = 8 << 20,
        create_bucket: bool = True,
    ) -> None:
        if part_size < MIN_PART_BYTES:
            raise ValueError(f"part_size must be at least {MIN_PART_BYTES} bytes")
        self.endpoint, self.bucket, self.part_size = endpoint, bucket, part_size
        self.client = Minio(
            endpoint, access_key=access_key, secret_key=secret_key, secure=secure, region=region
        )
        with self._errors():
            if not self.client.bucket_exists(bucket):
                if not create_bucket:
                    raise ArtifactStoreError(f"no bucket {bucket!r} at {endpoint}")
                try:
                    self.client.make_bucket(bucket)
                except S3Error as exc:  # another process created it first
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise

        #: Prepended to every key: ``""`` at the bucket's root, ``groups/<id>/`` in a Group's view.
        self.prefix = ""

    def __repr__(self) -> str:
        return f"S3Store({self.endpoint!r}, bucket={self.bucket!r}, prefix={self.prefix!r})"

    def for_group(self, group_id: str) -> S3Store:
        """This store over Group ``group_id``'s namespace (keys under ``groups/<group_id>/``),
        sharing the connection pool.

        Raises:
            ValueError: ``group_id`` cannot name a namespace safely.
        """
        view = copy.copy(self)
        view.prefix = self.prefix + group_prefix(group_id)
        return view

    def _key(self, content_hash: str) -> str:
        return self.prefix + content_key(content_hash)

    def presign(self, method: str, content_hash: str, expires: timedelta) -> str:
        """A URL that lets its holder ``GET`` or ``PUT`` this one object until ``expires`` from
        now, with no credentials (S3 Signature V4 query authentication). The Authority hands
        these to members it has checked (docs/authority.md "Artifacts").

        Raises:
            ValueError: ``method`` is not ``GET``/``PUT``, or ``content_hash`` is malformed.
            ArtifactStoreError: the server could not be asked for the bucket's region.
        """
        if method not in ("GET", "PUT"):
            raise ValueError(f"cannot presign {method!r}")
        with self._errors():
            return str(
                self.client.get_presigned_url(
                    method, self.bucket, self._key(content_hash), expires=expires
                )
            )

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn backend failures into :class:`ArtifactStoreError` naming the endpoint."""
        try:
            yield
        except (MinioException, urllib3.exceptions.HTTPError) as exc:
            raise ArtifactStoreError(f"S3 {self.endpoint}/{self.bucket}: {exc}") from exc

    def uri(self, content_hash: str) -> str:
        """``s3://<bucket>/sha256/<hex>`` (a location, not an identity)."""
        return f"s3://{self.bucket}/{self._key(content_hash)}"

    def _ref(self, content_hash: str, size: int, media_type: str | None) -> ArtifactRef:
        return ArtifactRef(
            hash=content_hash, size=size, media_type=media_type, uri=self.uri(content_hash)
        )

    def _size(self, key: str) -> int | None:
        """The object's size in bytes, or ``None`` when there is none."""
        try:
            with self._errors():
                return int(self.client.stat_object(self.bucket, key).size or 0)
        except ArtifactStoreError as exc:
            if isinstance(exc.__cause__, S3Error) and exc.__cause__.code in _MISSING:
                return None
            raise

    def exists(self, content_hash: str) -> bool:
        """Whether ``sha256/<hex>`` exists (a HEAD request; content is verified on read)."""
        return self._size(self._key(content_hash)) is not None

    def _present(self, content_hash: str, size: int) -> bool:
        # Same size: present, write nothing. Another size: certainly corrupt, replace it.
        return self._size(self._key(content_hash)) == size

    @traced("put", "s3")
    def put(self, data: bytes, media_type: str | None = None) -> ArtifactRef:
        """Store ``data``: one PUT to ``sha256/<hex>``, or nothing when already present."""
        h = hashlib.sha256(data).hexdigest()
        if not self._present(h, len(data)):
            with self._errors():
                self.client.put_object(
                    self.bucket,
                    self._key(h),
                    io.BytesIO(data),
                    len(data),
                    content_type=media_type or "application/octet-stream",
                )
        return self._ref(h, len(data), media_type)

    @traced("put", "s3")
    def put_stream(self, stream: BinaryIO, media_type: str | None = None) -> ArtifactRef:
        """Store what ``stream`` yields via a temporary multipart upload (see the class doc).

        Memory is bounded by about two ``part_size`` buffers whatever the length.

        Raises:
            ArtifactStoreError: the upload failed (the temporary object is removed).
        """
        reader = HashingReader(stream)
        tmp = f"{self.prefix}tmp/{uuid.uuid4().hex}"
        with self._errors():
            try:
                self.client.put_object(
                    self.bucket,
                    tmp,
                    cast(BinaryIO, reader),  # minio only calls read()
                    length=-1,
                    part_size=self.part_size,
                    num_parallel_uploads=1,  # parallel parts would queue unbounded buffers
                    content_type=media_type or "application/octet-stream",
                )
                h = reader.hexdigest()
                if not self._present(h, reader.size):
                    self.client.copy_object(self.bucket, self._key(h), CopySource(self.bucket, tmp))
            finally:
                with contextlib.suppress(MinioException, urllib3.exceptions.HTTPError):
                    self.client.remove_object(self.bucket, tmp)
        return self._ref(h, reader.size, media_type)

    @traced("put", "s3")
    def put_file(self, path: str | os.PathLike[str], media_type: str | None = None) -> ArtifactRef:
        """Store a file: hashed locally first, so present content is not uploaded at all.

        Raises:
            FileNotFoundError: no file at ``path``.
            ArtifactStoreError: the upload failed.
        """
        return put_file_once(self, path, media_type)

    def _open(self, key: str, name: str) -> Any:
        """The GET response of ``key`` (an urllib3 response; close and release it).

        Raises:
            ArtifactNotFound: no such object (reported as ``name``).
        """
        try:
            with self._errors():
                return self.client.get_object(self.bucket, key)
        except ArtifactStoreError as exc:
            if isinstance(exc.__cause__, S3Error) and exc.__cause__.code in _MISSING:
                raise ArtifactNotFound(name, f"s3://{self.bucket}") from None
            raise

    def _read(self, content_hash: str, consume: Callable[[bytes], object]) -> tuple[str, int]:
        """Stream the object into ``consume`` in 1 MiB chunks; return its SHA-256 and size."""
        return self.read_key(self._key(content_hash), content_hash, consume)

    def read_key(self, key: str, name: str, consume: Callable[[bytes], object]) -> tuple[str, int]:
        """Stream object ``key`` (reported as ``name`` when missing) into ``consume``; return
        its SHA-256 and size.

        Raises:
            ArtifactNotFound: no such object.
            ArtifactStoreError: the server failed.
        """
        resp = self._open(key, name)
        sha, size = hashlib.sha256(), 0
        try:
            with self._errors():
                for chunk in resp.stream(CHUNK_BYTES):
                    sha.update(chunk)
                    size += len(chunk)
                    consume(chunk)
        finally:
            resp.close()
            resp.release_conn()
        return sha.hexdigest(), size

    @traced("get", "s3")
    def get(self, content_hash: str) -> bytes:
        """The content of ``content_hash``, verified.

        Raises:
            ValueError: ``content_hash`` is malformed.
            ArtifactNotFound: no such object.
            ArtifactIntegrityError: what came back does not hash to ``content_hash``.
            ArtifactStoreError: the server failed.
        """
        buf = bytearray()
        actual, _ = self._read(content_hash, buf.extend)
        if actual != content_hash:
            raise ArtifactIntegrityError(content_hash, actual, self.uri(content_hash))
        return bytes(buf)

    @traced("get", "s3")
    def get_to_file(self, content_hash: str, path: str | os.PathLike[str]) -> ArtifactRef:
        """Stream the content to ``path``, renamed into place only once verified.

        Raises:
            ValueError: ``content_hash`` is malformed.
            ArtifactNotFound: no such object.
            ArtifactIntegrityError: what came back does not hash to ``content_hash``.
            ArtifactStoreError: the server failed.
        """
        dest = Path(path)
        with _temp_in(dest.parent) as (f, tmp):
            actual, size = self._read(content_hash, f.write)
            f.flush()
            os.fsync(f.fileno())
            f.close()
            if actual != content_hash:
                raise ArtifactIntegrityError(content_hash, actual, self.uri(content_hash))
            os.chmod(tmp, 0o644)  # mkstemp made it 0600; a fetched file is an ordinary file
            os.replace(tmp, dest)
        return ArtifactRef(hash=content_hash, size=size, uri=self.uri(content_hash))

    def read_meta(self, name: str) -> bytes | None:
        """The side document at key ``name``, or ``None``."""
        try:
            resp = self._open(self.prefix + check_meta_name(name), name)
        except ArtifactNotFound:
            return None
        try:
            with self._errors():
                return bytes(resp.read())
        finally:
            resp.close()
            resp.release_conn()

    def update_meta(self, name: str, update: Callable[[bytes | None], bytes]) -> bytes:
        """Replace the side document ``name`` with ``update(current)``.

        S3 has no lock: two writers updating the same document at once may lose one update.
        Manifest index entries are a cache of the Group log (``ManifestIndex.ingest`` rebuilds
        them from ``artifact.published`` Events), so that loss is recoverable.
        """
        current = self.read_meta(name)
        new = update(current)
        if new != current:
            with self._errors():
                self.client.put_object(
                    self.bucket,
                    self.prefix + name,
                    io.BytesIO(new),
                    len(new),
                    content_type="application/json",
                )
        return new
