"""Artifact access as it travels: the grant the Authority answers a member's signed request
with (MW-13.3-d, docs/authority.md "Artifacts").

A grant is one operation (``read`` or ``write``) on one object of one Group's namespace in the
artifact store, for a short time: an S3 presigned URL, or — for the filesystem store — a URL
of the Authority's own blob route carrying a token the Authority signed. Whoever holds it can
do that one thing until ``expires_at_ms``; nothing else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...protocol import HASH_PATTERN, MAX_SAFE_INT

#: How long a grant is good for, milliseconds (5 minutes: long enough to start a transfer).
GRANT_TTL_MS = 300_000
#: The route prefix of the filesystem store's blobs, served by the Authority.
BLOB_PREFIX = "/v1/artifact-blobs/"

Operation = Literal["read", "write"]


def artifact_path(group_id: str, artifact_hash: str) -> str:
    """``/v1/groups/{group_id}/artifacts/{artifact_hash}``: where a member asks for a grant
    (a signed ``GET``), and the Artifact's stable retrieval URI under the Authority's URL."""
    return f"/v1/groups/{group_id}/artifacts/{artifact_hash}"


def upload_path(group_id: str, artifact_hash: str) -> str:
    """``/v1/groups/{group_id}/artifacts/{artifact_hash}/upload``: where a writer confirms a
    staged upload of a grant with ``confirm`` (a signed ``POST`` naming its lease)."""
    return artifact_path(group_id, artifact_hash) + "/upload"


class ArtifactGrant(BaseModel):
    """One operation on one Artifact, granted (``GET /v1/groups/{g}/artifacts/{hash}``).

    Attributes:
        group_id: the Group whose namespace holds the object (the reader's own, or the Group
            that promoted it to an Organization Artifact).
        artifact_hash: SHA-256 hex of the content.
        operation: ``read`` or ``write``.
        method: the HTTP method to use on ``url`` (``GET`` or ``PUT``).
        url: absolute (a presigned S3 URL) or relative to the Authority's URL (its blob route).
        expires_at_ms: when the URL stops working, epoch milliseconds (Authority clock).
        present: for a write, this WorkItem already holds the content (it uploaded it, or
            it is its Mission's, promoted, or an input it was given): nothing to upload.
            Never ``True`` for another Mission's content (issue 38).
        headers: headers the transfer must carry as given: an S3 write binds the content's
            checksum (``x-amz-checksum-sha256``), so the store itself checks the bytes.
        confirm: for a write, after the ``PUT`` the writer ``POST``s :func:`upload_path`
            (signed, naming the same lease) once: the Authority checks the staged bytes and
            records the upload — the proof of possession a publish needs (MW-13.3-d).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    group_id: str = Field(min_length=1, max_length=200)
    artifact_hash: str = Field(pattern=HASH_PATTERN)
    operation: Operation
    method: Literal["GET", "PUT"]
    url: str = Field(min_length=1, max_length=8192)
    expires_at_ms: int = Field(ge=0, le=MAX_SAFE_INT)
    present: bool = False
    headers: dict[str, str] = Field(default_factory=dict, max_length=8)
    confirm: bool = False
