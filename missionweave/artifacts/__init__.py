"""Content-addressed Artifacts (spec 13.1) and the context rules of spec 13.3.

``FilesystemStore`` (the embedded default) and ``S3Store`` (MinIO or any S3 API) implement one
``ArtifactStore`` protocol: objects live under ``groups/<group_id>/sha256/<hex>`` of their bytes
(``for_group``: content is addressed per Group), a put of present content writes nothing, and
every read verifies the hash (MW-13.1-a, MW-13.1-d). Only the Authority and the coordinator
hold a store; agents and people reach Artifacts through the Authority's grants
(``GatedArtifacts``: a membership and context check, then one object for a short time).
``publish_artifact`` stores bytes, signs their manifest and has the Authority record it;
``ManifestIndex`` keeps the signed manifests beside the Artifacts and answers ``lineage`` (the
provenance tree, MW-13.1-c), rendered by ``to_text`` / ``to_mermaid``. Who may put what into a
Mission's context (MW-13.3-b, MW-13.3-d) is the Authority's to say:
``missionweave.authority.check_context_use`` and ``events_for_member``.
"""

from ._errors import (
    ArtifactAccessDenied,
    ArtifactError,
    ArtifactIntegrityError,
    ArtifactNotFound,
    ArtifactStoreError,
    ManifestError,
    PublishRejected,
)
from ._fs import FilesystemStore
from ._gate import GatedArtifacts, GrantFn
from ._lineage import LineageNode, LineageStatus, LogManifests, build_lineage, to_mermaid, to_text
from ._manifest import ManifestIndex
from ._publish import AsyncSubmitter, LeaseInfo, PublishedArtifact, publish_artifact
from ._s3 import S3Store
from ._s3_staging import adopt_staged, presign_staged_put
from ._store import ArtifactRef, ArtifactStore

__all__ = [
    "ArtifactAccessDenied",
    "ArtifactError",
    "ArtifactIntegrityError",
    "ArtifactNotFound",
    "ArtifactRef",
    "ArtifactStore",
    "ArtifactStoreError",
    "AsyncSubmitter",
    "FilesystemStore",
    "GatedArtifacts",
    "GrantFn",
    "LeaseInfo",
    "LineageNode",
    "LineageStatus",
    "LogManifests",
    "ManifestError",
    "ManifestIndex",
    "PublishRejected",
    "PublishedArtifact",
    "S3Store",
    "adopt_staged",
    "build_lineage",
    "presign_staged_put",
    "publish_artifact",
    "to_mermaid",
    "to_text",
]
