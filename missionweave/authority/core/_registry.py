"""Command type → handler registry.

``auth`` says how the actor is identified before the handler runs:

* ``member`` — the actor must be an active member of ``command.group_id``; its key and roles come
  from the membership, and ``membership_epoch`` / ``session_epoch`` must be current;
* ``self`` — ``group.create``: the body carries the creator's public key;
* ``agent`` — agent-level (``session.open``): the key comes from the agent registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._command_scope import Ctx

Handler = Callable[[Ctx], None]


@dataclass(frozen=True, slots=True)
class Spec:
    type: str
    auth: str
    fn: Handler
    needs_session: bool


HANDLERS: dict[str, Spec] = {}


def command(
    type: str, *, auth: str = "member", needs_session: bool = False
) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of Command ``type``."""

    def deco(fn: Handler) -> Handler:
        HANDLERS[type] = Spec(type, auth, fn, needs_session)
        return fn

    return deco
