"""Artifact access through the Authority (MW-13.3-d, docs/authority.md "Artifacts")::

    GET  /v1/groups/{group_id}/artifacts/{hash}  ?operation=read|write&mission_id=&lease_id=
                                                 → ArtifactGrant (200; 403, 404, 422)
    POST /v1/groups/{group_id}/artifacts/{hash}/upload?lease_id=
                                                 an S3 write's staged bytes checked and recorded
                                                 (``_upload_routes``)
    GET  /v1/artifact-blobs/{token}              the filesystem store's bytes, for a read grant
    PUT  /v1/artifact-blobs/{token}              the bytes of a write grant, hash-checked and
                                                 recorded as this lease's upload (413 past the
                                                 upload bound, 507 below the disk reserve or on
                                                 a full disk)

The grant route is a signed read (RFC 9421) of an active member of the Group (or an
operator), answered after the checks of :mod:`missionweave.authority.core`'s
``_artifact_access``: the Authority is the only party that holds the artifact store. A read
is tied to who reads (``read_scope``): an agent names its lease, a person a Mission it may
read, an operator neither; whatever that reader may not read is answered exactly like content
nobody holds (404 ``unknown_artifact``). A write needs the writer's live execution lease.
For S3 a read grant is a presigned URL of one object of the Group's namespace, good for
:data:`GRANT_TTL_MS`, and a write grant a presigned ``PUT`` of the lease's staging object bound
to the content's checksum (``_s3_staging``), confirmed afterwards; for the filesystem store a
grant is a URL of the blob routes above carrying a token the Authority signed with its key
(every replica verifies it) naming the Group, the hash, the operation, the expiry and, for a
write, the lease — the Authority serves and accepts the bytes itself, checking the hash of what
it receives before anything is stored, and records the upload (the proof of possession
``artifact.publish`` asks for). An upload is bounded (``core``'s :func:`upload_refusal`): past
:attr:`AuthorityConfig.max_upload_bytes` it is refused 413 ``payload_too_large`` — by its
``Content-Length`` before a byte is read, else as soon as the bytes pass it — and below the
disk reserve, or when the disk fills while it is written, 507 ``insufficient_storage``;
either way nothing of it is kept.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, JSONResponse

from ...artifacts import ArtifactStore, FilesystemStore, S3Store, presign_staged_put
from ...protocol import (
    Rejection,
    RejectionCode,
    b64u_decode,
    b64u_encode,
    canonical_bytes,
    is_hash,
    verify,
)
from ..core import (
    Authority,
    artifact_read_refusal,
    artifact_write_refusal,
    present_for,
    promoting_groups,
    read_scope,
    record_upload,
    unreadable,
    upload_refusal,
)
from ..wire import BLOB_PREFIX, GRANT_TTL_MS, ArtifactGrant, Operation
from ._connections import mark_authenticated
from ._errors import READ_ERRORS, documented, error_response
from ._front import Front, get_front
from ._read_access import member

_STATUS: dict[str, int] = {
    RejectionCode.INVALID_REQUEST: 422,
    RejectionCode.HASH_MISMATCH: 422,
    RejectionCode.UNKNOWN_MISSION: 404,
    RejectionCode.UNKNOWN_ARTIFACT: 404,
    RejectionCode.PAYLOAD_TOO_LARGE: 413,
    RejectionCode.INSUFFICIENT_STORAGE: 507,
}
#: Bytes read per step of a blob upload.
_CHUNK = 1 << 20
_TTL = timedelta(milliseconds=GRANT_TTL_MS)
#: The ``OSError`` numbers of a full disk (or quota): an upload answered 507, not 500.
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
#: The documented error answers of every route here.
_ERRORS = documented(*READ_ERRORS, 404, 409, 413, 507)

router = APIRouter()


def blob_token(
    authority: Authority, group_id: str, h: str, op: Operation, exp_ms: int, lease_id: str = ""
) -> str:
    """``<payload>.<signature>``: the claims, base64url of their canonical JSON, signed with
    the Authority's key (a write's names the lease its upload is recorded under)."""
    claims = {"g": group_id, "h": h, "op": op, "exp": exp_ms, "l": lease_id}
    payload = b64u_encode(canonical_bytes(claims))
    return f"{payload}.{authority.key.sign(payload.encode())}"


def read_blob_token(authority: Authority, token: str, op: Operation) -> tuple[str, str, str] | None:
    """``(group_id, hash, lease_id)`` of a genuine, unexpired token for ``op``; ``None``
    otherwise."""
    payload, _, sig = token.partition(".")
    if not sig or len(token) > 2048 or not verify(authority.public_key, sig, payload.encode()):
        return None
    try:
        claims = json.loads(b64u_decode(payload))
    except ValueError:
        return None
    if (
        not isinstance(claims, dict)
        or claims.get("op") != op
        or not isinstance(claims.get("exp"), int)
        or claims["exp"] <= authority.clock()
        or not isinstance(claims.get("g"), str)
        or not isinstance(claims.get("l", ""), str)
        or not is_hash(claims.get("h"))
    ):
        return None
    return claims["g"], claims["h"], claims.get("l", "")


def _read_grant(front: Front, store: ArtifactStore, source: str, h: str) -> ArtifactGrant:
    """A read grant of ``h`` in Group ``source``'s namespace of ``store``."""
    exp = front.authority.clock() + GRANT_TTL_MS
    view = store.for_group(source)
    if isinstance(view, S3Store):
        url = view.presign("GET", h, _TTL)
    else:
        url = BLOB_PREFIX + blob_token(front.authority, source, h, "read", exp)
    return ArtifactGrant(
        group_id=source, artifact_hash=h, operation="read", method="GET", url=url,
        expires_at_ms=exp,
    )  # fmt: skip


