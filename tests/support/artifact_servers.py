"""Artifact store fixtures: the same suite runs on the filesystem store and on a real S3 API.

The S3 backend talks to moto's S3 server on a loopback port (started once per session, stopped
at the end) through the ``minio`` client, exactly as it would talk to MinIO. The fixtures
``s3_server`` and ``store`` are in ``tests/conftest.py``; this module holds what they share.
"""

from __future__ import annotations

import io
import os
import uuid
from dataclasses import dataclass

from missionweave.artifacts import ArtifactStore, FilesystemStore, S3Store
from missionweave.authority import Authority, SubmitResult
from missionweave.protocol import (
    Actor,
    ArtifactManifest,
    Classification,
    Command,
    SignedManifest,
    sign_manifest,
)

from .world import T0


@dataclass(frozen=True)
class S3Endpoint:
    """Where the test S3 server listens and the credentials it accepts."""

    endpoint: str
    access_key: str = "testing"
    secret_key: str = "testing"
    region: str = "us-east-1"

    def store(self, bucket: str | None = None) -> S3Store:
        """A store on a fresh bucket (or ``bucket``)."""
        return S3Store(
            self.endpoint,
            self.access_key,
            self.secret_key,
            bucket or f"mw-{uuid.uuid4().hex[:16]}",
            region=self.region,
        )


def corrupt(store: ArtifactStore, content_hash: str, data: bytes) -> None:
    """Overwrite the stored object of ``content_hash`` with ``data``, behind the store's back."""
    if isinstance(store, FilesystemStore):
        path = store.root / "sha256" / content_hash
        os.chmod(path, 0o644)
        path.write_bytes(data)
    else:
        assert isinstance(store, S3Store)
        key = f"{store.prefix}sha256/{content_hash}"
        store.client.put_object(store.bucket, key, io.BytesIO(data), len(data))


class InProcess:
    """An async submitter over an in-process Authority (what ``AuthorityClient`` offers)."""

    def __init__(self, authority: Authority) -> None:
        self.authority = authority

    async def submit(self, command: Command) -> SubmitResult:
        return self.authority.submit(command)


def manifest(
    content_hash: str,
    *,
    producer: str = "worker-0",
    sources: list[str] | None = None,
    **over: object,
) -> ArtifactManifest:
    """A valid manifest; keyword arguments override fields."""
    fields: dict[str, object] = {
        "content_hash": content_hash,
        "media_type": "application/json",
        "schema_id": "report@1",
        "producer": producer,
        "agent_card_version": 0,
        "mission_id": "m1",
        "group_id": "g1",
        "work_item_id": "a",
        "sources": sources or [],
        "tool_versions": {"sha256sum": "9.4"},
        "model_versions": {},
        "capability_versions": {"dist.verify": "1.0"},
        "created_at_ms": T0,
        "classification": Classification.INTERNAL,
        "size_bytes": 1,
        "uri": f"s3://b/sha256/{content_hash}",
    }
    fields.update(over)
    return ArtifactManifest.model_validate(fields)


def signed(actor: Actor, content_hash: str, **over: object) -> SignedManifest:
    """A manifest for ``content_hash`` produced and signed by ``actor``."""
    return sign_manifest(manifest(content_hash, producer=actor.agent_id, **over), actor.key)
