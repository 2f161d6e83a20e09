"""What the protocol's signed documents share (Artifact manifests, MW-13.1-b; Context Packages,
MW-13.3-a): the signer signs the document's RFC 8785 canonical bytes with Ed25519 and carries
its public key beside the signature, so anyone can check it offline; trust in the key comes from
the Group's membership.

Pure: no I/O, safe in the workflow sandbox.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from ._canonical import canonical_bytes, digest
from ._crypto import SigningKey, verify


class Signable(BaseModel):
    """A document signed over its canonical bytes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def wire(self) -> dict[str, Any]:
        """The document as a JSON value (no floats)."""
        return self.model_dump(mode="json")

    def signing_bytes(self) -> bytes:
        """RFC 8785 canonical bytes of the document: what its author signs."""
        return canonical_bytes(self.wire())


#: The document a :class:`Signed` carries.
D = TypeVar("D", bound=Signable)


class Signed(BaseModel, Generic[D]):
    """A :class:`Signable` document with its signer's Ed25519 signature. A subclass adds the
    document's own field, named as the spec names it, and says which it is
    (:attr:`DOCUMENT_FIELD`): e.g. ``class SignedManifest(Signed[ArtifactManifest])`` with
    ``manifest: ArtifactManifest`` and ``DOCUMENT_FIELD = "manifest"``.

    Attributes:
        public_key: the signer's base64url public key, carried so the signature can be checked
            offline.
        signature: base64url Ed25519 signature over ``document.signing_bytes()``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    public_key: str = Field(min_length=43, max_length=44)
    signature: str = Field(min_length=86, max_length=88)

    #: The name of the subclass's field that holds the document.
    DOCUMENT_FIELD: ClassVar[str]

    @property
    def document(self) -> D:
        """The signed document."""
        return cast(D, getattr(self, self.DOCUMENT_FIELD))

    @property
    def document_hash(self) -> str:
        """SHA-256 hex of the document's canonical bytes: the id it is known by (a manifest's
        ``manifest_id``, a Context Package's ``package_hash``)."""
        return digest(self.document.wire())

    def wire(self) -> dict[str, Any]:
        """The signed document as a JSON value, e.g. for a Command body."""
        return self.model_dump(mode="json")

    def verified_by(self, public_key: str) -> bool:
        """Whether the signature is valid by ``public_key`` (base64url), the key carried being
        that key too. Never raises for a bad signature or key."""
        return self.public_key == public_key and verify(
            public_key, self.signature, self.document.signing_bytes()
        )


def signature_of(document: Signable, key: SigningKey) -> dict[str, str]:
    """``public_key`` and ``signature`` of ``document`` signed with ``key``: the fields a
    :class:`Signed` adds to it.

    Raises:
        CanonicalizationError: the document cannot be canonicalized (never for a valid model).
    """
    return {"public_key": key.public_key, "signature": key.sign(document.signing_bytes())}