def _write_grant(
    front: Front, store: ArtifactStore, group_id: str, h: str, lease_id: str, present: bool
) -> ArtifactGrant:
    """A write grant of ``h`` into ``group_id``'s namespace under ``lease_id`` (an operator's:
    ``""``): S3's is the lease's staging object, bound to the checksum, confirmed after."""
    exp = front.authority.clock() + GRANT_TTL_MS
    view = store.for_group(group_id)
    headers: dict[str, str] = {}
    if isinstance(view, S3Store) and lease_id:
        url, headers = presign_staged_put(view, lease_id, h, _TTL)
    elif isinstance(view, S3Store):  # an operator's write: no lease, nothing to prove
        url = view.presign("PUT", h, _TTL)
    else:
        url = BLOB_PREFIX + blob_token(front.authority, group_id, h, "write", exp, lease_id)
    return ArtifactGrant(
        group_id=group_id, artifact_hash=h, operation="write", method="PUT", url=url,
        expires_at_ms=exp, present=present, headers=headers,
        confirm=isinstance(view, S3Store) and bool(lease_id),
    )  # fmt: skip


def _read(front: Front, store: ArtifactStore, group_id: str, h: str) -> ArtifactGrant | None:
    """A read grant of ``h`` where it is: the Group's namespace, else that of a Group that
    promoted it; ``None`` when neither holds it."""
    if store.for_group(group_id).exists(h):
        return _read_grant(front, store, group_id, h)
    for source in promoting_groups(front.authority, h):  # an Organization Artifact (MW-13.3-d)
        if store.for_group(source).exists(h):
            return _read_grant(front, store, source, h)
    return None


