"""Publishing an Artifact: store the bytes, sign the manifest, have the Authority record it.

The agent runtime's ``WorkContext.publish()`` calls :func:`publish_artifact`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from ..protocol import (
    Actor,
    ArtifactManifest,
    Classification,
    Command,
    CommandType,
    Rejection,
    RejectionCode,
    SignedManifest,
    sign_manifest,
)
from ._errors import PublishRejected
from ._gate import GatedArtifacts
from ._manifest import ManifestIndex
from ._store import ArtifactRef, ArtifactStore

if TYPE_CHECKING:
    from ..authority.wire import SubmitResult


class AsyncSubmitter(Protocol):
    """What :func:`publish_artifact` needs of the Authority: ``AuthorityClient`` fits."""

    async def submit(self, command: Command) -> SubmitResult:
        """Submit one signed Command and return the Authority's verdict."""
        ...


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """The execution lease a publication is made under (MW-11.3-c).

    Attributes:
        work_item_id: the WorkItem.
        lease_id: the current execution lease id.
        ownership_epoch: the current ownership epoch.
    """

    work_item_id: str
    lease_id: str
    ownership_epoch: int

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseInfo:
        """From a lease as ``work.started`` reports it (``lease_id``, ``work_item_id``,
        ``ownership_epoch``)."""
        return cls(
            str(lease["work_item_id"]), str(lease["lease_id"]), int(lease["ownership_epoch"])
        )


@dataclass(frozen=True, slots=True)
class PublishedArtifact:
    """The outcome of :func:`publish_artifact`.

    Attributes:
        ref: where the bytes are.
        manifest: the signed manifest the Authority accepted.
        result: the Authority's verdict (its ``events`` hold ``artifact.published``).
    """

    ref: ArtifactRef
    manifest: SignedManifest
    result: SubmitResult = field(repr=False)


async def publish_artifact(
    store: ArtifactStore | GatedArtifacts,
    authority: AsyncSubmitter,
    actor: Actor,
    group_id: str,
    lease: LeaseInfo,
    data: bytes | BinaryIO | os.PathLike[str],
    *,
    mission_id: str,
    media_type: str,
    schema_id: str | None,
    classification: Classification,
    agent_card_version: int,
    sources: Sequence[str] = (),
    tool_versions: Mapping[str, str] | None = None,
    model_versions: Mapping[str, str] | None = None,
    capability_versions: Mapping[str, str] | None = None,
    index: ManifestIndex | None = None,
    created_at_ms: int | None = None,
) -> PublishedArtifact:
    """Store an Artifact and record its signed manifest with the Authority (MW-13.1-a..c).

    Steps: put the bytes in ``store`` (content-addressed; a no-op when present; an agent's
    store is :class:`GatedArtifacts`: the Authority grants the write), build the
    manifest with every MW-13.1-b field, sign it with the actor's key, submit
    ``artifact.publish`` (body: ``work_item_id``, ``lease_id``, ``ownership_epoch``,
    ``manifest``), and once accepted — with a store it holds itself — add the manifest to the
    store's :class:`ManifestIndex` for lineage. Indexing only after acceptance keeps refused
    manifests out of provenance; if the process dies in between, or publishes through the
    Authority (no store of its own), ``ManifestIndex.ingest`` over the Group log fills it.

    Blocking store I/O runs in a worker thread, so the event loop stays free.

    Args:
        store: the artifact store, or the Group's Artifacts through the Authority.
        authority: an async submitter (``AuthorityClient``).
        actor: the producing agent (its session and membership epochs must be current).
        group_id: the Group.
        lease: the current execution lease.
        data: the content: bytes, a binary stream (read once, in bounded memory) or a
            ``Path`` to a file.
        mission_id: the Mission of the WorkItem.
        media_type: IANA media type.
        schema_id: the content's schema id, or ``None``.
        classification: data classification.
        agent_card_version: the producer's Agent Card version (0 if it published none).
        sources: hashes of the Artifacts it derives from (provenance, MW-13.1-c).
        tool_versions: tool → version.
        model_versions: model → version.
        capability_versions: capability id → version.
        index: the manifest index (default: one over ``store``).
        created_at_ms: creation time, epoch milliseconds (default: now).

    Returns:
        The reference, the signed manifest and the Authority's verdict.

    Raises:
        PublishRejected: the Authority refused (``stale_lease``, ``invalid_manifest``,
            ``manifest_signature``, ``cross_mission_content``, …); the bytes stay stored.
        ArtifactStoreError: the store failed.
        ArtifactAccessDenied: the Authority refused the write (through :class:`GatedArtifacts`).
        AuthorityClientError: the Authority could not be reached (resubmitting is safe).
    """
    if isinstance(store, GatedArtifacts):
        ref = await store.put(data, media_type)
    else:
        ref = await asyncio.to_thread(_put, store, data, media_type)
    manifest = ArtifactManifest(
        content_hash=ref.hash,
        media_type=media_type,
        schema_id=schema_id,
        producer=actor.agent_id,
        agent_card_version=agent_card_version,
        mission_id=mission_id,
        group_id=group_id,
        work_item_id=lease.work_item_id,
        sources=list(sources),
        tool_versions=dict(tool_versions or {}),
        model_versions=dict(model_versions or {}),
        capability_versions=dict(capability_versions or {}),
        created_at_ms=created_at_ms if created_at_ms is not None else time.time_ns() // 1_000_000,
        classification=classification,
        size_bytes=ref.size,
        uri=ref.uri,
    )
    signed = sign_manifest(manifest, actor.key)
    cmd = actor.command(
        CommandType.ARTIFACT_PUBLISH,
        group_id,
        {
            "work_item_id": lease.work_item_id,
            "lease_id": lease.lease_id,
            "ownership_epoch": lease.ownership_epoch,
            "manifest": signed.wire(),
        },
    )
    result = await authority.submit(cmd)
    if result.status != "accepted":
        rejection = result.rejection or Rejection(
            code=RejectionCode.INTERNAL_ERROR, reason=f"not accepted: {result.status}"
        )
        raise PublishRejected(rejection, ref.hash)
    if not isinstance(store, GatedArtifacts):
        await asyncio.to_thread((index or ManifestIndex(store)).add, signed, actor.public_key)
    return PublishedArtifact(ref, signed, result)


def _put(
    store: ArtifactStore, data: bytes | BinaryIO | os.PathLike[str], media_type: str
) -> ArtifactRef:
    if isinstance(data, bytes):
        return store.put(data, media_type)
    if isinstance(data, os.PathLike):
        return store.put_file(data, media_type)
    return store.put_stream(data, media_type)
