"""The mandatory fence of a handler's actions (MW-11.5-d): :class:`FencedActions`, the part of
``WorkContext`` that meters and fences side effects and tool calls.

An irreversible action — every action of a ``high`` or ``critical`` risk-class contract — needs a
lease the Authority confirms now: while the Authority is unreachable it waits, until the lease's
grace deadline. A reversible one goes on offline while the grace lasts, with no round trip.
"""

from __future__ import annotations

from ..protocol import RiskClass, WorkContract
from ._errors import LeaseLost
from ._lease import LeaseSession, UsageMeter

#: Risk classes whose every action counts as irreversible (MW-11.5-d).
_HIGH_RISK = frozenset({RiskClass.HIGH, RiskClass.CRITICAL})


class FencedActions:
    """Fenced, metered actions; mixed into ``WorkContext``, which provides the attributes."""

    _session: LeaseSession
    contract: WorkContract
    usage: UsageMeter

    def idempotency_key(self, op_id: str) -> str:  # pragma: no cover - WorkContext's
        raise NotImplementedError

    def irreversible(self, reversible: bool) -> bool:
        """Whether an action counts as irreversible: every action of a ``high`` or
        ``critical`` risk-class contract does, whatever the handler says; otherwise the
        handler's ``reversible`` flag decides (MW-11.5-d)."""
        return not reversible or self.contract.risk_class in _HIGH_RISK

    async def effect(self, op_id: str, *, reversible: bool = False) -> str:
        """Fence, meter and key one external side effect (a write to another system).

        An irreversible effect (:meth:`irreversible`) needs a lease the Authority confirms
        now (:meth:`guard`: it waits while the Authority is unreachable, until the grace
        deadline); a reversible one of a low/medium-risk contract goes on offline while the
        grace period lasts (no round trip: only a lost lease or a passed grace deadline stops
        it). Counts one ``side_effects`` in :attr:`usage`.

        Args:
            op_id: the operation's id within this WorkItem, e.g. ``"ledger"``.
            reversible: the effect can be undone (only honoured below ``high`` risk).

        Returns:
            The operation's idempotency key (:meth:`idempotency_key`): pass it to the
            external API so that a retry under this ownership epoch has no second effect.

        Raises:
            LeaseLost: the lease is gone, or could not be confirmed before the grace deadline.
            ValueError: ``op_id`` is empty.
        """
        await self._fence(reversible)
        self.usage.add(side_effects=1)
        return self.idempotency_key(op_id)

    async def tool_call(self, tool: str, *, reversible: bool = True) -> str:
        """Fence and meter one tool call (``tool_calls`` + 1) as :meth:`effect` fences a side
        effect: read-only tools are reversible by default; pass ``reversible=False`` for one
        that changes the world. Returns the call's idempotency key (``tool:<tool>``).

        Raises:
            LeaseLost: as :meth:`effect`.
            ValueError: ``tool`` is empty.
        """
        await self._fence(reversible)
        self.usage.add(tool_calls=1)
        return self.idempotency_key(f"tool:{tool}")

    async def _fence(self, reversible: bool) -> None:
        session = self._session
        if session.lost is not None:
            raise session.lost
        if self.irreversible(reversible):
            await session.confirm()
        elif session.offline and session.clock() >= session.grace_deadline_ms:
            raise LeaseLost("grace_expired", "offline past the lease's grace deadline")


__all__ = ["FencedActions"]
