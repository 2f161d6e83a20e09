"""Staged uploads to S3: how a write grant's bytes become proof of possession (MW-13.3-d).

On the filesystem store the Authority receives the bytes itself and checks their hash. On S3
the writer sends them straight to the bucket with a presigned ``PUT``, so the Authority sees
nothing at upload time. So a write grant on S3 is not for the content key: it is for a
staging key of the writer's own lease, ``uploads/<lease_id>/<hex>`` in the Group's namespace,
and the presigned URL carries the content's SHA-256 (``x-amz-checksum-sha256``, base64) in
its signed query, which the writer also sends as a header — a store that checks checksums
refuses other bytes (S3 answers ``BadDigest``). Only that one lease's grant can put an object
there. When the writer confirms, :func:`adopt_staged` reads the staged object back, hashes
it (the Authority's own check, whatever the store checked), copies it to the content key
``sha256/<hex>`` (server side) unless present, and removes the staged object: the Authority
then records the upload (``record_upload``). Staged objects a writer never confirmed stay
under ``uploads/``: give that prefix a lifecycle rule expiring objects after a day.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import Callable
from datetime import timedelta

import urllib3
from minio.commonconfig import CopySource
from minio.error import MinioException

from ._errors import ArtifactIntegrityError, ArtifactNotFound
from ._s3 import S3Store
from ._store import ArtifactRef, check_hash

#: A lease id usable in an object key (the Authority's are ``lease-<hex>``).
_LEASE_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
#: The header (and signed query parameter) binding a PUT to its content.
CHECKSUM_HEADER = "x-amz-checksum-sha256"


def staging_key(store: S3Store, lease_id: str, content_hash: str) -> str:
    """``<prefix>uploads/<lease_id>/<hex>``.

    Raises:
        ValueError: a malformed hash or lease id.
    """
    if not _LEASE_ID.fullmatch(lease_id) or lease_id in (".", ".."):
        raise ValueError(f"not a lease id usable in a key: {lease_id[:80]!r}")
    return f"{store.prefix}uploads/{lease_id}/{check_hash(content_hash)}"


def checksum_of(content_hash: str) -> str:
    """The base64 SHA-256 S3 checks (``x-amz-checksum-sha256``) of ``content_hash``'s bytes."""
    return base64.b64encode(bytes.fromhex(check_hash(content_hash))).decode()


def presign_staged_put(
    store: S3Store, lease_id: str, content_hash: str, expires: timedelta
) -> tuple[str, dict[str, str]]:
    """A presigned ``PUT`` of the staging object of ``lease_id`` for ``content_hash``, bound to
    the content's checksum; and the headers the writer must send with it.

    Raises:
        ValueError: a malformed hash or lease id.
        ArtifactStoreError: the server could not be asked for the bucket's region.
    """
    checksum = checksum_of(content_hash)
    key = staging_key(store, lease_id, content_hash)
    with store._errors():
        url = store.client.get_presigned_url(
            "PUT",
            store.bucket,
            key,
            expires=expires,
            extra_query_params={
                CHECKSUM_HEADER: checksum,
                "x-amz-sdk-checksum-algorithm": "SHA256",
            },
        )
    return str(url), {CHECKSUM_HEADER: checksum}


def adopt_staged(
    store: S3Store,
    lease_id: str,
    content_hash: str,
    before_adopt: Callable[[int], None] = lambda _size: None,
) -> ArtifactRef | None:
    """Verify and move ``lease_id``'s staged upload of ``content_hash`` to its content key.
    ``before_adopt(size)`` runs once the staged bytes hash right and before they reach the
    content key (the caller's size bound and its record of the upload: a crash after the copy
    must not leave content no lease is known to have uploaded); an exception from it keeps
    nothing.

    Returns:
        The content's reference; ``None`` when nothing is staged (never uploaded, or
        already adopted — the caller checks its own record for the latter).

    Raises:
        ArtifactIntegrityError: the staged bytes do not hash to ``content_hash`` (the staged
            object is removed).
        ArtifactStoreError: the server failed.
    """
    key = staging_key(store, lease_id, content_hash)
    try:
        actual, size = store.read_key(key, content_hash, lambda _chunk: None)
    except ArtifactNotFound:
        return None
    try:
        if actual != content_hash:
            raise ArtifactIntegrityError(content_hash, actual, f"s3://{store.bucket}/{key}")
        before_adopt(size)
        if not store._present(content_hash, size):
            with store._errors():
                store.client.copy_object(
                    store.bucket, store._key(content_hash), CopySource(store.bucket, key)
                )
    finally:
        with contextlib.suppress(MinioException, urllib3.exceptions.HTTPError):
            store.client.remove_object(store.bucket, key)
    return store._ref(content_hash, size, None)


__all__ = ["CHECKSUM_HEADER", "adopt_staged", "checksum_of", "presign_staged_put", "staging_key"]
