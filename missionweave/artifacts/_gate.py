"""Artifacts through the Authority: what an agent (or a person's CLI) uses instead of a store.

An agent holds no store credential and no path into the store. For each read or write it asks
the Authority for a grant — a signed request the Authority answers after its membership and
context checks (MW-13.3-d) — and then moves the bytes with that one-object, short-lived URL:
an S3 presigned URL, or the Authority's own blob route for the filesystem store. Every read is
verified against its hash before the caller sees a byte of it (MW-13.1-d).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urljoin

import httpx

from ..authority.wire import ArtifactGrant, Operation, artifact_path
from ._errors import ArtifactIntegrityError, ArtifactNotFound, ArtifactStoreError
from ._store import CHUNK_BYTES, ArtifactRef, check_hash

#: Asks the Authority for a grant of one operation on one hash (raises when refused).
GrantFn = Callable[[str, Operation], Awaitable[ArtifactGrant]]
#: Confirms the upload of a write grant with ``confirm`` (an S3 staged upload; raises when
#: refused): the proof of possession a publish needs (MW-13.3-d).
ConfirmFn = Callable[[str], Awaitable[object]]


@functools.lru_cache(maxsize=8)
def _tls(verify: bool | str) -> ssl.SSLContext:
    """The TLS context of ``verify`` (as ``httpx`` takes it), made once per process: loading
    the CA bundle costs ~25 ms, which every transfer paid when each made its own."""
    return httpx.create_ssl_context(verify=verify)


class GatedArtifacts:
    """One Group's Artifacts, reached only through grants of the Authority.

    Args:
        grant: asks for a grant: ``await grant(content_hash, "read" | "write")``; raises
            :class:`ArtifactAccessDenied` or :class:`ArtifactNotFound` when refused.
        authority_url: the Authority's base URL (the blob route's URLs are relative to it,
            and an Artifact's retrieval URI is ``<authority_url>/v1/groups/<g>/artifacts/<h>``).
        group_id: the Group.
        timeout: seconds per transfer step (connect, read a chunk, write a chunk).
        verify: TLS verification for ``https://`` URLs (as ``httpx`` takes it).
        http: a connection pool to move the bytes with, kept open by its owner (e.g.
            :attr:`AuthorityClient.transfers <missionweave.authority.client.AuthorityClient.
            transfers>`); without it each transfer opens and closes its own (``timeout`` and
            ``verify`` apply to those only).
        confirm: confirms an upload whose grant asks for it (``await confirm(hash)``); a
            grant with ``confirm`` and no such function is an error.
    """

    def __init__(
        self,
        grant: GrantFn,
        authority_url: str,
        group_id: str,
        *,
        timeout: float = 60.0,
        verify: bool | str = True,
        http: httpx.AsyncClient | None = None,
        confirm: ConfirmFn | None = None,
    ) -> None:
        self._grant = grant
        self._confirm = confirm
        self.authority_url = authority_url.rstrip("/") + "/"
        self.group_id = group_id
        self._timeout = timeout
        self._verify = verify
        self._pool = http

    def __repr__(self) -> str:
        return f"GatedArtifacts({self.authority_url!r}, group={self.group_id!r})"

    def uri(self, content_hash: str) -> str:
        """The Artifact's retrieval URI: where a member asks the Authority for it (a location,
        not an identity, MW-13.1-d)."""
        return urljoin(
            self.authority_url, artifact_path(self.group_id, check_hash(content_hash))[1:]
        )

    def _url(self, grant: ArtifactGrant) -> str:
        return (
            urljoin(self.authority_url, grant.url.lstrip("/"))
            if grant.url.startswith("/")
            else grant.url
        )

    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[httpx.AsyncClient]:
        # no auth, no cookies: a grant URL is its own credential, and nothing else is sent
        async with contextlib.AsyncExitStack() as stack:
            http = self._pool
            if http is None:
                http = await stack.enter_async_context(
                    httpx.AsyncClient(timeout=self._timeout, verify=_tls(self._verify))
                )
            try:
                yield http
            except httpx.TransportError as exc:
                raise ArtifactStoreError(f"artifact transfer failed: {exc}") from exc

    # ----------------------------------------------------------------------------- write

    async def put(
        self, data: bytes | BinaryIO | os.PathLike[str], media_type: str | None = None
    ) -> ArtifactRef:
        """Store ``data`` (bytes, a binary stream or a file path) in the Group's namespace.

        The content is hashed first (a stream is spooled to a temporary file while hashed, in
        bounded memory), a write grant for that hash is asked for, and the bytes are sent
        unless this WorkItem holds them already (``present``), then confirmed when the grant
        asks for it — the upload is the proof of possession a publish needs (MW-13.3-d).

        Raises:
            ArtifactAccessDenied: the Authority refused the write (e.g. no live lease).
            ArtifactStoreError: the transfer failed.
            FileNotFoundError: no file at a given path.
        """
        if isinstance(data, bytes):
            h = hashlib.sha256(data).hexdigest()
            grant = await self._grant(h, "write")
            if not grant.present:
                async with self._http() as http:
                    await self._send(http, grant, data, len(data), media_type)
                await self._confirmed(grant)
            return ArtifactRef(hash=h, size=len(data), media_type=media_type, uri=self.uri(h))
        if isinstance(data, os.PathLike):
            f, h, size = await asyncio.to_thread(_open_hashed, Path(data))
        else:
            f, h, size = await asyncio.to_thread(_spool, data)
        with f:
            grant = await self._grant(h, "write")
            if not grant.present:

                async def chunks() -> AsyncIterator[bytes]:
                    while chunk := await asyncio.to_thread(f.read, CHUNK_BYTES):
                        yield chunk

                async with self._http() as http:
                    await self._send(http, grant, chunks(), size, media_type)
                await self._confirmed(grant)
        return ArtifactRef(hash=h, size=size, media_type=media_type, uri=self.uri(h))

    async def _send(
        self,
        http: httpx.AsyncClient,
        grant: ArtifactGrant,
        content: bytes | AsyncIterator[bytes],
        size: int,
        media_type: str | None,
    ) -> None:
        headers = {
            **grant.headers,  # e.g. S3's x-amz-checksum-sha256: the store checks the bytes
            "Content-Length": str(size),
            "Content-Type": media_type or "application/octet-stream",
        }
        resp = await http.request(grant.method, self._url(grant), content=content, headers=headers)
        if resp.status_code >= 300:
            raise ArtifactStoreError(
                f"upload of {grant.artifact_hash} refused: HTTP {resp.status_code} "
                f"{resp.text[:300]}"
            )

    async def _confirmed(self, grant: ArtifactGrant) -> None:
        """Confirm ``grant``'s upload when it asks for it (an S3 staged upload)."""
        if not grant.confirm:
            return
        if self._confirm is None:
            raise ArtifactStoreError(
                f"the write grant of {grant.artifact_hash} asks for a confirmation this "
                "client cannot send"
            )
        await self._confirm(grant.artifact_hash)

    # ------------------------------------------------------------------------------ read

    async def get(self, content_hash: str) -> bytes:
        """The verified content of ``content_hash`` (MW-13.1-d).

        Raises:
            ValueError: ``content_hash`` is not 64 lowercase hex characters.
            ArtifactNotFound: the Group holds no such Artifact.
            ArtifactAccessDenied: the Authority refused the read (another Mission's content,
                not a member, …).
            ArtifactIntegrityError: the bytes do not hash to ``content_hash``.
            ArtifactStoreError: the transfer failed.
        """
        buf = bytearray()
        await self._read(check_hash(content_hash), buf.extend)
        return bytes(buf)

    async def get_to_file(self, content_hash: str, path: str | os.PathLike[str]) -> ArtifactRef:
        """Write the verified content to ``path``, renamed into place only once its SHA-256
        matches (``path`` is left as it was otherwise).

        Raises:
            As :meth:`get`.
        """
        h = check_hash(content_hash)
        dest = Path(path)
        await asyncio.to_thread(dest.parent.mkdir, parents=True, exist_ok=True)
        fd, name = await asyncio.to_thread(tempfile.mkstemp, dir=dest.parent, prefix=".part-")
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as f:
                size = await self._read(h, f.write)
                await asyncio.to_thread(os.fsync, f.fileno())
            await asyncio.to_thread(_install, tmp, dest)
        finally:
            await asyncio.to_thread(tmp.unlink, missing_ok=True)
        return ArtifactRef(hash=h, size=size, uri=self.uri(h))

    async def _read(self, h: str, consume: Callable[[bytes], object]) -> int:
        grant = await self._grant(h, "read")
        sha, size = hashlib.sha256(), 0
        async with self._http() as http, http.stream("GET", self._url(grant)) as resp:
            if resp.status_code == 404:
                raise ArtifactNotFound(h, f"group {self.group_id}")
            if resp.status_code >= 300:
                await resp.aread()
                raise ArtifactStoreError(
                    f"read of {h} refused: HTTP {resp.status_code} {resp.text[:300]}"
                )
            async for chunk in resp.aiter_bytes(CHUNK_BYTES):
                sha.update(chunk)
                size += len(chunk)
                consume(chunk)
        if sha.hexdigest() != h:
            raise ArtifactIntegrityError(h, sha.hexdigest(), self.uri(h))
        return size


def _open_hashed(path: Path) -> tuple[BinaryIO, str, int]:
    """``path`` open for reading at its start, its SHA-256 and its size."""
    f = open(path, "rb")  # the caller closes it
    h = hashlib.file_digest(f, "sha256").hexdigest()
    size = f.tell()
    f.seek(0)
    return f, h, size


def _spool(stream: BinaryIO) -> tuple[BinaryIO, str, int]:
    """Copy ``stream`` to a temporary file while hashing it, in bounded memory."""
    spool = tempfile.TemporaryFile(prefix="mw-put-")  # the caller closes it
    sha, size = hashlib.sha256(), 0
    while chunk := stream.read(CHUNK_BYTES):
        sha.update(chunk)
        size += len(chunk)
        spool.write(chunk)
    spool.seek(0)
    return spool, sha.hexdigest(), size


def _install(tmp: Path, dest: Path) -> None:
    os.chmod(tmp, 0o644)  # mkstemp made it 0600; a fetched file is an ordinary file
    os.replace(tmp, dest)
