"""One execution slot's dealings with the Authority under its lease (spec 11.3, 11.4).

A :class:`LeaseSession` signs the Commands a Worker reports under an execution lease — renewals,
progress, checkpoints, blocks, submissions, failures — always naming the current ``lease_id``
and ``ownership_epoch`` (MW-11.3-c), and charges the slot's own usage meters with each of them.
It is private to one slot: nothing here is shared between concurrent WorkItems (MW-11.1-e).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..authority.client import AuthorityClient, AuthorityUnavailable
from ..authority.wire import now_ms
from ..protocol import Actor, Command, CommandType, OfflineBinding, RejectionCode, ResourceUsage
from ..protocol.temporal_contract import CommandVerdict, ExecuteWorkItemInput, LeaseGrant
from ._errors import LeaseLost
from ._metrics import record_burn
from ._offline import OfflineBuffer, bind, reconcile
from ._verdicts import command_verdict, is_fenced_out

log = logging.getLogger(__name__)

_DIMS = ("money_minor_units", "tokens", "tool_calls", "compute_ms", "side_effects")


@dataclass
class UsageMeter:
    """Resource meters of one slot; the runtime reports their deltas with every renewal and
    report, and the Authority charges them against the contract's budget (MW-11.5-j).

    A handler adds what it consumed (``ctx.usage.add(tool_calls=1, tokens=812)``); wall-clock
    time is measured by the runtime.

    Attributes:
        tool_calls: tool calls made so far.
        tokens: model tokens consumed.
        side_effects: externally visible actions taken.
        money_minor_units: money spent, in the contract budget's currency's minor units.
        compute_ms: compute time, milliseconds.
    """

    tool_calls: int = 0
    tokens: int = 0
    side_effects: int = 0
    money_minor_units: int = 0
    compute_ms: int = 0
    _reported: dict[str, int] = field(default_factory=dict, repr=False)
    _wall_mark: float = field(default_factory=time.monotonic, repr=False)
    _wall_pending_ms: int = field(default=0, repr=False)

    def add(
        self,
        *,
        tool_calls: int = 0,
        tokens: int = 0,
        side_effects: int = 0,
        money_minor_units: int = 0,
        compute_ms: int = 0,
    ) -> None:
        """Count consumption. Every amount is a non-negative integer.

        Raises:
            ValueError: an amount is negative.
        """
        amounts = {
            "tool_calls": tool_calls,
            "tokens": tokens,
            "side_effects": side_effects,
            "money_minor_units": money_minor_units,
            "compute_ms": compute_ms,
        }
        if any(v < 0 for v in amounts.values()):
            raise ValueError("usage amounts are non-negative")
        for k, v in amounts.items():
            setattr(self, k, getattr(self, k) + v)

    def take_delta(self) -> ResourceUsage:
        """The usage not yet reported (wall clock included), marked as reported."""
        now = time.monotonic()
        wall = self._wall_pending_ms + int((now - self._wall_mark) * 1000)
        self._wall_mark, self._wall_pending_ms = now, 0
        delta = {k: getattr(self, k) - self._reported.get(k, 0) for k in _DIMS}
        for k in _DIMS:
            self._reported[k] = getattr(self, k)
        return ResourceUsage(wall_clock_ms=wall, **delta)

    def give_back(self, delta: ResourceUsage) -> None:
        """Undo :meth:`take_delta` for a report the Authority did not charge."""
        self._wall_pending_ms += delta.wall_clock_ms
        for k in _DIMS:
            self._reported[k] = self._reported.get(k, 0) - getattr(delta, k)

    def total(self) -> ResourceUsage:
        """Everything counted so far (without wall clock)."""
        return ResourceUsage(**{k: getattr(self, k) for k in _DIMS})


@dataclass(frozen=True, slots=True)
class Prepared:
    """A signed fenced Command and the usage delta it charges."""

    command: Command
    delta: ResourceUsage | None


@dataclass(slots=True, eq=False)
class LeaseSession:
    """The signed, fenced reporting channel of one execution slot.

    Args:
        actor: the agent (its Session and Membership Epochs sign every Command).
        client: the Authority client.
        work: the activity input: ids, contract and the granted lease.
        clock: epoch-millisecond clock (token expiry, Evidence timestamps).
        buffer: where progress made while the Authority is unreachable is kept until it can
            be reconciled (MW-11.5-c); an in-memory one by default.

    Raises:
        ValueError: ``work`` carries no lease.

    Attributes:
        lease: the current lease (expiry and capability token follow renewals).
        usage: this slot's meters.
        lost: set once the Authority said the lease is gone.
        disconnected_at_ms: when the Authority stopped answering (``None`` while it answers).
        reconciled: the Authority's verdicts on this slot's reconciled buffered Commands.
    """

    actor: Actor
    client: AuthorityClient
    work: ExecuteWorkItemInput
    clock: Callable[[], int] = now_ms
    buffer: OfflineBuffer | None = None
    lease: LeaseGrant = field(init=False)
    usage: UsageMeter = field(default_factory=UsageMeter, init=False)
    lost: LeaseLost | None = field(default=None, init=False)
    last_verdict: CommandVerdict | None = field(default=None, init=False)
    disconnected_at_ms: int | None = field(default=None, init=False)
    reconciled: list[CommandVerdict] = field(default_factory=list, init=False)
    #: One charge in flight at a time (MW-11.5-j): held from :meth:`prepare` of a Command that
    #: takes the usage delta until its verdict is in, or it is buffered. A Command prepared
    #: meanwhile — a handler's checkpoint while the heartbeat's renewal is out — waits and
    #: carries whatever that verdict gave back, so each verdict covers all usage metered
    #: before it. (Without it, a checkpoint with no usage was accepted while the renewal that
    #: carried its charge was refused ``budget_exceeded``; issue 36.)
    charging: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.work.lease is None:
            raise ValueError("a LeaseSession needs the lease the Authority granted")
        self.lease = self.work.lease

    # ------------------------------------------------------------ offline (MW-11.5-c..g)

    @property
    def grace_deadline_ms(self) -> int:
        """The lease's expiry plus the contract's ``offline_grace_ms``: how long active work
        may go on while the Authority is unreachable (MW-11.5-c)."""
        return self.lease.expires_at_ms + self.work.contract.timeouts.offline_grace_ms

    @property
    def offline(self) -> bool:
        """Whether the last attempt to reach the Authority failed."""
        return self.disconnected_at_ms is not None

    def buffer_offline(self, prepared: Prepared) -> Command:
        """Keep ``prepared`` — which could not be delivered — durably, bound to this lease
        with the bounded-offline binding and its usage delta (MW-11.5-f); it is reconciled
        before anything else is sent once the Authority answers.

        Raises:
            LeaseLost: the grace deadline has passed (the delta is given back).
        """
        now = self.clock()
        if now >= self.grace_deadline_ms:
            self.abandon(prepared)
            self.lost = self.lost or LeaseLost(
                "grace_expired", "the Authority stayed unreachable past the lease's grace period"
            )
            raise self.lost
        binding = OfflineBinding(
            agent_id=self.actor.agent_id,
            group_id=self.work.group_id,
            work_item_id=self.work.work_item_id,
            session_epoch=self.lease.session_epoch,
            ownership_epoch=self.lease.ownership_epoch,
            lease_id=self.lease.lease_id,
            disconnected_at_ms=min(self.disconnected_at_ms or now, now),
            buffered_at_ms=now,
            grace_deadline_ms=self.grace_deadline_ms,
            lease_expires_at_ms=self.lease.expires_at_ms,
            usage=prepared.delta or ResourceUsage(),
        )
        cmd = bind(self.actor, prepared.command, binding)
        if self.buffer is None:
            self.buffer = OfflineBuffer()
        self.buffer.add(cmd)
        return cmd

    async def reconcile(self) -> None:
        """Submit the buffered Commands — this lease's and any other's left in the shared
        buffer — rebased and re-signed, before anything else (MW-11.5-e/g); a refusal of one
        of this lease's that says the lease is gone sets :attr:`lost`.

        Raises:
            AuthorityUnavailable: the Authority is still unreachable.
        """
        if self.buffer is None or not len(self.buffer):  # any lease's: before anything else
            return
        try:
            verdicts = await reconcile(
                self.client, self.actor, self.buffer, self.clock, lease_id=self.lease.lease_id
            )
        except AuthorityUnavailable:
            self._disconnected()
            raise
        self.disconnected_at_ms = None
        self.reconciled += verdicts
        for v in verdicts:
            rej = v.rejection
            if rej is not None and rej.code in _RECONCILE_FENCED and self.lost is None:
                self.lost = LeaseLost(rej.code, rej.reason)

    def _disconnected(self) -> None:
        if self.disconnected_at_ms is None:
            self.disconnected_at_ms = self.clock()

    def confirmed_by_next_request(self) -> bool:
        """Whether a request the Authority itself fences (an Artifact's write grant, which it
        gives only under this agent's active, unexpired lease) may stand for :meth:`confirm`:
        nothing is known lost, the last request reached the Authority, no Command waits in the
        offline buffer, and the capability token is unexpired."""
        expiry = self.lease.capability_token.get("expires_at_ms")
        return (
            self.lost is None
            and not self.offline
            and (self.buffer is None or not len(self.buffer))
            and not (isinstance(expiry, int) and expiry <= self.clock())
        )

    async def confirm(self, *, poll_s: float = 0.5) -> None:
        """The mandatory fence before a high-risk, irreversible or externally visible action
        (MW-11.5-d): reconcile, then confirm the lease with the Authority (:meth:`check`);
        while the Authority is unreachable, wait for it until the grace deadline.

        Raises:
            LeaseLost: the lease is gone, or the Authority stayed unreachable until the grace
                deadline.
        """
        while True:
            try:
                await self.check()
                return
            except LeaseLost as exc:
                if (
                    exc.code != RejectionCode.AUTHORITY_UNREACHABLE
                    or self.clock() >= self.grace_deadline_ms
                ):
                    raise
            await asyncio.sleep(poll_s)

    def body(self, **extra: Any) -> dict[str, Any]:
        """A fenced body: ``work_item_id``, ``lease_id``, ``ownership_epoch`` of the current
        lease (:meth:`LeaseGrant.fenced`) and ``extra``."""
        return self.lease.fenced(**extra)

    def prepare(self, type: str, extra: dict[str, Any], *, charge: bool = True) -> Prepared:
        """Sign a fenced Command of ``type`` carrying the usage delta (when ``charge``).

        Send it with :meth:`send` — as many times as needed: the same signed Command is
        idempotent on the Authority — and :meth:`abandon` it if it is never delivered. Hold
        :attr:`charging` from here until the verdict when it charges while others may.

        Raises:
            CanonicalizationError: ``extra`` holds a float or a non-JSON value (the delta is
                given back).
        """
        delta = self.usage.take_delta() if charge else None
        body = self.body(**extra)
        if delta is not None and delta != ResourceUsage():
            body["usage"] = delta.model_dump()
        try:
            cmd = self.actor.command(type, self.work.group_id, body)
            cmd.signing_bytes()
        except Exception:
            if delta is not None:
                self.usage.give_back(delta)
            raise
        return Prepared(cmd, delta)

    def abandon(self, prepared: Prepared) -> None:
        """Give back the delta of a Command that was never delivered."""
        if prepared.delta is not None:
            self.usage.give_back(prepared.delta)

    async def send(self, prepared: Prepared) -> CommandVerdict:
        """Submit a prepared Command. A rejection gives its delta back; a fencing rejection (or
        a ``recorded`` late result) sets :attr:`lost`. Implements MW-11.5-e.

        Buffered Commands of this lease are reconciled first (MW-11.5-e).

        Raises:
            AuthorityUnavailable: the Authority could not be reached (sending again is safe).
        """
        await self.reconcile()
        try:
            result = await self.client.submit(prepared.command)
        except AuthorityUnavailable:
            self._disconnected()
            raise
        self.disconnected_at_ms = None
        verdict = command_verdict(result)
        self.last_verdict = verdict
        if prepared.delta is not None and not verdict.accepted:
            self.usage.give_back(prepared.delta)
        elif prepared.delta is not None and not result.duplicate:
            record_burn(prepared.delta)
        if is_fenced_out(verdict) and self.lost is None:
            rej = verdict.rejection
            self.lost = LeaseLost(
                rej.code if rej else verdict.status,
                rej.reason if rej else "recorded for audit only",
            )
        return verdict

    async def fenced(
        self, type: str, extra: dict[str, Any], *, charge: bool = True
    ) -> CommandVerdict:
        """:meth:`prepare` and :meth:`send` once (holding :attr:`charging` when it charges).

        Raises:
            AuthorityUnavailable: the Authority could not be reached (the delta is given back).
            CanonicalizationError: ``extra`` cannot be signed.
        """
        async with self.charging if charge else contextlib.nullcontext():
            prepared = self.prepare(type, extra, charge=charge)
            try:
                return await self.send(prepared)
            except AuthorityUnavailable:
                self.abandon(prepared)
                raise

    async def renew(self) -> CommandVerdict:
        """``lease.renew`` with the usage delta; on acceptance the lease's expiry and capability
        token are updated (MW-11.3-d).

        Raises:
            AuthorityUnavailable: the Authority could not be reached.
        """
        sent_with = self.lease.capability_token.get("token_id")
        verdict = await self.fenced(CommandType.LEASE_RENEW, {})
        if verdict.accepted:
            update: dict[str, Any] = {}
            if isinstance(verdict.reply.get("expires_at_ms"), int):
                update["expires_at_ms"] = verdict.reply["expires_at_ms"]
            # a token rotated while the renewal was in flight stays: the renewal's may be
            # one the rotation superseded
            rotated = self.lease.capability_token.get("token_id") != sent_with
            if isinstance(verdict.reply.get("capability_token"), dict) and not rotated:
                update["capability_token"] = verdict.reply["capability_token"]
            self.lease = self.lease.model_copy(update=update)
        return verdict

    async def check(self) -> None:
        """Confirm with the Authority that the lease is still valid and hold an unexpired
        capability token, before an external side effect (MW-11.5-d). Buffered progress is
        reconciled first (MW-11.5-e). A token that expired while the Authority was unreachable
        — the Authority credits its own downtime to the lease — is replaced by a renewal.

        Raises:
            LeaseLost: the lease was lost, is not valid on the Authority, is not this slot's,
                or cannot be confirmed because the Authority is unreachable.
        """
        if self.lost is not None:
            raise self.lost
        try:
            await self.reconcile()
            if self.lost is not None:
                raise self.lost
            row = await self.client.lease(self.lease.lease_id)
        except AuthorityUnavailable as exc:
            self._disconnected()
            raise LeaseLost(RejectionCode.AUTHORITY_UNREACHABLE, str(exc)) from exc
        self.disconnected_at_ms = None
        if (
            row is None
            or not row.get("valid")
            or row.get("agent_id") != self.actor.agent_id
            or row.get("ownership_epoch") != self.lease.ownership_epoch
        ):
            status = None if row is None else row.get("status")
            self.lost = LeaseLost("lease_invalid", f"the Authority says the lease is {status}")
            raise self.lost
        token_expiry = self.lease.capability_token.get("expires_at_ms")
        if isinstance(token_expiry, int) and token_expiry <= self.clock():
            try:
                verdict = await self.renew()
            except AuthorityUnavailable as exc:
                raise LeaseLost(RejectionCode.AUTHORITY_UNREACHABLE, str(exc)) from exc
            if not verdict.accepted:
                rej = verdict.rejection
                self.lost = self.lost or LeaseLost(
                    rej.code if rej else verdict.status, "the capability token has expired"
                )
                raise self.lost


#: Reconciliation refusals that mean the lease is no longer this slot's (MW-11.5-h).
_RECONCILE_FENCED = frozenset({"owner_changed", "lease_closed", "outside_grace_window"})

__all__ = ["LeaseSession", "Prepared", "UsageMeter"]