@router.get(
    "/v1/groups/{group_id}/artifacts/{artifact_hash}",
    responses={**_ERRORS, 200: {"model": ArtifactGrant}},
)
async def grant(
    group_id: str,
    artifact_hash: str,
    operation: Operation = Query("read"),
    mission_id: str | None = Query(None, min_length=1, max_length=200),
    lease_id: str | None = Query(None, min_length=1, max_length=200),
    key: str = Depends(member),
    front: Front = Depends(get_front),
) -> JSONResponse:
    # MW-13.3-d: one object, a few minutes, after the checks of ``core`` (no docstring: it
    # would become the operation's OpenAPI description)
    store = front.artifact_store
    if store is None:
        return error_response(
            404, RejectionCode.ARTIFACTS_NOT_SERVED, "this Authority serves no artifact store"
        )
    if not is_hash(artifact_hash):
        return error_response(
            422, RejectionCode.INVALID_REQUEST, "not a SHA-256 hex hash", field="artifact_hash"
        )
    if operation == "write":
        return await _write(front, store, group_id, artifact_hash, key, lease_id)
    found = await asyncio.to_thread(
        _readable, front, store, group_id, artifact_hash, key, lease_id, mission_id
    )
    if isinstance(found, Rejection):
        return _refused(found, 403)
    return JSONResponse(found.model_dump(mode="json"))


def _readable(
    front: Front,
    store: ArtifactStore,
    group_id: str,
    h: str,
    key: str,
    lease_id: str | None,
    mission_id: str | None,
) -> ArtifactGrant | Rejection:
    """A read grant for ``key``, or the refusal: who reads for which Mission (``read_scope``),
    whether that Mission may read ``h``, and whether any namespace holds it — the last two
    one answer (``unreadable``), so no reader learns what another Mission or Group holds."""
    authority = front.authority
    operator = key in front.operators
    scope = read_scope(
        authority, group_id, key, h, lease_id=lease_id, mission_id=mission_id, operator=operator
    )
    if isinstance(scope, Rejection):
        return scope
    refusal = artifact_read_refusal(authority, group_id, h, mission_id=scope)
    if refusal is not None:
        return refusal
    return _read(front, store, group_id, h) or unreadable(group_id, h)


async def _write(
    front: Front, store: ArtifactStore, group_id: str, h: str, key: str, lease_id: str | None
) -> JSONResponse:
    """A write grant under ``key``'s live execution lease (an operator needs none), above the
    disk reserve; ``present`` only for content this WorkItem already holds (issue 38)."""
    authority = front.authority
    lease: dict[str, object] | None = None
    if key not in front.operators:
        found = await asyncio.to_thread(artifact_write_refusal, authority, group_id, key, lease_id)
        if isinstance(found, Rejection):
            return _refused(found, 403)
        lease = found
    refusal = await asyncio.to_thread(upload_refusal, authority, _dirs(store), None)
    if refusal is not None:  # no new content below the disk reserve
        return _refused(refusal, 403)
    present = False
    if lease is not None and await asyncio.to_thread(present_for, authority, lease, h):
        present = await asyncio.to_thread(store.for_group(group_id).exists, h)
    g = await asyncio.to_thread(
        _write_grant, front, store, group_id, h, str(lease["lease_id"]) if lease else "", present
    )
    return JSONResponse(g.model_dump(mode="json"))


def _dirs(store: ArtifactStore | None) -> Sequence[Path]:
    """The local directories an upload to ``store`` writes to: a filesystem store's root."""
    return [store.root] if isinstance(store, FilesystemStore) else []


def _refused(refusal: Rejection, status: int) -> JSONResponse:
    """``refusal`` answered with its status (:data:`_STATUS`), else ``status``."""
    status = _STATUS.get(refusal.code, status)
    return error_response(status, refusal.code, refusal.reason, **refusal.detail)


def _fs_view(
    request: Request, front: Front, token: str, op: Operation
) -> tuple[FilesystemStore, str, str] | None:
    """The filesystem namespace, hash and lease (``""``: none) a genuine, unexpired ``op``
    token names. Such a token (the Authority's signature, granted to a member) authenticates
    the request's connection: a long transfer is not closed at the unauthenticated deadline
    (:func:`~._connections.mark_authenticated`)."""
    claims = read_blob_token(front.authority, token, op)
    store = front.artifact_store
    if claims is None or not isinstance(store, FilesystemStore):
        return None
    mark_authenticated(request.scope)
    return store.for_group(claims[0]), claims[1], claims[2]


