"""The mandatory fence of a handler's actions (MW-11.5-d): :class:`FencedActions`, the part of
``WorkContext`` that meters and fences side effects and tool calls.

Two questions decide what an action needs, and they are separate:

- **Does it leave the process** (``external``, the default)? A write to another system, a tool
  that calls out, anything another party can see. It needs a lease and a capability token
  that are valid *now*: both unexpired while the Authority last answered; otherwise
  (offline, or either one expired) it waits for the Authority to confirm the lease — renewing
  an expired token — until the lease's grace deadline, and is refused after it.
- **Can it be undone** (``reversible``)? An irreversible action — every action of a ``high``
  or ``critical`` risk-class contract — always asks the Authority first (one round trip).

Only computation the agent can undo locally (``external=False`` and reversible, below ``high``
risk) goes on while the Authority is unreachable, until the grace deadline (MW-11.5-c).
"""

from __future__ import annotations

from typing import Any

from ..protocol import RiskClass, WorkContract
from ._errors import LeaseLost
from ._lease import LeaseSession, UsageMeter

#: Risk classes whose every action counts as irreversible (MW-11.5-d).
_HIGH_RISK = frozenset({RiskClass.HIGH, RiskClass.CRITICAL})

#: The key under which a durable checkpoint carries the per-tool call counters, so that a
#: resumed attempt numbers its tool calls as the interrupted one did. The handler never sees
#: it: ``WorkContext`` adds it to what it sends and strips it from what it is given.
TOOL_CALLS_KEY = "missionweave:tool_calls"


def tool_call_counters(checkpoint: dict[str, Any] | None) -> dict[str, int]:
    """The per-tool call counters a durable checkpoint carries (empty when it has none)."""
    raw = (checkpoint or {}).get(TOOL_CALLS_KEY)
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, int) and v >= 0}


class FencedActions:
    """Fenced, metered actions; mixed into ``WorkContext``, which provides the attributes.
    Implements MW-11.5-d."""

    _session: LeaseSession
    _tool_calls: dict[str, int]
    contract: WorkContract
    usage: UsageMeter

    def idempotency_key(self, op_id: str) -> str:  # pragma: no cover - WorkContext's
        raise NotImplementedError

    def irreversible(self, reversible: bool) -> bool:
        """Whether an action counts as irreversible: every action of a ``high`` or
        ``critical`` risk-class contract does, whatever the handler says; otherwise the
        handler's ``reversible`` flag decides (MW-11.5-d)."""
        return not reversible or self.contract.risk_class in _HIGH_RISK

    async def effect(self, op_id: str, *, reversible: bool = False, external: bool = True) -> str:
        """Fence, meter and key one side effect (by default a write to another system).

        Implements MW-11.5-d. An irreversible effect (:meth:`irreversible`) needs a lease
        the Authority confirms now (one round trip; it waits while the Authority is
        unreachable, until the grace deadline). A reversible one that leaves the process
        (``external``) needs a lease and capability token valid now: it goes ahead without
        a round trip while both are unexpired and the Authority last answered, and otherwise
        waits for a confirmation as an irreversible one does. Only a reversible,
        ``external=False`` effect of a low/medium-risk contract goes on offline, while the
        grace period lasts. Counts one ``side_effects`` in :attr:`usage`.

        Args:
            op_id: the operation's id within this WorkItem, e.g. ``"ledger"``.
            reversible: the effect can be undone (only honoured below ``high`` risk).
            external: the effect leaves the process (another party can see it).

        Returns:
            The operation's idempotency key (:meth:`idempotency_key`): pass it to the
            external API so that a retry under this ownership epoch has no second effect.

        Raises:
            LeaseLost: the lease is gone, or could not be confirmed before the grace deadline.
            ValueError: ``op_id`` is empty.
        """
        await self._fence(reversible=reversible, external=external)
        self.usage.add(side_effects=1)
        return self.idempotency_key(op_id)

    async def tool_call(
        self,
        tool: str,
        *,
        op_id: str | None = None,
        reversible: bool = True,
        external: bool = True,
    ) -> str:
        """Fence and meter one tool call (``tool_calls`` + 1) as :meth:`effect` fences a side
        effect (Implements MW-11.5-d, MW-11.4-e): read-only tools are reversible by default;
        pass ``reversible=False`` for one that changes the world, ``external=False`` for one
        that runs inside this process (only those go on offline).

        Each call has its own operation id: ``tool:<tool>:<op_id>`` when ``op_id`` is given,
        else ``tool:<tool>:<n>`` for the n-th call of ``tool`` in this WorkItem (from 1). The
        counters travel in every durable checkpoint (:meth:`save`, :meth:`pause`,
        :meth:`block`), so a retry resumed from a checkpoint numbers the calls after it as
        the interrupted attempt did, and gets the same keys.

        Returns:
            The call's idempotency key under this ownership epoch.

        Raises:
            LeaseLost: as :meth:`effect`.
            ValueError: ``tool`` or ``op_id`` is empty.
        """
        if not tool or op_id == "":
            raise ValueError("a tool call needs a tool name (and a non-empty op_id if given)")
        await self._fence(reversible=reversible, external=external)
        if op_id is None:
            n = self._tool_calls.get(tool, 0) + 1
            self._tool_calls[tool] = n
            op_id = str(n)
        self.usage.add(tool_calls=1)
        return self.idempotency_key(f"tool:{tool}:{op_id}")

    async def _fence(self, *, reversible: bool, external: bool) -> None:
        session = self._session
        if session.lost is not None:
            raise session.lost
        if self.irreversible(reversible):
            await session.confirm()
        elif external:
            if not _valid_now(session):
                await session.confirm()
        elif session.offline and session.clock() >= session.grace_deadline_ms:
            raise LeaseLost("grace_expired", "offline past the lease's grace deadline")


def _valid_now(session: LeaseSession) -> bool:
    """Whether the lease and its capability token are valid now as far as this slot knows
    without asking: the Authority answered the last attempt, neither has expired, and no
    Command waits in the agent's offline buffer — whichever slot buffered it: a slot that
    never saw the outage must still not act before it is reconciled (Implements MW-11.5-e;
    :meth:`LeaseSession.confirm` reconciles first)."""
    if session.offline or (session.buffer is not None and len(session.buffer)):
        return False
    now = session.clock()
    token_expiry = session.lease.capability_token.get("expires_at_ms")
    return session.lease.expires_at_ms > now and (
        not isinstance(token_expiry, int) or token_expiry > now
    )


__all__ = ["TOOL_CALLS_KEY", "FencedActions", "tool_call_counters"]
