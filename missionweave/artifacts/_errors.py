"""Errors of the artifact store and its helpers.

Error tree::

    ArtifactError                 root (a MissionWeaveError)
    ├── ArtifactNotFound          no object under ``sha256/<hex>``
    ├── ArtifactIntegrityError    what came back does not hash to its name (MW-13.1-d)
    ├── ArtifactStoreError        the backend failed (S3 unreachable, bucket missing, …)
    ├── ArtifactAccessDenied      the Authority granted no access (not a member, another
    │                             Mission's content, no lease, …: carries the rejection)
    ├── ManifestError             a manifest is malformed or its signature does not verify
    ├── PublishRejected           the Authority refused ``artifact.publish`` (carries the rejection)

A malformed hash argument (not 64 lowercase hex characters) is a ``ValueError``.
"""

from __future__ import annotations

from typing import Any

from ..protocol import MissionWeaveError, Rejection


class ArtifactError(MissionWeaveError):
    """Root of artifact errors."""


class ArtifactNotFound(ArtifactError):
    """No Artifact with this content hash in the store.

    Attributes:
        content_hash: the SHA-256 hex asked for.
        where: the store location searched (a path or ``s3://bucket``).
    """

    def __init__(self, content_hash: str, where: str) -> None:
        super().__init__(f"artifact {content_hash} not found in {where}")
        self.content_hash = content_hash
        self.where = where


class ArtifactIntegrityError(ArtifactError):
    """The bytes read back do not hash to the Artifact's name (MW-13.1-d).

    Attributes:
        expected: the SHA-256 hex asked for.
        actual: the SHA-256 hex of what came back.
        where: the object read (a path or ``s3://bucket/key``).
    """

    def __init__(self, expected: str, actual: str, where: str) -> None:
        super().__init__(f"integrity failure for {where}: expected sha256 {expected}, got {actual}")
        self.expected = expected
        self.actual = actual
        self.where = where


class ArtifactStoreError(ArtifactError):
    """The storage backend failed (network, permissions, missing bucket)."""


class ArtifactAccessDenied(ArtifactError):
    """The Authority refused to grant a read or write of an Artifact (MW-13.3-d).

    Attributes:
        rejection: the structured refusal: ``not_a_member``, ``cross_mission_content``,
            ``lease_required``, ``not_owner``, … (``unknown_artifact`` is
            :class:`ArtifactNotFound` instead).
        content_hash: the Artifact asked for.
    """

    def __init__(self, rejection: Rejection, content_hash: str) -> None:
        super().__init__(
            f"access to artifact {content_hash} refused: {rejection.code}: {rejection.reason}"
        )
        self.rejection = rejection
        self.content_hash = content_hash

    @property
    def code(self) -> str:
        """The rejection code."""
        return self.rejection.code


class ManifestError(ArtifactError):
    """A manifest is malformed, names other content, or its signature does not verify."""


class PublishRejected(ArtifactError):
    """The Authority rejected ``artifact.publish``.

    Attributes:
        rejection: the Authority's structured refusal (``stale_lease``, ``invalid_manifest``,
            ``manifest_signature``, …).
        content_hash: the Artifact's hash (its bytes are in the store; a retry is cheap).
    """

    def __init__(self, rejection: Rejection, content_hash: str) -> None:
        super().__init__(
            f"artifact.publish of {content_hash} rejected: {rejection.code}: {rejection.reason}"
        )
        self.rejection = rejection
        self.content_hash = content_hash

    @property
    def code(self) -> str:
        """The rejection code."""
        return self.rejection.code

    @property
    def detail(self) -> dict[str, Any]:
        """The rejection's machine-readable facts."""
        return self.rejection.detail