@router.get(BLOB_PREFIX + "{token}", responses=_ERRORS)
async def get_blob(token: str, request: Request, front: Front = Depends(get_front)) -> Any:
    found = _fs_view(request, front, token, "read")
    if found is None:
        return error_response(403, RejectionCode.INVALID_GRANT, "no valid read grant for this URL")
    view, h, _ = found
    path = view.path(h)
    if not path.is_file():
        return error_response(
            404, RejectionCode.UNKNOWN_ARTIFACT, "no such Artifact", artifact_hash=h
        )
    return FileResponse(path, media_type="application/octet-stream")


@router.put(BLOB_PREFIX + "{token}", responses=_ERRORS)
async def put_blob(token: str, request: Request, front: Front = Depends(get_front)) -> JSONResponse:
    found = _fs_view(request, front, token, "write")
    if found is None:
        return error_response(403, RejectionCode.INVALID_GRANT, "no valid write grant for this URL")
    view, h, lease_id = found
    authority = front.authority
    declared = request.headers.get("content-length", "")
    size = int(declared) if declared.isdigit() else None  # refused before a byte is read
    refusal = await asyncio.to_thread(upload_refusal, authority, [view.root], size)
    if refusal is not None:
        return _refused(refusal, 403)
    try:
        return await _spool_and_store(request, view, h, authority, lease_id)
    except OSError as exc:
        if exc.errno not in _DISK_FULL:
            raise
        # the spool and the store's temp file are gone with their context managers
        return error_response(
            507,
            RejectionCode.INSUFFICIENT_STORAGE,
            f"the disk of {view.root} filled during the upload; nothing was stored",
            path=str(view.root),
            reserve_bytes=authority.disk_reserve.reserve_bytes,
        )


async def _spool_and_store(
    request: Request, view: FilesystemStore, h: str, authority: Authority, lease_id: str
) -> JSONResponse:
    """Spool the request's bytes (at most the upload bound), check that they hash to ``h``,
    store them in ``view`` and record them as ``lease_id``'s upload (when the grant named a
    lease: the proof of possession, MW-13.3-d); the spool is removed whatever happens.

    Raises:
        OSError: the disk failed (a full one: ``ENOSPC``), nothing kept.
    """
    tmp_dir = view.root / "tmp"
    await asyncio.to_thread(tmp_dir.mkdir, parents=True, exist_ok=True)
    sha, size = hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(dir=tmp_dir, prefix=".upload-") as spool:
        async for chunk in request.stream():
            size += len(chunk)
            if size > authority.config.max_upload_bytes:  # longer than it said, or unsaid
                refusal = upload_refusal(authority, (), size)
                assert refusal is not None  # payload_too_large, the size past the bound
                return _refused(refusal, 413)
            sha.update(chunk)
            await asyncio.to_thread(spool.write, chunk)
        await asyncio.to_thread(spool.flush)
        if sha.hexdigest() != h:  # nothing is stored under a name it does not hash to
            return error_response(
                422,
                RejectionCode.HASH_MISMATCH,
                "the bytes sent do not hash to the granted Artifact",
                artifact_hash=h,
                actual=sha.hexdigest(),
            )
        # the record first: a crash between the two must not leave content no lease is known
        # to have uploaded (every Mission of the Group reads such content as an external input)
        if lease_id:
            lease = await asyncio.to_thread(authority.lease, lease_id)
            if lease is not None:  # the token's lease; a grant names only real ones
                await asyncio.to_thread(record_upload, authority, lease, h)
        ref = await asyncio.to_thread(view.put_file, Path(spool.name))
    return JSONResponse({"artifact_hash": ref.hash, "size": ref.size})


__all__ = ["blob_token", "read_blob_token", "router"]
