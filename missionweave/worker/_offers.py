"""Answering offers: admission control, then the ``accept_offer`` / ``decline_offer`` Update.

An offer addressed to this agent arrives as a ``work.offered`` Event and waits in the Group's
inbox (MW-11.1-a). The :class:`OfferDesk` answers each one once: it skips offers that are
expired or no longer open in the projection (a replay after the state file was deleted meets
only those), runs :class:`AdmissionControl` (MW-10.3-d) and sends the signed answer to the
Mission workflow. A rejected verdict is normal — another candidate won (MW-10.3-c) — and only
logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..authority import now_ms
from ..protocol import Actor, Command
from ..protocol.mission import CommandVerdict
from ._admission import Accept, AdmissionControl, AdmissionRequest, Decline
from ._slots import SlotBoard, SlotKey
from ._state import LocalState, PendingOffer
from ._updates import UpdateSender

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OfferAnswer:
    """One answered offer: the decision and the workflow's verdict on it."""

    offer: PendingOffer
    decision: Accept | Decline
    verdict: CommandVerdict


class OfferDesk:
    """Answers pending offers, each in its own task (a slow update does not hold up others).

    Args:
        actor: the agent.
        state: the local projection and inbox.
        groups: the Groups followed.
        admission: the admission control.
        sender: the Update sender.
        board: the slot board (busy slots count against concurrency).
        clock: epoch-millisecond clock.

    Attributes:
        answers: the most recent answers (newest last), for inspection.
    """

    def __init__(
        self,
        actor: Actor,
        state: LocalState,
        groups: list[str],
        admission: AdmissionControl,
        sender: UpdateSender,
        board: SlotBoard,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.actor, self.state, self.groups = actor, state, groups
        self.admission, self.sender, self.board, self.clock = admission, sender, board, clock
        self.answers: deque[OfferAnswer] = deque(maxlen=256)
        self._inflight: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._accepting: dict[str, int] = {}

    async def run(self, wake: asyncio.Event) -> None:
        """Answer pending offers whenever ``wake`` is set, until cancelled."""
        try:
            while True:
                await wake.wait()
                wake.clear()
                for offer in self.state.pending_offers():
                    key = (offer.group_id, offer.seq)
                    if key not in self._inflight:
                        self._inflight[key] = asyncio.create_task(
                            self._answer(offer), name=f"offer {offer.offer_id}"
                        )
        finally:
            tasks = list(self._inflight.values())
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def request(self, offer: PendingOffer) -> AdmissionRequest | None:
        """The admission facts for ``offer``, or ``None`` when it is no longer answerable
        (expired, withdrawn, taken, or answered before)."""
        item = self.state.item(offer.group_id, offer.work_item_id)
        now = self.clock()
        if item is None or item.offer_id != offer.offer_id or now >= offer.expires_at_ms:
            return None
        queued = {
            g: len(self.state.owned(g, "queued")) + self._accepting.get(g, 0) for g in self.groups
        }
        return AdmissionRequest(
            group_id=offer.group_id,
            work_item_id=offer.work_item_id,
            contract=item.contract,
            roles=self.state.membership(offer.group_id).roles,
            queue_depth=queued.get(offer.group_id, 0),
            queued_total=sum(queued.values()),
            busy_slots=len(self.board.busy()),
            now_ms=now,
        )

    def _start_now(self, req: AdmissionRequest, key: SlotKey) -> Command | None:
        """The signed ``work.start`` to send with the acceptance when a slot is free now and
        no accepted WorkItem of any Group waits for one (the scheduler keeps its say over the
        queue, MW-11.1-c), the contract needs no execution approval, and the offered item's
        epoch is known; the slot is reserved for it. ``None`` otherwise."""
        item = self.state.item(req.group_id, req.work_item_id)
        if (
            item is None
            or req.contract is None
            or req.contract.approval_required
            or self.board.free() < 1
            or req.queued_total > 0
        ):
            return None
        self.board.reserve(key, hold_s=req.contract.timeouts.lease_ms / 1000)
        return self.actor.command("work.start", req.group_id, {
            "work_item_id": req.work_item_id, "ownership_epoch": item.ownership_epoch + 1,
        })  # fmt: skip

    async def _answer(self, offer: PendingOffer) -> None:
        g = offer.group_id
        try:
            req = self.request(offer)
            if req is None:
                log.debug("offer %s is no longer open; skipped", offer.offer_id)
                self.state.mark_handled(g, offer.seq)
                return
            decision = self.admission.decide(req)
            body: dict[str, object] = {
                "work_item_id": offer.work_item_id,
                "offer_id": offer.offer_id,
            }
            start: Command | None = None
            key = (g, offer.work_item_id)
            if isinstance(decision, Accept):
                body["revision"] = offer.revision
                update, type_ = "accept_offer", "work.accept_offer"
                start = self._start_now(req, key)
                if start is None:  # it will wait in the queue: counts against its capacity
                    self._accepting[g] = self._accepting.get(g, 0) + 1
            else:
                body["reason"] = str(decision.reason)
                body["detail"] = decision.detail
                update, type_ = "decline_offer", "work.decline_offer"
            started = False
            try:
                cmd = self.actor.command(type_, g, body)
                verdict = await self.sender.send(
                    offer.mission_id, update, cmd, deadline_ms=offer.expires_at_ms,
                    then_start=start,
                )  # fmt: skip
                started = verdict.start is not None and verdict.start.accepted
            finally:
                if isinstance(decision, Accept) and start is None:
                    self._accepting[g] -= 1
                if start is not None and not started:
                    self.board.release(key)  # the dispatcher starts it the usual way
            self.answers.append(OfferAnswer(offer, decision, verdict))
            if verdict.accepted:
                log.info("%s %s of %s", type_, offer.offer_id, offer.work_item_id)
            else:
                rej = verdict.rejection
                log.info(
                    "%s %s of %s not applied: %s",
                    type_,
                    offer.offer_id,
                    offer.work_item_id,
                    rej.code if rej else verdict.status,
                )
            self.state.mark_handled(g, offer.seq)
        except Exception:
            log.exception("answering offer %s failed", offer.offer_id)
            self.state.mark_handled(g, offer.seq)
        finally:  # a cancelled answer (shutdown) stays pending for the next run
            self._inflight.pop((g, offer.seq), None)


__all__ = ["OfferAnswer", "OfferDesk"]
