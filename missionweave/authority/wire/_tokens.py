"""Capability tokens as they travel (MW-11.3-d): the whole token its holder hands a tool gateway,
the gateway's question (``POST /v1/capability-tokens/verify``) and the Authority's answer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ...protocol import HASH_PATTERN, MAX_SAFE_INT

#: The verification route's path.
VERIFY_PATH = "/v1/capability-tokens/verify"


class CapabilityToken(BaseModel):
    """A whole capability token, as its holder received it and hands it to a tool gateway."""

    model_config = ConfigDict(extra="forbid")
    token_id: str = Field(min_length=1, max_length=200)
    lease_id: str = Field(min_length=1, max_length=200)
    agent_id: str = Field(min_length=1, max_length=200)
    group_id: str = Field(min_length=1, max_length=200)
    work_item_id: str = Field(min_length=1, max_length=200)
    scope: list[str] = Field(max_length=1000)
    expires_at_ms: int = Field(ge=0, le=MAX_SAFE_INT)
    hash: str = Field(pattern=HASH_PATTERN)
    signature: str = Field(min_length=1, max_length=200)


class TokenVerifyRequest(BaseModel):
    """``POST /v1/capability-tokens/verify``: the token, and the operation about to be done
    (``None``: only whether the token is in force)."""

    model_config = ConfigDict(extra="forbid")
    token: CapabilityToken
    operation: str | None = Field(default=None, min_length=1, max_length=200)


class TokenCheck(BaseModel):
    """The Authority's answer on a capability token (MW-11.3-d).

    Attributes:
        valid: the token is genuine, in force, unexpired, its lease active and unexpired, and
            (when asked) ``operation`` is in its scope.
        code: why not: ``invalid_token`` (not a token this Authority issued, e.g. forged,
            altered or the log's public form without its signature), ``token_superseded``
            (rotated or narrowed since), ``lease_ended`` (the lease was released, revoked or
            expired), ``token_expired`` (past its bound or its lease's),
            ``operation_not_in_scope``; ``None`` when valid.
        reason: one sentence.
        token_id, lease_id, agent_id, group_id, work_item_id, scope, expires_at_ms: the
            token's facts as the ``capability_tokens`` table holds them; only for a genuine
            token (its holder knows them already), all ``None`` for ``invalid_token``.
        operation: the operation asked about.
    """

    valid: bool
    code: str | None = None
    reason: str = ""
    token_id: str | None = None
    lease_id: str | None = None
    agent_id: str | None = None
    group_id: str | None = None
    work_item_id: str | None = None
    scope: list[str] | None = None
    expires_at_ms: int | None = None
    operation: str | None = None
