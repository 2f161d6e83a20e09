"""``capability_token.rotate``: rotate or narrow the capability token of an active lease
(MW-11.3-d). Token logic and its SQL live in :mod:`._tokens`."""

from __future__ import annotations

from ...protocol import CommandType, EventType, RejectionCode
from ._command_scope import Ctx, Reject
from ._fence import fence
from ._items import gate, load_item
from ._registry import command
from ._tokens import public_token, rotate_token


def _scope(ctx: Ctx) -> list[str] | None:
    raw = ctx.body.get("scope")
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(s, str) and s for s in raw):
        raise Reject(
            RejectionCode.INVALID_BODY, "scope must be a list of non-empty strings", field="scope"
        )
    if len(set(raw)) != len(raw):
        raise Reject(RejectionCode.INVALID_BODY, "scope names an operation twice", field="scope")
    return sorted(raw)


@command(CommandType.CAPABILITY_TOKEN_ROTATE, needs_session=True)
def capability_token_rotate(ctx: Ctx) -> None:
    """The lease holder replaces its capability token while the lease stays active
    (MW-11.3-d).

    Body: ``work_item_id``, ``lease_id``, ``ownership_epoch`` (fenced like every lease Command,
    MW-11.3-c) and optionally ``scope``, a subset of the current token's scope (narrowing;
    ``scope_not_narrower`` otherwise). Every token of the lease in force until now is superseded:
    a tool gateway refuses it from this Command on. The new token expires with the lease's
    current bound. Emits ``capability_token.rotated`` with the public token, the superseded
    token ids and ``narrowed``; the whole token (with its bearer ``signature``) is in the reply.
    """
    item = load_item(ctx)
    lease = fence(ctx, item)
    gate(ctx, item, CommandType.LEASE_RENEW)  # the same rule: the active WorkItem's owner
    token, superseded, narrowed = rotate_token(ctx, lease, item, _scope(ctx))
    ctx.emit(
        EventType.CAPABILITY_TOKEN_ROTATED,
        {
            "lease_id": lease["lease_id"],
            "capability_token": public_token(token),
            "superseded": superseded,
            "narrowed": narrowed,
        },
        work_item_id=item["work_item_id"],
    )
    ctx.reply.update(capability_token=token)
