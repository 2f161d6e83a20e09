"""The artifact store protocol, the reference it returns, and helpers shared by the backends.

Content addressing (MW-13.1-a, MW-13.1-d): every object is stored under ``sha256/<hex>`` of its
Group's namespace (``groups/<group_id>/``, :meth:`ArtifactStore.for_group`), where
``<hex>`` is the SHA-256 that *we* compute over the bytes while writing them — never a backend
ETag, which is an MD5 or a multipart checksum and may differ between stores. Every read hashes
what came back and refuses a mismatch. A URI only says where to look.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import os
import re
from collections.abc import Callable
from typing import BinaryIO, Literal, ParamSpec, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..protocol import HASH_PATTERN, is_hash
from ..telemetry import tracer

#: Bytes read or written per step when streaming (1 MiB).
CHUNK_BYTES = 1 << 20

_META = re.compile(r"^[a-z][a-z0-9_-]{0,31}/[0-9A-Za-z][0-9A-Za-z._-]{0,199}$")


class ArtifactRef(BaseModel):
    """Where an Artifact is and what it is.

    Attributes:
        hash: SHA-256 hex of the content: the identity.
        size: content length, bytes.
        media_type: IANA media type when the caller gave one.
        uri: a retrieval location (``file://…`` or ``s3://bucket/sha256/<hex>``), not an
            identity (MW-13.1-d).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    hash: str = Field(pattern=HASH_PATTERN)
    size: int = Field(ge=0)
    media_type: str | None = None
    uri: str = Field(min_length=1)


class ArtifactStore(Protocol):
    """A content-addressed blob store (MW-13.1-a); :class:`FilesystemStore` and
    :class:`S3Store` implement it and pass the same test suite.

    All methods are synchronous and may block on I/O (call them from a worker thread in async
    code). Sizes are bytes. A put of content already present writes nothing. Every read verifies
    the SHA-256 of what came back (MW-13.1-d).

    Side documents (``read_meta`` / ``update_meta``) are small mutable files beside the
    content, e.g. ``manifests/<hex>.json``; callers verify what they hold (manifests are signed).
    """

    def put(self, data: bytes, media_type: str | None = None) -> ArtifactRef:
        """Store ``data``; a no-op when the content is already there."""
        ...

    def put_file(self, path: str | os.PathLike[str], media_type: str | None = None) -> ArtifactRef:
        """Store a file's content without reading it whole into memory."""
        ...

    def put_stream(self, stream: BinaryIO, media_type: str | None = None) -> ArtifactRef:
        """Store everything ``stream.read()`` yields, in bounded memory."""
        ...

    def get(self, content_hash: str) -> bytes:
        """The verified content of ``content_hash``."""
        ...

    def get_to_file(self, content_hash: str, path: str | os.PathLike[str]) -> ArtifactRef:
        """Write the verified content to ``path`` (atomically; untouched on failure)."""
        ...

    def exists(self, content_hash: str) -> bool:
        """Whether an object is stored under ``content_hash`` (not verified)."""
        ...

    def uri(self, content_hash: str) -> str:
        """The retrieval URI of ``content_hash`` (whether or not it exists)."""
        ...

    def read_meta(self, name: str) -> bytes | None:
        """The side document ``name`` (e.g. ``manifests/<hex>.json``), or ``None``."""
        ...

    def update_meta(self, name: str, update: Callable[[bytes | None], bytes]) -> bytes:
        """Replace side document ``name`` with ``update(current)``; returns the new bytes."""
        ...

    def for_group(self, group_id: str) -> ArtifactStore:
        """The same kind of store over Group ``group_id``'s namespace only (``groups/<id>/``):
        content is addressed per Group, so knowing a hash reaches nothing of another Group's
        (MW-13.3-d)."""
        ...


def check_hash(content_hash: str) -> str:
    """``content_hash`` if it is 64 lowercase hex characters.

    Raises:
        ValueError: it is not (this also keeps path traversal out of the filesystem store).
    """
    if not is_hash(content_hash):
        raise ValueError(f"not a SHA-256 hex hash: {str(content_hash)[:80]!r}")
    return content_hash


def check_meta_name(name: str) -> str:
    """``name`` if it is a safe side-document name ``<dir>/<file>``.

    Raises:
        ValueError: it is not.
    """
    if not _META.match(name) or ".." in name:
        raise ValueError(f"not a side-document name: {name[:80]!r}")
    return name


def group_prefix(group_id: str) -> str:
    """The namespace of Group ``group_id`` in a store: ``groups/<group_id>/``.

    Raises:
        ValueError: the id could leave the namespace (empty, ``.``, ``..``, a ``/``, a
            backslash or a control character) or is over 200 characters.
    """
    if (
        not 0 < len(group_id) <= 200
        or group_id in (".", "..")
        or any(c in "/\\" or ord(c) < 32 or ord(c) == 127 for c in group_id)
    ):
        raise ValueError(f"not a Group id usable as a store namespace: {group_id[:80]!r}")
    return f"groups/{group_id}/"


def content_key(content_hash: str) -> str:
    """The object key of ``content_hash``: ``sha256/<hex>``."""
    return f"sha256/{check_hash(content_hash)}"


class _Putting(Protocol):
    def _present(self, content_hash: str, size: int) -> bool: ...

    def _ref(self, content_hash: str, size: int, media_type: str | None) -> ArtifactRef: ...

    def put_stream(self, stream: BinaryIO, media_type: str | None = None) -> ArtifactRef: ...


def put_file_once(
    store: _Putting, path: str | os.PathLike[str], media_type: str | None
) -> ArtifactRef:
    """Store a file's content through ``store``, hashing it first (``hashlib.file_digest``) so
    that content already present costs one read and no write or upload; otherwise the file is
    streamed to :meth:`put_stream`, which hashes it again while copying (it may have changed).

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    with open(path, "rb") as f:
        content_hash = hashlib.file_digest(f, "sha256").hexdigest()
        size = f.tell()
        if store._present(content_hash, size):
            return store._ref(content_hash, size, media_type)
        f.seek(0)
        return store.put_stream(f, media_type)


class HashingReader:
    """A read-only stream wrapper that hashes (SHA-256) and counts what passes through it.

    Args:
        raw: the stream to read from.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._sha = hashlib.sha256()
        #: Bytes read so far.
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        """Read up to ``n`` bytes (all when ``n < 0``), hashing them."""
        data = self._raw.read(n)
        if data:
            self._sha.update(data)
            self.size += len(data)
        return data

    def hexdigest(self) -> str:
        """SHA-256 hex of everything read so far."""
        return self._sha.hexdigest()


_P = ParamSpec("_P")
_R = TypeVar("_R")
# set while a traced store method runs, so put_file -> put_stream makes one span, not two
_in_span: contextvars.ContextVar[bool] = contextvars.ContextVar("artifact_span", default=False)


def traced(
    op: Literal["put", "get"], backend: str
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Run a store method in an ``artifact.<op>`` span (docs/observability.md).

    Attributes: ``missionweave.artifact.backend`` (``backend``), ``.method`` (the method's
    name), ``.hash`` and ``.size`` (bytes) of the content; a failure is recorded on the span.
    A traced method called from another one (``put_file`` → ``put_stream``) adds no span.

    Args:
        op: ``put`` or ``get``.
        backend: the store's kind, e.g. ``"filesystem"`` or ``"s3"``.
    """

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        name = f"artifact.{op}"

        @functools.wraps(fn)
        def inner(*args: _P.args, **kwargs: _P.kwargs) -> _R:  # args[0] is the store
            if _in_span.get():
                return fn(*args, **kwargs)
            attrs = {
                "missionweave.artifact.backend": backend,
                "missionweave.artifact.method": fn.__name__,
            }
            if op == "get" and len(args) > 1 and isinstance(args[1], str):
                attrs["missionweave.artifact.hash"] = args[1]
            token = _in_span.set(True)
            try:
                with tracer().start_as_current_span(name, attributes=attrs) as span:
                    result = fn(*args, **kwargs)
                    if span.is_recording():
                        if isinstance(result, ArtifactRef):
                            span.set_attribute("missionweave.artifact.hash", result.hash)
                            span.set_attribute("missionweave.artifact.size", result.size)
                        elif isinstance(result, bytes):
                            span.set_attribute("missionweave.artifact.size", len(result))
                    return result
            finally:
                _in_span.reset(token)

        return inner

    return wrap
