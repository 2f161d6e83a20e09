"""The manifest index: signed manifests kept beside the Artifacts they describe.

One side document per Artifact, ``manifests/<artifact-hash>.json`` (filesystem:
``<root>/manifests/<hash>.json``; S3: key ``manifests/<hash>.json``), holding every signed
manifest published for that content (the same bytes may be produced by several WorkItems),
sorted by manifest id::

    {"manifests": [<SignedManifest JSON>, ...]}

The index is a cache of the Group logs' ``artifact.published`` Events, which stay authoritative:
:meth:`ManifestIndex.ingest` rebuilds it from them. What it serves is verified again on use.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pydantic import ValidationError

from ..protocol import Event, EventType, SignedManifest, verify_manifest
from ._errors import ManifestError
from ._lineage import LineageNode, build_lineage
from ._store import ArtifactStore, check_hash


def manifest_name(content_hash: str) -> str:
    """Side-document name of ``content_hash``'s manifests: ``manifests/<hex>.json``."""
    return f"manifests/{check_hash(content_hash)}.json"


def _parse(raw: bytes | None, name: str) -> list[SignedManifest]:
    if raw is None:
        return []
    try:
        doc = json.loads(raw)
        return [SignedManifest.model_validate(m) for m in doc["manifests"]]
    except RecursionError:  # nested deeper than the parser's stack: no index document
        raise ManifestError(f"{name} is not a manifest index document (nested too deep)") from None
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise ManifestError(f"{name} is not a manifest index document ({exc})") from None


def _dump(manifests: Iterable[SignedManifest]) -> bytes:
    by_id = {m.manifest_id: m.wire() for m in manifests}
    doc = {"manifests": [by_id[k] for k in sorted(by_id)]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


class ManifestIndex:
    """Signed manifests by Artifact hash, stored in an :class:`ArtifactStore` (MW-13.1-b/c).

    Args:
        store: the store whose side documents hold the index.
    """

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    def add(self, signed: SignedManifest, public_key: str | None = None) -> None:
        """Record ``signed`` under its content hash (idempotent).

        Args:
            signed: the signed manifest.
            public_key: the producer's trusted key (base64url); by default the key the
                manifest carries, which proves integrity but not identity.

        Raises:
            ManifestError: the signature does not verify.
        """
        if not verify_manifest(signed, public_key or signed.public_key):
            raise ManifestError(
                f"manifest {signed.manifest_id} of {signed.manifest.content_hash}: "
                "signature does not verify"
            )
        name = manifest_name(signed.manifest.content_hash)

        def merge(current: bytes | None) -> bytes:
            existing = _parse(current, name)
            if any(m.manifest_id == signed.manifest_id for m in existing):
                return current or b""
            return _dump([*existing, signed])

        self.store.update_meta(name, merge)

    def get(self, content_hash: str) -> list[SignedManifest]:
        """Every manifest recorded for ``content_hash`` (signatures not checked here).

        Raises:
            ValueError: ``content_hash`` is malformed.
            ManifestError: the index document is corrupt.
        """
        name = manifest_name(content_hash)
        return _parse(self.store.read_meta(name), name)

    def ingest(self, events: Iterable[Event]) -> int:
        """Add the manifests of ``artifact.published`` Events (e.g. a Group's whole log).

        The Authority verified each manifest's signature under the producer's member key
        before appending the Event; they are checked again here under the carried key.

        Returns:
            How many manifests were read from the Events.

        Raises:
            ManifestError: an Event's manifest does not parse or verify.
        """
        n = 0
        for ev in events:
            if ev.type != EventType.ARTIFACT_PUBLISHED:
                continue
            try:
                signed = SignedManifest.model_validate(ev.body["manifest"])
            except (KeyError, ValidationError) as exc:
                raise ManifestError(f"event {ev.group_id}#{ev.seq}: bad manifest") from exc
            self.add(signed)
            n += 1
        return n

    def lineage(
        self,
        content_hash: str,
        *,
        public_keys: Mapping[str, str] | None = None,
        max_depth: int = 256,
    ) -> LineageNode:
        """The provenance tree of ``content_hash``: its manifests and, recursively, those of
        its source Artifacts (MW-13.1-c). Cycle-safe; see :func:`build_lineage`.

        Raises:
            ValueError: ``content_hash`` is malformed.
        """
        return build_lineage(self, content_hash, public_keys=public_keys, max_depth=max_depth)
