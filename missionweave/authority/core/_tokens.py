"""Capability tokens (MW-11.3-d): issue, rotate, narrow and verify.

A token is bound to one execution lease id, never the reverse: it can be rotated (a new secret,
the same scope) or narrowed (a new secret, a subset of the scope) while the lease stays active,
and it expires no later than the lease bound under which it was issued. The
``capability_tokens`` table is the one source of a token's standing: every SQL statement on it
is one of the small named functions below (the write side takes the handler's
:class:`~._context.Ctx`, the read side an :class:`~._engine.Authority`).

A token is ``{token_id, lease_id, agent_id, group_id, work_item_id, scope, expires_at_ms,
hash, signature}``: ``hash`` is the SHA-256 of the canonical first seven fields, ``signature``
the Authority's Ed25519 signature of that hash — the bearer secret, which only the lease holder
receives (in a Command's ``reply``); the log keeps the rest (:func:`public_token`).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from ...protocol import CanonicalizationError, RejectionCode, digest, new_id, verify
from ..wire import CapabilityToken, TokenCheck
from ._command_scope import Ctx, Reject
from ._items import contract_of
from ._store import Store

#: The signed fields of a token, in the order they are issued.
TOKEN_FIELDS = (
    "token_id", "lease_id", "agent_id", "group_id", "work_item_id", "scope", "expires_at_ms",
)  # fmt: skip
#: Largest integer a token carries (JSON's safe integer range).


def _insert(ctx: Ctx, token_id: str, lease_id: str, scope: list[str], expires_at_ms: int) -> None:
    ctx.run("capability_tokens.insert", token_id, lease_id, json.dumps(scope), expires_at_ms)


def active_tokens(ctx: Ctx, lease_id: str) -> list[tuple[str, list[str]]]:
    """``(token_id, scope)`` of every token of ``lease_id`` still in force (not superseded; it
    may have expired)."""
    return [
        (r["token_id"], json.loads(r["scope"]))
        for r in ctx.all("capability_tokens.active_of_lease", lease_id)
    ]


def supersede_tokens(ctx: Ctx, lease_id: str) -> None:
    """Mark every token of ``lease_id`` superseded: a tool gateway refuses them from now on."""
    ctx.run("capability_tokens.supersede", lease_id)


class _Reads(Protocol):
    """What :func:`verify_capability_token` needs of an Authority."""

    @property
    def public_key(self) -> str: ...

    def clock(self) -> int: ...

    store: Store
    _lock: threading.Lock


def _token_row(authority: _Reads, token_id: str) -> dict[str, Any] | None:
    with authority._lock:
        row = authority.store.one("capability_tokens.with_lease", token_id)
    return {k: row[k] for k in row.keys()} if row is not None else None


# --------------------------------------------------------------------------------------- issuing


def issue_token(
    ctx: Ctx,
    lease_id: str,
    item: Any,
    expires_at_ms: int,
    scope: list[str] | None = None,
) -> dict[str, Any]:
    """Issue a capability token bound to ``lease_id`` that expires with it (MW-11.3-d).

    Args:
        ctx: the handler's context (its actor is the lease holder).
        lease_id: the execution lease.
        item: the WorkItem row (its Group, id and contract).
        expires_at_ms: the lease's current bound, epoch milliseconds; the token's expiry.
        scope: the operations it allows; by default those of the lease's tokens in force (a
            renewal keeps a narrowed scope), else the contract's ``allowed_tools`` and
            ``allowed_operations``.

    Returns:
        The whole token, bearer ``signature`` included (for the reply only).
    """
    if scope is None:
        current = active_tokens(ctx, lease_id)
        scope = current[-1][1] if current else _contract_scope(item)
    body: dict[str, Any] = {
        "token_id": new_id("cap"),
        "lease_id": lease_id,
        "agent_id": ctx.command.actor,
        "group_id": item["group_id"],
        "work_item_id": item["work_item_id"],
        "scope": sorted(set(scope)),
        "expires_at_ms": expires_at_ms,
    }
    h = digest(body)
    _insert(ctx, body["token_id"], lease_id, body["scope"], expires_at_ms)
    return {**body, "hash": h, "signature": ctx.key.sign(bytes.fromhex(h))}


def _contract_scope(item: Any) -> list[str]:
    contract = contract_of(item)
    return sorted(set(contract.allowed_tools) | set(contract.allowed_operations))


def rotate_token(
    ctx: Ctx, lease: Any, item: Any, scope: list[str] | None
) -> tuple[dict[str, Any], list[str], bool]:
    """Supersede the lease's tokens in force and issue one new token (MW-11.3-d).

    Args:
        scope: ``None`` keeps the current scope (rotation); a list narrows it and must be a
            subset of the current scope.

    Returns:
        ``(token, superseded token ids, narrowed)``.

    Raises:
        Reject: ``scope_not_narrower`` — ``scope`` names an operation the current token does
            not allow (``detail.not_allowed``).
    """
    current = active_tokens(ctx, lease["lease_id"])
    allowed = current[-1][1] if current else _contract_scope(item)
    narrowed = False
    if scope is not None:
        wider = sorted(set(scope) - set(allowed))
        if wider:
            raise Reject(
                RejectionCode.SCOPE_NOT_NARROWER,
                "a token can only be narrowed, never widened",
                not_allowed=wider,
                scope=allowed,
            )
        narrowed = set(scope) != set(allowed)
    supersede_tokens(ctx, lease["lease_id"])
    token = issue_token(
        ctx, lease["lease_id"], item, lease["expires_at_ms"], allowed if scope is None else scope
    )
    return token, [t for t, _ in current], narrowed


def public_token(token: dict[str, Any]) -> dict[str, Any]:
    """What the log records of a capability token: everything but the bearer signature, which
    goes to the lease holder alone (in the reply)."""
    return {k: v for k, v in token.items() if k != "signature"}


# ---------------------------------------------------------------------------------- verification


def verify_capability_token(
    authority: _Reads, token: CapabilityToken | dict[str, Any], operation: str | None = None
) -> TokenCheck:
    """Whether ``token`` lets its bearer do ``operation`` now (MW-11.3-d).

    The token must be one this Authority signed (its hash and Authority signature check out)
    and its row in ``capability_tokens`` must be in force, with the lease it is bound to active
    and unexpired on the Authority's clock; the scope checked is the table's.

    Args:
        authority: the Authority (or anything with its ``public_key``, ``clock``, ``store`` and
            ``_lock``).
        token: the whole token, bearer signature included.
        operation: the tool or operation about to be done; ``None`` to check the token only.

    Returns:
        A :class:`TokenCheck`; a refusal is data, never an exception. A token that is not
        genuine gets ``invalid_token`` and no facts at all, so the answer reveals nothing to
        someone who does not hold a token the Authority issued.

    Raises:
        pydantic.ValidationError: ``token`` (a dict) is not shaped like a token.
    """
    t = token if isinstance(token, CapabilityToken) else CapabilityToken.model_validate(token)
    forged = TokenCheck(
        valid=False,
        code=RejectionCode.INVALID_TOKEN,
        operation=operation,
        reason="not a capability token this Authority issued",
    )
    fields = t.model_dump()
    try:
        h = digest({k: fields[k] for k in TOKEN_FIELDS})
    except (ValueError, TypeError, CanonicalizationError):  # e.g. a lone surrogate
        return forged
    if h != t.hash or not verify(authority.public_key, t.signature, bytes.fromhex(h)):
        return forged
    row = _token_row(authority, t.token_id)
    if row is None or row["lease_id"] != t.lease_id:
        return forged
    facts = TokenCheck(
        valid=False,
        token_id=row["token_id"],
        lease_id=row["lease_id"],
        agent_id=row["agent_id"],
        group_id=row["group_id"],
        work_item_id=row["work_item_id"],
        scope=json.loads(row["scope"]),
        expires_at_ms=row["expires_at_ms"],
        operation=operation,
    )
    now = authority.clock()
    if row["status"] != "active":
        why = ("token_superseded", "the token was rotated or narrowed; its holder has a new one")
    elif row["lease_status"] != "active":
        why = ("lease_ended", f"the lease it is bound to was {row['lease_status']}")
    elif now >= min(row["expires_at_ms"], row["lease_expires_at_ms"]):
        why = ("token_expired", "the token or its lease has expired")
    elif operation is not None and operation not in (facts.scope or []):
        why = ("operation_not_in_scope", f"the token does not allow {operation!r}")
    else:
        return facts.model_copy(update={"valid": True, "reason": "the token is valid"})
    return facts.model_copy(update={"code": why[0], "reason": why[1]})


__all__ = [
    "TOKEN_FIELDS",
    "active_tokens",
    "issue_token",
    "public_token",
    "rotate_token",
    "supersede_tokens",
    "verify_capability_token",
]
