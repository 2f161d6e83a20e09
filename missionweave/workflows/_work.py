"""Offers and execution of the Mission workflow, :class:`Offers` (docs/design.md §4.3-6).

``select_candidates`` ranks agents and records the offer (MW-10.3-b/c/f). The offer *is* an
``execute_work_item`` activity on each candidate's task queue: its schedule-to-start timeout is
the offer's expiry and its heartbeat timeout the lease bound. Inside it the agent decides, and
accepts, starts and reports with the Authority itself; the activity returns the outcome with
the Authority's Events, which the workflow folds with the one reducer. A WorkItem the agent
already owns (queued again after a checkpoint, an unblock or a replaced session) is resumed the
same way, without an offer. When an activity's result is lost (the agent died, Temporal timed
it out), the workflow reads the WorkItem's Events from the Authority (``work_item_events``)
rather than guess: a submission the Authority holds is reviewed, never re-offered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    FailureError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..outcome import error_line
    from ..protocol import CURRENT_KEY_VERSION, EventType, RejectionCode, WorkItemState
    from ..protocol.temporal_contract import (
        CommandVerdict,
        ExecuteWorkItemInput,
        OfferSlot,
        OfferTerms,
        OutcomeKind,
        ProgressSignal,
        SelectCandidatesBatch,
        SelectCandidatesInput,
        SelectCandidatesResult,
        WorkItemEventsInput,
        WorkOutcome,
        agent_task_queue,
    )
    from ._board import Board
    from ._commands import Commands, OnVerdict
    from ._edges import execute_work_item
    from ._started import confirmed
    from ._state import ItemState, name_items
    from ._steps import coordinator_activity

#: ``execute_work_item`` is never retried by Temporal: a new attempt is a new offer.
_ONCE = RetryPolicy(maximum_attempts=1)

#: Offers made from here on begin their ownership epoch under ``mwk2_`` idempotency keys,
#: which fold in the Group (MW-16-f; docs/spec/READINGS.md). A history that made its offers
#: before this patch replays them with ``mwk1_``.
GROUP_KEYS_PATCH = "idempotency-keys-fold-in-the-group"


@dataclass(frozen=True)
class Execution:
    """In flight: one ``execute_work_item`` of a WorkItem on one agent (an offer's candidate,
    or the owner's resume), with the read of the Authority's log and the review that may
    follow it."""

    work_item_id: str
    agent_id: str


#: The work for WorkItems ranked: ``(work_item_id, agents to exclude)``.
Wanted = list[tuple[str, list[str]]]


class Offers:
    """Ranking, offers and executions of one Mission's WorkItems.

    ``review`` is what follows a submission (:meth:`~._review.Reviews.review`).
    """

    def __init__(
        self, board: Board, commands: Commands, review: Callable[[ItemState], Awaitable[None]]
    ) -> None:
        self._board = board
        self._commands = commands
        self._review = review

    async def select_and_offer(self, wanted: Wanted) -> None:
        """Rank agents for the wanted WorkItems and offer each to its best-ranked (or, urgent,
        to a bounded candidate set; MW-10.3-b/c) in one local activity, ``select_candidates``;
        then one ``execute_work_item`` per candidate."""
        requests = self.requests(wanted)
        try:
            ranked = await coordinator_activity(
                CoordinatorActivities.select_candidates,
                SelectCandidatesBatch(requests=requests),
                start_to_close=timedelta(seconds=30),
                items=len(requests),
                summary=f"rank agents for and offer {name_items([w for w, _ in wanted])}",
            )
        except BaseException:
            self.done(wanted)
            raise
        await self.offered(wanted, ranked.results)

    def requests(self, wanted: Wanted) -> list[SelectCandidatesInput]:
        """The ranking requests, each with the id, issue time and expiry of its offer; the
        items are marked as being offered (``offer_pending``) until :meth:`done`."""
        policy = self._board.state.spec.offer_policy
        now = self._board.now()
        requests = []
        for wid, exclude in wanted:
            item = self._board.state.items[wid]
            self._board.run(wid).offer_pending = True
            urgent = item.spec.contract.urgency.value == "urgent"
            requests.append(
                SelectCandidatesInput(
                    group_id=self._board.state.spec.group_id,
                    work_item_id=wid,
                    required_capabilities=item.spec.contract.required_capabilities,
                    exclude=sorted(set(exclude) | set(item.tried) | set(item.excluded)),
                    limit=policy.candidate_set_size if urgent else 1,
                    roles=["reviewer", "worker"] if item.review_of else ["worker"],
                    offer=OfferSlot(
                        command_id=self._commands.new_id(),
                        issued_at_ms=now,
                        expires_at_ms=now + policy.offer_ttl_ms,
                    ),
                )
            )
        return requests

    def done(self, wanted: Wanted) -> None:
        """The offers of ``wanted`` are made or given up: they may be planned again."""
        for wid, _ in wanted:
            self._board.run(wid).offer_pending = False

    async def offered(
        self,
        wanted: Wanted,
        results: Sequence[SelectCandidatesResult | None],
    ) -> None:
        """Take the rankings and offers of ``wanted`` (``None``: not offered, planned again)
        and start one ``execute_work_item`` per candidate of each offer made."""
        self.done(wanted)
        policy = self._board.state.spec.offer_policy
        now = self._board.now()
        for (wid, _), res in zip(wanted, results, strict=True):
            item, run = self._board.state.items[wid], self._board.run(wid)
            if res is None:
                self._board.attention.add(wid)
                continue
            cands = [c.agent_id for c in res.candidates]
            if not cands and item.tried:  # everyone tried: start over after a pause
                run.tried_everyone()
            if not cands or res.verdict is None:
                run.ranked_nobody(now, policy.reoffer_backoff_ms, res.nearest_miss, res.saturated)
                self._board.changes += 1  # the status says for how long: publish it again
                if res.saturated:  # offered again as soon as one of this Mission's runs ends
                    if wid not in self._board.state.awaiting_room:
                        self._board.state.awaiting_room.append(wid)
                continue
            self._commands.issued(res.verdict, self._offer_answered(wid))
            rej = res.verdict.rejection
            if rej is not None and rej.code == RejectionCode.OWNER_ACTIVE:
                # an owner this workflow lost track of still holds it (its activity timed out
                # while it kept working with the Authority): read what the Authority holds —
                # a submission is then reviewed, a live lease waited for
                await self.sync(item)
                continue
            if (
                not res.verdict.accepted
                or item.state is not WorkItemState.OFFERED
                or item.w.offer_id is None
            ):
                continue  # refused otherwise: _offer_answered set the retry time
            cands = list(item.w.offer_candidates)  # the offer the Authority recorded counts
            run.offer_made(cands, keep=policy.max_sequential_offers * 4)
            terms = OfferTerms(
                offer_id=item.w.offer_id,
                revision=item.w.revision,
                expires_at_ms=item.w.offer_expires_at_ms or now,
            )
            for agent in cands:
                self._spawn(item, agent, terms)

    async def confirm_start(self, item: ItemState, sig: ProgressSignal) -> None:
        """Read ``item``'s Events from the Authority after an agent said it started, and show
        its progress if the Authority names it the active owner (:mod:`._started`)."""
        try:
            await self.sync(item)
        except FailureError:  # cancelled as the Mission ends: the claim stays unconfirmed
            return
        else:
            if confirmed(item, sig) and item.last_progress is None:
                self._board.run(item.work_item_id).progress(sig.report)
        finally:
            # the plan skipped the item while it was being read: look at it again
            self._board.attention.add(item.work_item_id)
            self._board.wake = True

    def _offer_answered(self, wid: str) -> OnVerdict:
        """What an offer's verdict means for ``wid``: a refused one is tried again later."""

        def answered(v: CommandVerdict) -> None:
            if wid not in self._board.state.items:
                return
            run = self._board.run(wid)
            if not v.accepted:  # e.g. owner_active: the lease has not expired yet
                backoff = self._board.state.spec.offer_policy.reoffer_backoff_ms
                code = v.rejection.code if v.rejection else "?"
                run.offer_refused(self._board.now() + max(1000, backoff), code)
            else:
                run.offer_pending = False

        return answered

    def resume(self, item: ItemState) -> None:
        """Hand a queued WorkItem back to its owner (no offer: it owns it already)."""
        assert item.owner is not None
        self._board.run(item.work_item_id).resumed()
        self._spawn(item, item.owner, None)

    def _spawn(self, item: ItemState, agent: str, offer: OfferTerms | None) -> None:
        """One :class:`Execution` of ``item`` on ``agent``, listed until it is over — the read
        of the Authority's log and the review that may follow the activity included: a
        continue-as-new waits for nothing in flight, and one that cut a read short left its
        WorkItem ``syncing``, never offered again (seen with 10,000 WorkItems)."""
        self._board.run(item.work_item_id).running += 1
        self._board.spawn(
            Execution(item.work_item_id, agent), lambda: self._execute(item, agent, offer)
        )

    async def _execute(self, item: ItemState, agent: str, offer: OfferTerms | None) -> None:
        """One ``execute_work_item`` on ``agent``'s task queue, and what its outcome means."""
        run = self._board.run(item.work_item_id)
        c = item.spec.contract
        wid = item.work_item_id
        doubt = False  # the outcome is unknown: read what the Authority holds
        until = offer.expires_at_ms if offer else item.start_deadline_ms
        now = self._board.now()
        wait_ms = max(1000, (until or now + c.timeouts.start_deadline_ms) - now)
        try:
            outcome = await workflow.execute_activity(
                execute_work_item,
                ExecuteWorkItemInput(
                    group_id=self._board.state.spec.group_id,
                    mission_id=self._board.state.spec.mission_id,
                    work_item_id=wid,
                    contract=c,
                    input=item.spec.input,
                    offer=offer,
                    ownership_epoch=item.ownership_epoch,
                    key_version=self._key_version(item, offer),
                    dependency_artifacts={
                        d: self._board.state.items[d].artifacts
                        for d in item.spec.dependencies
                        if d in self._board.state.items and self._board.state.items[d].artifacts
                    },
                ),
                task_queue=agent_task_queue(agent, self._board.state.spec.group_id),
                schedule_to_start_timeout=timedelta(milliseconds=wait_ms),
                heartbeat_timeout=timedelta(milliseconds=c.timeouts.lease_ms),
                start_to_close_timeout=timedelta(
                    milliseconds=(c.budget.wall_clock_ms or 24 * 3_600_000)
                    + c.timeouts.start_deadline_ms
                ),
                retry_policy=_ONCE,
                summary=(f"offer {wid} to {agent}" if offer else f"resume {wid} at {agent}"),
            )
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, TimeoutError) and cause.type is TimeoutType.SCHEDULE_TO_START:
                # nobody picked it up in time: the offer expired (the Authority refuses late
                # acceptances) or the owner stayed away past its start deadline; what the
                # Authority holds decides what comes next
                outcome = WorkOutcome(kind=OutcomeKind.NOT_TAKEN, error=f"{agent}: not picked up")
                doubt = True
            elif isinstance(cause, CancelledError):
                outcome = WorkOutcome(kind=OutcomeKind.NOT_TAKEN, error="cancelled")
            else:  # heartbeat timeout, a crashed agent: the result is lost (MW-11.5-a)
                outcome = WorkOutcome(kind=OutcomeKind.LEASE_LOST, error=str(cause or exc))
                doubt = True
        finally:
            run.running -= 1
            for w in self._board.state.awaiting_room:  # a slot is free: offer those waiting for one
                self._board.run(w).retry_at(None)
            self._board.state.awaiting_room.clear()
        self._board.apply(outcome.events)
        if any(e.type == EventType.WORK_OFFER_ACCEPTED for e in outcome.events):
            for key, task in list(self._board.tasks.items()):  # the others lost (10.3-c)
                if isinstance(key, Execution) and key.work_item_id == wid and key.agent_id != agent:
                    task.cancel()
        run.ended(outcome.kind, error_line(outcome.error))  # its traceback is the ``error``
        if (
            doubt
            or outcome.kind is OutcomeKind.LEASE_LOST
            or (outcome.kind is OutcomeKind.NOT_TAKEN and not run.running)
        ):  # e.g. taken by an acceptance this workflow has not seen
            await self.sync(item)
        if item.state is WorkItemState.SUBMITTED and not run.running and not run.reviewing:
            await self._review(item)
        self._board.wake = True

    @staticmethod
    def _key_version(item: ItemState, offer: OfferTerms | None) -> int:
        """The idempotency key version of an execution (MW-16-f): an offer begins a new
        ownership epoch under the current version (once this workflow is patched, else 1); a
        resume keeps the version its epoch began with, as the Authority's
        ``work.offer_accepted`` recorded it."""
        if offer is None:
            return item.w.key_version
        return CURRENT_KEY_VERSION if workflow.patched(GROUP_KEYS_PATCH) else 1

    async def sync(self, item: ItemState) -> None:
        """Read the WorkItem's Events since the last one applied and fold them in."""
        run = self._board.run(item.work_item_id)
        run.syncing = True
        try:
            events = await coordinator_activity(
                CoordinatorActivities.work_item_events,
                WorkItemEventsInput(
                    group_id=self._board.state.spec.group_id,
                    work_item_id=item.work_item_id,
                    after_sequence=item.w.seq,
                ),
                start_to_close=timedelta(seconds=30),
                summary=f"read {item.work_item_id} from the Authority",
                # a read of the log onward from the WorkItem's last Event, of any length, and
                # the path of doubt (a lost result, a start claimed): a regular activity, so
                # that hundreds of them at once never hold the workflow task open (a Mission
                # of 10,000 WorkItems had 5-8 s workflow tasks while they ran locally)
                local=False,
            )
        finally:
            run.syncing = False
        self._board.apply(events)


__all__ = ["GROUP_KEYS_PATCH", "Execution", "Offers", "Wanted"]
