"""``POST /v1/groups/{group_id}/artifacts/{hash}/upload?lease_id=``: an S3 writer confirms
the upload of a write grant with ``confirm`` (MW-13.3-d, issue 38 item 1).

The writer's presigned ``PUT`` went to its lease's staging object (``artifacts``'
``_s3_staging``); here the Authority, after the same checks as the write grant (a signed
request of the lease's own agent, its live execution lease), reads the staged bytes back,
checks that they hash to ``hash``, moves them to the content key and records the upload — the
proof of possession ``artifact.publish`` asks for. Answers ``{artifact_hash, size}`` (200);
404 ``unknown_artifact`` when nothing is staged (never uploaded, expired, or already
confirmed: a later write grant's ``present`` then says the WorkItem holds it); 422
``hash_mismatch`` (nothing kept); 413 ``payload_too_large`` past the upload bound (nothing
kept); 503 ``store_unavailable`` when the S3 server fails; 404 ``artifacts_not_served`` unless
the store is S3 (the filesystem store records an upload as it receives it). The upload is
recorded before the bytes reach the content key, so no crash leaves content no lease is known
to have uploaded (which every Mission of the Group could read as an external input).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from ...artifacts import ArtifactIntegrityError, ArtifactStoreError, S3Store, adopt_staged
from ...protocol import Rejection, RejectionCode, is_hash
from ..core import artifact_write_refusal, record_upload, unreadable, upload_refusal
from ..wire import upload_path
from ._errors import READ_ERRORS, documented, error_response
from ._front import Front, get_front
from ._read_access import member

router = APIRouter()


@router.post(
    upload_path("{group_id}", "{artifact_hash}"), responses=documented(*READ_ERRORS, 404, 413, 503)
)
async def confirm_upload(
    group_id: str,
    artifact_hash: str,
    lease_id: str | None = Query(None, min_length=1, max_length=200),
    key: str = Depends(member),
    front: Front = Depends(get_front),
) -> JSONResponse:
    # the proof of possession of an S3 write (module docstring; no docstring here: it would
    # become the operation's OpenAPI description)
    store, authority = front.artifact_store, front.authority
    if store is None or not isinstance(store.for_group(group_id), S3Store):
        return error_response(
            404, RejectionCode.ARTIFACTS_NOT_SERVED, "no S3 store here: nothing is staged"
        )
    if not is_hash(artifact_hash):
        return error_response(
            422, RejectionCode.INVALID_REQUEST, "not a SHA-256 hex hash", field="artifact_hash"
        )
    lease = await asyncio.to_thread(artifact_write_refusal, authority, group_id, key, lease_id)
    if isinstance(lease, Rejection):
        status = 404 if lease.code == RejectionCode.UNKNOWN_LEASE else 403
        return error_response(status, lease.code, lease.reason, **lease.detail)
    view = store.for_group(group_id)
    assert isinstance(view, S3Store)

    def bounded_and_recorded(size: int) -> None:
        # the bound of every upload; the record before the bytes reach the content key
        refused = upload_refusal(authority, (), size)
        if refused is not None:
            raise _Refused(refused)
        record_upload(authority, lease, artifact_hash)

    try:
        ref = await asyncio.to_thread(
            adopt_staged, view, str(lease["lease_id"]), artifact_hash, bounded_and_recorded
        )
    except _Refused as exc:  # past the bound: the staged object is removed, nothing kept
        return error_response(413, exc.rejection.code, exc.rejection.reason, **exc.rejection.detail)
    except ArtifactStoreError as exc:  # the S3 server failed: nothing adopted, retry later
        response = error_response(
            503,
            RejectionCode.STORE_UNAVAILABLE,
            "the artifact store did not answer; nothing was adopted",
            artifact_hash=artifact_hash,
            error=type(exc).__name__,
        )
        response.headers["Retry-After"] = "1"
        return response
    except ArtifactIntegrityError as exc:
        return error_response(
            422,
            RejectionCode.HASH_MISMATCH,
            "the staged bytes do not hash to the granted Artifact; nothing was kept",
            artifact_hash=artifact_hash,
            actual=exc.actual,
        )
    if ref is None:
        refused = unreadable(group_id, artifact_hash)
        return error_response(404, refused.code, "nothing is staged under this lease's grant")
    return JSONResponse({"artifact_hash": ref.hash, "size": ref.size})


class _Refused(Exception):
    """An upload refused before its bytes were adopted (the ``rejection``)."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.reason)
        self.rejection = rejection


__all__ = ["router"]
