"""The first part of ``execute_work_item``: answer the offer, wait for a slot, start.

The activity *is* the offer (docs/design.md §4.3-5). :class:`OfferTaker` runs admission
control (MW-10.3-d/e) and sends the agent's own signed ``work.decline_offer`` or
``work.accept_offer`` straight to the Authority; the first acceptance wins (MW-10.3-c). With a
free slot and nobody waiting, the acceptance and the ``work.start`` travel in one request;
otherwise the accepted item waits in the agent's start queue, heartbeating, until the
scheduler gives it a slot, and then starts (MW-11.3-b). While it waits, the agent renews the
queued ownership lease its acceptance was granted (``lease.renew`` every ``heartbeat_ms``,
fenced by lease id and ownership epoch, MW-11.3-a): a hold the agent stops renewing lapses
after one ``lease_ms``, before the start deadline. Every Command is retried, the same
signed Command each time (idempotent), while the Authority is briefly unreachable, and goes
only after the offline buffer has been reconciled (MW-11.5-e): progress an execution buffered
before it ended cut off reaches the Authority before this agent takes anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from ..authority.client import AuthorityClient, AuthorityUnavailable
from ..authority.wire import now_ms
from ..protocol import Actor, Command, CommandType, Rejection, RejectionCode
from ..protocol.temporal_contract import (
    CommandVerdict,
    EventSummary,
    ExecuteWorkItemInput,
    LeaseGrant,
    OutcomeKind,
    WorkOutcome,
)
from ._admission import Accept, AdmissionControl, AdmissionRequest, Decline
from ._context import heartbeat
from ._dispatch import Dispatcher, NoSlot
from ._gates import demand
from ._metrics import record_decline
from ._offline import OfflineBuffer, reconcile
from ._retry import Backoff, authority_away, retrying
from ._scheduler import QueuedItem
from ._slots import SlotBoard
from ._state import LocalState

log = logging.getLogger(__name__)

#: Seconds between heartbeats while an accepted item waits for a slot.
WAIT_HEARTBEAT_S = 1.0
#: Longest pause, seconds, between two tries of a Command while the Authority is unreachable:
#: an Authority that answers again credits its outage and a short grace to the lease a
#: ``work.start`` may have obtained; its answer must come within that grace.
RETRY_CAP_S = 0.5


def temporal_timed_out() -> bool:
    """Whether Temporal gave up on this activity by itself — its heartbeat timeout passed (the
    SDK also times an attempt out locally when it cannot heartbeat), or the server no longer
    knows the attempt — rather than someone asking to cancel it (the workflow, a shutdown): a
    liveness hint, not a verdict on the lease (docs/design.md §4, "One judge for a lease")."""
    if not activity.in_activity():
        return False
    details = activity.cancellation_details()
    return (
        details is not None
        and (details.timed_out or details.not_found)
        and not (details.cancel_requested or details.worker_shutdown)
    )


@dataclass
class Taken:
    """What taking the WorkItem gave: the work with its lease and the Authority's Events so far
    (acceptance, start), or — not started — the outcome to return instead (declined, not
    taken), which carries its Events itself."""

    work: ExecuteWorkItemInput | None
    outcome: WorkOutcome | None
    events: list[EventSummary] = field(default_factory=list)


def _lease(verdict: CommandVerdict) -> LeaseGrant:
    return LeaseGrant.model_validate(
        {**verdict.reply["lease"], "capability_token": verdict.reply.get("capability_token", {})}
    )


class OfferTaker:
    """Answers the offer an activity carries and starts the WorkItem under a lease.

    Args:
        actor: the agent.
        client: the Authority client.
        admission: admission control.
        state: the local projection (roles per Group).
        board: the slot board.
        dispatcher: the start queue.
        groups: the Groups followed.
        clock: epoch-millisecond clock.
        offline_buffer: the runtime's offline buffer, reconciled before every Command.
    """

    def __init__(
        self,
        actor: Actor,
        client: AuthorityClient,
        admission: AdmissionControl,
        state: LocalState,
        board: SlotBoard,
        dispatcher: Dispatcher,
        groups: list[str],
        clock: Callable[[], int] = now_ms,
        offline_buffer: OfflineBuffer | None = None,
    ) -> None:
        self.actor, self.client, self.admission, self.state = actor, client, admission, state
        self.board, self.dispatcher, self.groups, self.clock = board, dispatcher, groups, clock
        self.offline_buffer = offline_buffer

    async def take(self, work: ExecuteWorkItemInput) -> Taken:
        """Answer ``work.offer`` (if any) and start: the work with its lease, or the outcome.

        Raises:
            asyncio.CancelledError: Temporal cancelled the activity (no slot stays reserved).
        """
        beats = asyncio.create_task(self._heartbeats(work))
        try:
            return await self._take(work)
        finally:
            beats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beats

    async def _heartbeats(self, work: ExecuteWorkItemInput) -> None:
        while True:
            heartbeat({"work_item_id": work.work_item_id, "waiting": True})
            await asyncio.sleep(WAIT_HEARTBEAT_S)

    async def _take(self, work: ExecuteWorkItemInput) -> Taken:
        g, wid, key = work.group_id, work.work_item_id, (work.group_id, work.work_item_id)
        events: list[EventSummary] = []
        epoch = work.ownership_epoch
        hold: dict[str, Any] | None = None
        offer = work.offer
        if offer is not None:
            decision = self.admission.decide(self._request(work))
            if isinstance(decision, Decline):
                verdict = await self._send(
                    self.actor.command(
                        CommandType.WORK_DECLINE_OFFER,
                        g,
                        {
                            "work_item_id": wid,
                            "offer_id": offer.offer_id,
                            "reason": str(decision.reason),
                            "detail": decision.detail,
                        },
                    ),
                    offer.expires_at_ms,
                )
                log.info("declined %s: %s", wid, decision.reason)
                record_decline(str(decision.reason))
                return self._done(OutcomeKind.DECLINED, verdict, events, str(decision.reason))
            assert isinstance(decision, Accept)
            accept = self.actor.command(
                CommandType.WORK_ACCEPT_OFFER,
                g,
                {
                    "work_item_id": wid,
                    "offer_id": offer.offer_id,
                    "revision": offer.revision,
                    # the epoch this acceptance begins keeps this key version (MW-16-f)
                    **({"key_version": work.key_version} if work.key_version > 1 else {}),
                },
            )
            start_now = (
                not work.contract.approval_required
                and self.board.free() > 0
                and self.dispatcher.depth() == 0
                and key not in self.board.busy()
            )
            cmds = [accept]
            if start_now:  # one request for both (MW-11.3-b)
                self.board.reserve(key, hold_s=work.contract.timeouts.lease_ms / 1000)
                cmds.append(self._start_command(work, epoch + 1))
            until = offer.expires_at_ms
            if start_now:
                # the start may be granted though its answer is lost (the Authority went down
                # right after it): a granted lease is run, not left to lapse, so the same
                # signed Commands (idempotent) are tried until the start deadline, not only
                # until the offer expires
                until = max(until, self.clock() + work.contract.timeouts.start_deadline_ms)
            verdicts = await self._send_starting(cmds, until)
            started = verdicts[1] if len(verdicts) > 1 and verdicts[1].accepted else None
            if not verdicts[0].accepted and started is None:
                self.board.release(key)
                return self._done(OutcomeKind.NOT_TAKEN, verdicts[0], events, "offer not open")
            if verdicts[0].accepted:  # (else it was this agent's already: the start says so)
                events += verdicts[0].events
                epoch = int(verdicts[0].reply.get("ownership_epoch", epoch + 1))
                hold = verdicts[0].reply.get("hold")
                log.info("accepted %s (epoch %s)", wid, epoch)
            if started is not None:
                events += started.events
                return self._started(
                    work, started, int(started.reply["lease"]["ownership_epoch"]), events
                )
            if len(verdicts) > 1:
                self.board.release(key)
        if hold is None:
            return await self._wait_and_start(work, epoch, events)
        renewing = asyncio.create_task(self._renew_hold(work, hold))
        try:
            return await self._wait_and_start(work, epoch, events)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _renew_hold(self, work: ExecuteWorkItemInput, hold: dict[str, Any]) -> None:
        """Renew the queued ownership lease every ``heartbeat_ms`` until cancelled (the item
        starts, or the wait ends); a refusal ends the renewals — the start will be refused
        too. Implements MW-11.3-a."""
        every_ms = work.contract.timeouts.heartbeat_ms
        body = {
            "work_item_id": work.work_item_id,
            "lease_id": hold["lease_id"],
            "ownership_epoch": hold["ownership_epoch"],
        }
        while True:
            await asyncio.sleep(every_ms / 1000)
            cmd = self.actor.command(CommandType.LEASE_RENEW, work.group_id, body)
            verdict = await self._send(cmd, self.clock() + every_ms)
            rej = verdict.rejection
            if not verdict.accepted and (
                rej is None or rej.code != RejectionCode.AUTHORITY_UNREACHABLE
            ):
                log.warning(
                    "queued ownership of %s not renewed: %s",
                    work.work_item_id,
                    rej.code if rej else verdict.status,
                )
                return

    async def _wait_and_start(
        self, work: ExecuteWorkItemInput, epoch: int, events: list[EventSummary]
    ) -> Taken:
        g, wid, key = work.group_id, work.work_item_id, (work.group_id, work.work_item_id)
        view = self.state.item(g, wid)
        deadline = view.start_deadline_ms if view is not None else None
        queued_at = (view.queued_at_ms if view is not None else None) or self.clock()
        c = work.contract
        est, declared = self.admission.estimate(c)
        item = QueuedItem(
            g,
            wid,
            work.mission_id,
            epoch,
            deadline,
            queued_at,
            c.timeouts.lease_ms,
            risk_class=str(c.risk_class),
            resources=demand(c.resource_constraints),
            estimate_ms=est,
        )
        while True:
            try:
                await self.dispatcher.wait_for_slot(
                    item, needs_approval=c.approval_required, declared=declared
                )
            except NoSlot as exc:  # it stays queued at the Authority; the workflow decides
                return self._done(OutcomeKind.NOT_TAKEN, None, events, f"no slot: {exc}")
            (verdict,) = await self._send_starting([self._start_command(work, epoch)], deadline)
            if verdict.accepted:
                events += verdict.events
                return self._started(work, verdict, epoch, events)
            self.board.release(key)
            code = verdict.rejection.code if verdict.rejection else verdict.status
            if code != RejectionCode.APPROVAL_REQUIRED:
                log.info("start of %s refused: %s", wid, code)
                return self._done(OutcomeKind.NOT_TAKEN, verdict, events, f"start refused: {code}")

    def _started(
        self,
        work: ExecuteWorkItemInput,
        verdict: CommandVerdict,
        epoch: int,
        events: list[EventSummary],
    ) -> Taken:
        lease = _lease(verdict)
        log.info("started %s (lease %s)", work.work_item_id, lease.lease_id)
        started = work.model_copy(
            update={
                "lease": lease,
                "ownership_epoch": epoch,
                "checkpoint": verdict.reply.get("checkpoint") or work.checkpoint,
            }
        )
        return Taken(started, None, events)

    def _start_command(self, work: ExecuteWorkItemInput, epoch: int) -> Command:
        body = {"work_item_id": work.work_item_id, "ownership_epoch": epoch}
        return self.actor.command(CommandType.WORK_START, work.group_id, body)

    def _request(self, work: ExecuteWorkItemInput) -> AdmissionRequest:
        g = work.group_id
        return AdmissionRequest(
            group_id=g,
            work_item_id=work.work_item_id,
            contract=work.contract,
            roles=self.state.membership(g).roles,
            queue_depth=self.dispatcher.depth(g),
            queued_total=self.dispatcher.depth(),
            busy_slots=len(self.board.busy()),
            now_ms=self.clock(),
        )

    @staticmethod
    def _done(
        kind: OutcomeKind, verdict: CommandVerdict | None, events: list[EventSummary], error: str
    ) -> Taken:
        if verdict is not None and verdict.accepted:
            events = [*events, *verdict.events]
        return Taken(None, WorkOutcome(kind=kind, verdict=verdict, events=events, error=error))

    async def _send(self, cmd: Command, until_ms: int | None) -> CommandVerdict:
        return (await self._send_many([cmd], until_ms))[0]

    async def _send_starting(
        self, cmds: list[Command], until_ms: int | None
    ) -> list[CommandVerdict]:
        """:meth:`_send_many` for Commands that end with a ``work.start``, carried on past a
        Temporal timeout: the Authority may have granted the lease already (its answer lost
        to an outage), and a lease granted is this agent's to run whatever Temporal thinks —
        left alone it would lapse and the WorkItem run again elsewhere. A cancellation someone
        asked for still stops it."""
        sending = asyncio.ensure_future(self._send_many(cmds, until_ms))
        while True:
            try:
                return await asyncio.shield(sending)
            except asyncio.CancelledError:
                if not temporal_timed_out():
                    sending.cancel()
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()  # handled: later timeouts of this task work as usual
                wid = cmds[-1].body.get("work_item_id") if cmds[-1].body else None
                log.warning("%s: Temporal timed the activity out; its start goes on", wid)

    async def _send_many(self, cmds: list[Command], until_ms: int | None) -> list[CommandVerdict]:
        """Submit, retrying the same signed Commands while the Authority is unreachable, up to
        ``until_ms`` (then the Commands count as refused: ``authority_unreachable``). The
        offline buffer is reconciled first (MW-11.5-e)."""
        buffer = self.offline_buffer

        async def once() -> list[CommandVerdict]:
            if buffer is not None and len(buffer):
                await reconcile(self.client, self.actor, buffer, self.clock)
            return [r.verdict() for r in await self.client.submit_many(cmds)]

        def seconds_left() -> float:
            return math.inf if until_ms is None else (until_ms - self.clock()) / 1000

        try:
            return await retrying(
                once,
                when=authority_away,
                backoff=Backoff(cap_s=RETRY_CAP_S),
                seconds_left=seconds_left,
            )
        except AuthorityUnavailable as exc:
            log.warning("%s not delivered: %s", cmds[0].type, exc)
            return [_unreachable(c, str(exc)) for c in cmds]


def _unreachable(cmd: Command, reason: str) -> CommandVerdict:
    rejection = Rejection(code=RejectionCode.AUTHORITY_UNREACHABLE, reason=reason)
    return CommandVerdict(command_id=cmd.command_id, status="rejected", rejection=rejection)


__all__ = ["OfferTaker", "Taken"]
