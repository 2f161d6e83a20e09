"""Offers and execution, as a mixin of the Mission workflow (docs/design.md §4.3-6).

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

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities
    from ..outcome import error_line
    from ..protocol import EventType, RejectionCode, WorkItemState
    from ..protocol.temporal_contract import (
        CommandVerdict,
        EventSummary,
        ExecuteWorkItemInput,
        OfferSlot,
        OfferTerms,
        OutcomeKind,
        SelectCandidatesBatch,
        SelectCandidatesInput,
        SelectCandidatesResult,
        WorkItemEventsInput,
        WorkOutcome,
        agent_task_queue,
    )
    from ._edges import execute_work_item
    from ._state import ItemState, name_items

if TYPE_CHECKING:
    from ._state import MissionState

#: The longest wait between two rankings of a WorkItem nobody could take, milliseconds.
MAX_IDLE_BACKOFF_MS = 30_000
#: One try of a coordinator step: its local activity's attempts, retried in the Worker with
#: this backoff while the Authority is briefly unreachable — five attempts in about 3 s
#: (:func:`coordinator_activity`). A bound by count, not by ``schedule_to_close``: the SDK core
#: keeps retrying a local activity past its ``schedule_to_close`` (seen with temporalio 1.35).
STEP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                         maximum_interval=timedelta(seconds=2), maximum_attempts=5)  # fmt: skip
#: After a try that did not finish, a durable timer this long (doubling up to
#: :data:`MAX_STEP_PAUSE`) before the next: an outage of hours costs a few history events per
#: pause, not a local activity spinning in the Worker.
FIRST_STEP_PAUSE = timedelta(seconds=5)
MAX_STEP_PAUSE = timedelta(minutes=5)
#: ``execute_work_item`` is never retried by Temporal: a new attempt is a new offer.
_ONCE = RetryPolicy(maximum_attempts=1)

_In = TypeVar("_In")
_Out = TypeVar("_Out")


async def coordinator_activity(
    activity: Callable[[CoordinatorActivities, _In], Awaitable[_Out]],
    arg: _In,
    *,
    start_to_close: timedelta,
    summary: str,
    first_pause: timedelta = FIRST_STEP_PAUSE,
) -> _Out:
    """Run one of the coordinator's steps from the workflow as a *local* activity (issue 26):
    it runs in this Worker, in the workflow task that asked for it, and costs one marker in
    the history and no round trip through Temporal's task queues. Every step is idempotent
    (each Command carries the id the workflow fixed), so a try cut short by a crash runs again
    safely.

    A try is bounded: ``start_to_close`` per attempt, at most five attempts
    (:data:`STEP_RETRY`). A try that fails (the Authority unreachable for that long) is followed
    by a durable timer (``first_pause``, :data:`FIRST_STEP_PAUSE` by default, doubling to
    :data:`MAX_STEP_PAUSE`) and another try. ``summary`` is what the Temporal UI shows.

    Raises:
        FailureError: the step failed with a non-retryable ``ApplicationError`` (a bug or a
            refusal the workflow must see), or it was cancelled (``CancelledError``: the
            Mission is ending).
    """
    pause = first_pause
    while True:
        try:
            return await workflow.execute_local_activity_method(
                activity,
                arg,
                start_to_close_timeout=start_to_close,
                retry_policy=STEP_RETRY,
                summary=summary,
            )
        except FailureError as exc:
            # a local activity's failure arrives as itself (an ApplicationError, a
            # CancelledError), not wrapped in an ActivityError as a regular one's
            cause = exc.cause if isinstance(exc, ActivityError) else exc
            if isinstance(cause, CancelledError) or (
                isinstance(cause, ApplicationError) and cause.non_retryable
            ):
                raise
            workflow.logger.warning(
                "%s did not finish (%s); next try in %s", summary, cause or exc, pause
            )
        await workflow.sleep(pause)
        pause = min(pause * 2, MAX_STEP_PAUSE)


def _exec_key(work_item_id: str, agent_id: str) -> str:
    """The ``tasks`` key of an execution: a control character apart (no id may hold one), so
    that WorkItem ``x`` on agent ``y@z`` and ``x@y`` on ``z`` never share a key."""
    return f"exec\x1f{work_item_id}\x1f{agent_id}"


class WorkMixin:
    """The offer and execution part of :class:`~missionweave.workflows.MissionWorkflow`."""

    if TYPE_CHECKING:
        state: MissionState
        tasks: dict[str, asyncio.Task[None]]
        wake: bool
        changes: int
        attention: set[str]

        def _now(self) -> int: ...

        def _command_id(self) -> str: ...

        def _applied_intent(self, v: CommandVerdict, purpose: tuple[str, str]) -> None: ...

        def _apply(self, events: list[EventSummary]) -> None: ...

        async def _review(self, item: ItemState) -> None: ...

    async def _select_and_offer(self, wanted: list[tuple[str, list[str]]]) -> None:
        """Rank agents for the wanted WorkItems and offer each to its best-ranked (or, urgent,
        to a bounded candidate set; MW-10.3-b/c) in one local activity, ``select_candidates``;
        then one ``execute_work_item`` per candidate."""
        requests = self._offer_requests(wanted)
        try:
            ranked = await coordinator_activity(
                CoordinatorActivities.select_candidates,
                SelectCandidatesBatch(requests=requests),
                start_to_close=timedelta(seconds=30),
                summary=f"rank agents for and offer {name_items([w for w, _ in wanted])}",
            )
        except BaseException:
            self._offers_done(wanted)
            raise
        await self._offered(wanted, ranked.results)

    def _offer_requests(self, wanted: list[tuple[str, list[str]]]) -> list[SelectCandidatesInput]:
        """The ranking requests, each with the id, issue time and expiry of its offer; the
        items are marked as being offered until :meth:`_offers_done`."""
        policy = self.state.spec.offer_policy
        now = self._now()
        requests = []
        for wid, exclude in wanted:
            item = self.state.items[wid]
            item.selecting = item.offer_pending = True
            urgent = item.spec.contract.urgency.value == "urgent"
            requests.append(
                SelectCandidatesInput(
                    group_id=self.state.spec.group_id,
                    work_item_id=wid,
                    required_capabilities=item.spec.contract.required_capabilities,
                    exclude=sorted(set(exclude) | set(item.tried) | set(item.excluded)),
                    limit=policy.candidate_set_size if urgent else 1,
                    roles=["reviewer", "worker"] if item.review_of else ["worker"],
                    offer=OfferSlot(
                        command_id=self._command_id(),
                        issued_at_ms=now,
                        expires_at_ms=now + policy.offer_ttl_ms,
                    ),
                )
            )
        return requests

    def _offers_done(self, wanted: list[tuple[str, list[str]]]) -> None:
        for wid, _ in wanted:
            self.state.items[wid].selecting = False
            self.state.items[wid].offer_pending = False

    async def _offered(
        self,
        wanted: list[tuple[str, list[str]]],
        results: Sequence[SelectCandidatesResult | None],
    ) -> None:
        """Take the rankings and offers of ``wanted`` (``None``: not offered, planned again)
        and start one ``execute_work_item`` per candidate of each offer made."""
        self._offers_done(wanted)
        policy = self.state.spec.offer_policy
        now = self._now()
        for (wid, _), res in zip(wanted, results, strict=True):
            item = self.state.items[wid]
            if res is None:
                self.attention.add(wid)
                continue
            cands = [c.agent_id for c in res.candidates]
            if not cands and item.tried:  # everyone tried: start over after a pause
                item.tried = []
            if not cands or res.verdict is None:
                # doubling while nobody can take it: an unattended Mission's history grows
                # by a few events per try, not by thousands an hour
                wait = max(1000, policy.reoffer_backoff_ms) << min(item.empty_rankings, 5)
                item.empty_rankings += 1
                self.changes += 1  # the status says for how long: publish it again
                if item.no_agent_since_ms is None:
                    item.no_agent_since_ms = now
                item.retry_at_ms = now + min(wait, MAX_IDLE_BACKOFF_MS)
                item.detail = "no eligible agent" + (
                    f" ({res.nearest_miss})" if res.nearest_miss else ""
                )
                if res.saturated:  # offered again as soon as one of this Mission's runs ends
                    item.detail = "every capable agent is busy"
                    if wid not in self.state.awaiting_room:
                        self.state.awaiting_room.append(wid)
                continue
            self._applied_intent(res.verdict, ("offer", wid))
            rej = res.verdict.rejection
            if rej is not None and rej.code == RejectionCode.OWNER_ACTIVE:
                # an owner this workflow lost track of still holds it (its activity timed out
                # while it kept working with the Authority): read what the Authority holds —
                # a submission is then reviewed, a live lease waited for
                await self._sync(item)
                continue
            if (
                not res.verdict.accepted
                or item.state is not WorkItemState.OFFERED
                or item.w.offer_id is None
            ):
                continue  # refused otherwise: _on_intent set the retry time
            item.retry_at_ms = None
            item.empty_rankings = 0
            item.no_agent_since_ms = None
            cands = list(item.w.offer_candidates)  # the offer the Authority recorded counts
            item.tried = [*item.tried, *cands][-policy.max_sequential_offers * 4 :]
            item.detail = "offered to " + ", ".join(cands)
            terms = OfferTerms(
                offer_id=item.w.offer_id,
                revision=item.w.revision,
                expires_at_ms=item.w.offer_expires_at_ms or now,
            )
            for agent in cands:
                self._spawn(item, agent, terms)

    def _resume(self, item: ItemState) -> None:
        """Hand a queued WorkItem back to its owner (no offer: it owns it already)."""
        assert item.owner is not None
        item.detail = f"queued at {item.owner}"
        self._spawn(item, item.owner, None)

    def _spawn(self, item: ItemState, agent: str, offer: OfferTerms | None) -> None:
        item.running += 1
        self.tasks[_exec_key(item.work_item_id, agent)] = asyncio.create_task(
            self._execution(item, agent, offer)
        )

    async def _execution(self, item: ItemState, agent: str, offer: OfferTerms | None) -> None:
        """:meth:`_execute`, listed in ``tasks`` until it is over — the read of the Authority's
        log and the review that may follow the activity included: a continue-as-new waits for
        an empty ``tasks``, and one that cut a read short left its WorkItem ``syncing``, never
        offered again (seen with 10,000 WorkItems)."""
        key = _exec_key(item.work_item_id, agent)
        # asked now, not in ``finally``: a workflow evicted from the Worker's cache has its
        # coroutines closed after its loop is gone, where current_task() raises
        me = asyncio.current_task()
        try:
            await self._execute(item, agent, offer)
        finally:
            if self.tasks.get(key) is me:
                del self.tasks[key]

    async def _execute(self, item: ItemState, agent: str, offer: OfferTerms | None) -> None:
        """One ``execute_work_item`` on ``agent``'s task queue, and what its outcome means."""
        c = item.spec.contract
        wid = item.work_item_id
        doubt = False  # the outcome is unknown: read what the Authority holds
        until = offer.expires_at_ms if offer else item.start_deadline_ms
        wait_ms = max(1000, (until or self._now() + c.timeouts.start_deadline_ms) - self._now())
        try:
            outcome = await workflow.execute_activity(
                execute_work_item,
                ExecuteWorkItemInput(
                    group_id=self.state.spec.group_id,
                    mission_id=self.state.spec.mission_id,
                    work_item_id=wid,
                    contract=c,
                    input=item.spec.input,
                    offer=offer,
                    ownership_epoch=item.ownership_epoch,
                    dependency_artifacts={
                        d: self.state.items[d].artifacts
                        for d in item.spec.dependencies
                        if d in self.state.items and self.state.items[d].artifacts
                    },
                ),
                task_queue=agent_task_queue(agent, self.state.spec.group_id),
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
            item.running -= 1
            for w in self.state.awaiting_room:  # a slot is free: offer those waiting for one
                self.state.items[w].retry_at_ms = None
            self.state.awaiting_room.clear()
        self._apply(outcome.events)
        if any(e.type == EventType.WORK_OFFER_ACCEPTED for e in outcome.events):
            mine = _exec_key(wid, agent)
            for key, task in list(self.tasks.items()):  # the other candidates lost (10.3-c)
                if key.startswith(_exec_key(wid, "")) and key != mine:
                    task.cancel()
        if outcome.kind is not OutcomeKind.NOT_TAKEN or not item.detail.startswith("offered"):
            why = error_line(outcome.error)  # its traceback is the WorkItem's ``error``
            item.detail = f"{outcome.kind.value}" + (f": {why}" if why else "")
        if (
            doubt
            or outcome.kind is OutcomeKind.LEASE_LOST
            or (outcome.kind is OutcomeKind.NOT_TAKEN and not item.running)
        ):  # e.g. taken by an acceptance this workflow has not seen
            await self._sync(item)
        if item.state is WorkItemState.SUBMITTED and not item.running and not item.reviewing:
            await self._review(item)
        self.wake = True

    async def _sync(self, item: ItemState) -> None:
        """Read the WorkItem's Events since the last one applied and fold them in."""
        item.syncing = True
        try:
            events = await coordinator_activity(
                CoordinatorActivities.work_item_events,
                WorkItemEventsInput(
                    group_id=self.state.spec.group_id,
                    work_item_id=item.work_item_id,
                    after_sequence=item.w.seq,
                ),
                start_to_close=timedelta(seconds=30),
                summary=f"read {item.work_item_id} from the Authority",
            )
        finally:
            item.syncing = False
        self._apply(events)


__all__ = ["STEP_RETRY", "WorkMixin", "coordinator_activity"]
