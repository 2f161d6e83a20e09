"""Signed Artifact manifests (MW-13.1-b) and the provenance links between them (MW-13.1-c).

An Artifact's bytes live in an artifact store under their own SHA-256 (MW-13.1-a); what the
Group log and the provenance graph carry is its *manifest*: who produced which content, for which
Mission / Group / WorkItem, from which source Artifacts, with which tools, models and
capabilities, when, how classified, how large and where to fetch it. The producer signs the RFC
8785 canonical bytes of the manifest with Ed25519; the manifest's own id is the SHA-256 of those
same bytes.

Pure: no I/O, safe in the workflow sandbox. Every number is an integer (sizes in bytes, times in
epoch milliseconds): signed bodies hold no floats.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field, field_validator

from ._canonical import digest
from ._crypto import SigningKey
from ._signed import Signable, Signed, signature_of

_STRICT = ConfigDict(extra="forbid", frozen=True)

#: A SHA-256 content hash: 64 lowercase hex characters.
HASH_PATTERN = r"^[0-9a-f]{64}$"
_HASH_RE = re.compile(HASH_PATTERN)
Hash = Annotated[str, Field(pattern=HASH_PATTERN)]


def is_hash(value: object) -> bool:
    """Whether ``value`` is a SHA-256 content hash as the protocol writes it (64 lowercase hex
    characters, :data:`HASH_PATTERN`)."""
    # fullmatch: ``$`` alone also matches before a trailing newline
    return isinstance(value, str) and _HASH_RE.fullmatch(value) is not None


_Id = Annotated[str, Field(min_length=1, max_length=128)]
_Versions = Annotated[
    dict[_Id, Annotated[str, Field(min_length=1, max_length=128)]], Field(max_length=64)
]


class Classification(StrEnum):
    """Data classification of an Artifact, from least to most sensitive (MW-13.1-b)."""

    PUBLIC = "public"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"


class ArtifactManifest(Signable):
    """Everything MW-13.1-b requires of an Artifact manifest. Every field is required.
    Implements MW-13.1-b.

    Attributes:
        content_hash: SHA-256 hex of the Artifact's bytes, computed by the producer: the
            Artifact's identity (never its URI, MW-13.1-d).
        media_type: IANA media type of the content, e.g. ``"application/json"``.
        schema_id: the id of the schema the content follows (a URI or ``name@version``), or
            ``None`` when the content has no schema.
        producer: the producing Agent's id; it signs the manifest.
        agent_card_version: the producer's Agent Card version when it produced the Artifact
            (0: the agent has published no card).
        mission_id: the Mission.
        group_id: the Group.
        work_item_id: the WorkItem under whose lease it was produced.
        sources: content hashes of the Artifacts it was derived from (the provenance edges,
            MW-13.1-c); normalized to sorted, unique order.
        tool_versions: tool name → version used to produce it.
        model_versions: model name → version used to produce it.
        capability_versions: capability id → version exercised.
        created_at_ms: creation time, epoch milliseconds.
        classification: data classification.
        size_bytes: length of the content, bytes.
        uri: where to fetch it (``file://…``, ``s3://bucket/sha256/<hex>``); only a location:
            retrieval verifies ``content_hash`` (MW-13.1-d).
    """

    model_config = _STRICT
    content_hash: Hash
    media_type: str = Field(
        pattern=r"^[A-Za-z0-9][\w!#$&^.+-]*/[\w!#$&^.+-]+(;.*)?$", max_length=255
    )
    schema_id: str | None = Field(max_length=512)
    producer: _Id
    agent_card_version: int = Field(ge=0)
    mission_id: _Id
    group_id: _Id
    work_item_id: _Id
    sources: list[Hash] = Field(max_length=10_000)
    tool_versions: _Versions
    model_versions: _Versions
    capability_versions: _Versions
    created_at_ms: int = Field(ge=0)
    classification: Classification
    size_bytes: int = Field(ge=0)
    uri: str = Field(min_length=1, max_length=2048)

    @field_validator("sources")
    @classmethod
    def _sorted_unique(cls, value: list[str]) -> list[str]:
        return sorted(set(value))

    @property
    def manifest_id(self) -> str:
        """SHA-256 hex of :meth:`signing_bytes`: the manifest's own id."""
        return digest(self.wire())


class SignedManifest(Signed[ArtifactManifest]):
    """A manifest with its producer's Ed25519 signature (``public_key``, ``signature``: see
    :class:`~._signed.Signed`); the Authority checks the key against the member's on
    ``artifact.publish``.

    Attributes:
        manifest: the manifest.
    """

    DOCUMENT_FIELD = "manifest"
    manifest: ArtifactManifest

    @property
    def manifest_id(self) -> str:
        """The manifest's id (see :attr:`ArtifactManifest.manifest_id`)."""
        return self.document_hash


def sign_manifest(manifest: ArtifactManifest, key: SigningKey) -> SignedManifest:
    """Sign ``manifest`` with the producer's ``key``.

    Implements MW-13.1-b (the manifest is signed).

    Raises:
        CanonicalizationError: the manifest cannot be canonicalized (never for a valid model).
    """
    return SignedManifest(manifest=manifest, **signature_of(manifest, key))


def verify_manifest(signed: SignedManifest, public_key: str) -> bool:
    """Whether ``signed`` carries a valid signature by ``public_key`` (base64url).
    Implements MW-13.1-b.

    The carried ``public_key`` must be that key too. Never raises for a bad signature or key.
    """
    return signed.verified_by(public_key)
