"""Context Packages (spec 13.3): signed, versioned, scoped summaries of a Mission's history.

A package never replaces the authoritative history: it cites the Group Event range it summarizes
(which a member may fetch, MW-13.3-b) and the Artifacts it relies on by hash. Each update is a new
version that links the previous one by hash, so the chain of versions is its provenance
(MW-13.3-c). Decisions, constraints and open questions are short factual records, never a
reasoning transcript (MW-13.2-d).

Pure: no I/O, safe in the workflow sandbox. Times are epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._artifacts import Hash
from ._crypto import SigningKey
from ._errors import Rejection
from ._rejection_codes import RejectionCode
from ._signed import Signable, Signed, signature_of

_STRICT = ConfigDict(extra="forbid", frozen=True)
_Id = Annotated[str, Field(min_length=1, max_length=128)]
_Record = Annotated[str, Field(min_length=1, max_length=2000)]
_Records = Annotated[list[_Record], Field(max_length=200)]


class EventRange(BaseModel):
    """A contiguous range of one Group's log, both ends included.

    Attributes:
        group_id: the Group.
        from_seq: first sequence (≥ 1).
        to_seq: last sequence (≥ ``from_seq``).
    """

    model_config = _STRICT
    group_id: _Id
    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> EventRange:
        if self.to_seq < self.from_seq:
            raise ValueError("to_seq must not be below from_seq")
        return self


class ContextPackage(Signable):
    """One version of a Context Package; every MW-13.3-a field is required.

    Attributes:
        mission_id: the Mission it summarizes.
        scope: the WorkItem ids it covers (empty: the whole Mission); sorted, unique.
        source: the Event range it summarizes.
        artifacts: content hashes of the Artifacts it cites; sorted, unique.
        decisions: decisions taken, one short statement each.
        constraints: constraints in force.
        open_questions: questions still open.
        generator: the agent id that generated (and signs) it.
        created_at_ms: generation time, epoch milliseconds.
        version: 1 for the first version, then previous + 1.
        previous: :attr:`SignedContextPackage.package_hash` of the previous version (``None``
            exactly when ``version`` is 1).
    """

    model_config = _STRICT
    mission_id: _Id
    scope: Annotated[list[_Id], Field(max_length=1000)]
    source: EventRange
    artifacts: Annotated[list[Hash], Field(max_length=10_000)]
    decisions: _Records
    constraints: _Records
    open_questions: _Records
    generator: _Id
    created_at_ms: int = Field(ge=0)
    version: int = Field(ge=1)
    previous: Hash | None

    @field_validator("scope", "artifacts")
    @classmethod
    def _sorted_unique(cls, value: list[str]) -> list[str]:
        return sorted(set(value))

    @model_validator(mode="after")
    def _linked(self) -> ContextPackage:
        if (self.version == 1) != (self.previous is None):
            raise ValueError("version 1 has no previous; every later version names its previous")
        return self

    @property
    def scope_key(self) -> str:
        """The scope as one string (``"*"`` for the whole Mission): what a chain is keyed by."""
        return ",".join(self.scope) or "*"


class SignedContextPackage(Signed[ContextPackage]):
    """A Context Package with its generator's Ed25519 signature (MW-13.3-a; ``public_key``,
    ``signature``: see :class:`~._signed.Signed`).

    Attributes:
        package: the package.
    """

    DOCUMENT_FIELD = "package"
    package: ContextPackage

    @property
    def package_hash(self) -> str:
        """SHA-256 hex of the package's canonical bytes: the id the next version links."""
        return self.document_hash


def sign_context_package(package: ContextPackage, key: SigningKey) -> SignedContextPackage:
    """Sign ``package`` with its generator's ``key`` (MW-13.3-a)."""
    return SignedContextPackage(package=package, **signature_of(package, key))


def verify_context_package(signed: SignedContextPackage, public_key: str) -> bool:
    """Whether ``signed`` carries a valid signature by ``public_key`` (base64url); never raises."""
    return signed.verified_by(public_key)


def verify_chain(
    packages: Sequence[SignedContextPackage], public_keys: Mapping[str, str] | None = None
) -> Rejection | None:
    """Check a whole version chain, oldest first (MW-13.3-c).

    The first package must be version 1; each next one must have the same Mission and scope,
    version + 1 and ``previous`` equal to the prior package's hash. Every signature must verify:
    under ``public_keys[generator]`` when a key map is given (an unknown generator fails), else
    under the key each package carries.

    Args:
        packages: the versions, oldest first (at least one).
        public_keys: agent id → base64url public key, to pin the generators' keys.

    Returns:
        ``None`` when the chain verifies, else a :class:`Rejection` whose ``detail.version``
        names the first bad version: ``empty_chain``, ``context_chain`` (a broken link, a
        skipped version or another Mission / scope) or ``context_signature``.
    """
    if not packages:
        return Rejection(code=RejectionCode.EMPTY_CHAIN, reason="a chain has at least one version")
    prior: SignedContextPackage | None = None
    for signed in packages:
        p = signed.package
        key = signed.public_key if public_keys is None else public_keys.get(p.generator)
        if key is None or not verify_context_package(signed, key):
            return Rejection(
                code=RejectionCode.CONTEXT_SIGNATURE,
                reason="the package's signature does not verify",
                detail={"version": p.version, "generator": p.generator},
            )
        expected = (
            (1, None, p.mission_id, p.scope_key)
            if prior is None
            else (
                prior.package.version + 1,
                prior.package_hash,
                prior.package.mission_id,
                prior.package.scope_key,
            )
        )
        actual = (p.version, p.previous, p.mission_id, p.scope_key)
        if actual != expected:
            return Rejection(
                code=RejectionCode.CONTEXT_CHAIN,
                reason="the version does not link the previous one",
                detail={"version": p.version, "expected": list(expected), "actual": list(actual)},
            )
        prior = signed
    return None
