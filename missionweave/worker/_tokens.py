"""Rotate or narrow a slot's capability token while its lease stays active (MW-11.3-d)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..authority.client import AuthorityUnavailable
from ..protocol import CommandType, RejectionCode
from ._errors import LeaseLost
from ._lease import LeaseSession


async def rotate_capability_token(
    session: LeaseSession, scope: Iterable[str] | None = None
) -> dict[str, Any]:
    """Send ``capability_token.rotate`` under the slot's lease and adopt the new token.

    Args:
        session: the slot's lease session.
        scope: ``None`` rotates (a new secret, the same scope); operations narrow the token to
            them (a subset of the current scope).

    Returns:
        The new token (bearer ``signature`` included); ``session.lease.capability_token`` is it
        from now on, and every earlier token of the lease is refused by a tool gateway.

    Raises:
        ValueError: ``scope`` names an operation the current token does not allow
            (``scope_not_narrower``) or is malformed.
        LeaseLost: the lease is gone, or the Authority cannot be reached (a token is only
            replaced by the Authority, MW-11.5-d).
    """
    if session.lost is not None:
        raise session.lost
    extra: dict[str, Any] = {} if scope is None else {"scope": sorted(set(scope))}
    try:
        verdict = await session.fenced(CommandType.CAPABILITY_TOKEN_ROTATE, extra, charge=False)
    except AuthorityUnavailable as exc:
        raise LeaseLost(RejectionCode.AUTHORITY_UNREACHABLE, str(exc)) from exc
    token = verdict.reply.get("capability_token")
    if verdict.accepted and isinstance(token, dict):
        session.lease = session.lease.model_copy(update={"capability_token": token})
        return token
    if session.lost is not None:
        raise session.lost
    rej = verdict.rejection
    code, reason = (rej.code, rej.reason) if rej else (verdict.status, "not accepted")
    if code in (RejectionCode.SCOPE_NOT_NARROWER, RejectionCode.INVALID_BODY):
        raise ValueError(f"{code}: {reason}")
    raise LeaseLost(code, reason)


__all__ = ["rotate_capability_token"]
