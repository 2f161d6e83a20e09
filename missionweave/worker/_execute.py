"""The ``execute_work_item`` activity: the offer to this agent, then the user's handler under its
lease (docs/design.md §4.3-6).

Without a lease in its input, the activity first takes the WorkItem (:mod:`._take`): admission
control, the agent's own acceptance or decline, a slot from the start queue, ``work.start``.

While the handler runs, a heartbeat loop sends a Temporal heartbeat and a signed ``lease.renew``
with the slot's usage delta every ``heartbeat_ms``; a rejected renewal cancels the handler
(``LEASE_LOST``, nothing submitted). When the handler ends, the agent itself reports the outcome
to the Authority as its own signed Command and returns it with the Authority's verdict:

=================================  ==================  ===========
handler                            Command             outcome
=================================  ==================  ===========
returns ``Submission``             ``work.submit``     SUBMITTED
``Pause(state)``                   ``work.checkpoint``  PAUSED
``Blocked(resolution, state)``     ``work.block``      BLOCKED
raises (``PermanentFailure``:       ``work.fail``       FAILED
not retryable)
lease lost (renewal, ``guard``)    —                   LEASE_LOST
still running when the agent's     ``work.fail``       FAILED
Worker shuts down (no pause)       (retryable)
=================================  ==================  ===========

A ``recorded`` verdict means this agent is a former owner: the result is kept for audit and
cannot complete the WorkItem (MW-11.5-b); the outcome is LEASE_LOST with that verdict. Temporal
drops a late completion silently, so recording it with the Authority is what leaves the trail.
Protocol outcomes are returned, never raised (Temporal retries are off for this activity).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import activity

from ..artifacts import ArtifactStoreError
from ..authority.client import AuthorityClient, AuthorityUnavailable
from ..authority.wire import now_ms
from ..protocol import (
    Actor,
    Budget,
    CanonicalizationError,
    CommandType,
    Evidence,
    ProgressReport,
    RejectionCode,
)
from ..protocol.temporal_contract import (
    EXECUTE_WORK_ITEM,
    CommandVerdict,
    EventSummary,
    ExecuteWorkItemInput,
    OutcomeKind,
    WorkOutcome,
)
from ._context import WorkContext, heartbeat
from ._errors import Blocked, LeaseLost, Pause, PermanentFailure
from ._failure import describe_failure, redact_paths
from ._handlers import HandlerRegistry, Submission
from ._input import InputUnavailable, resolve_input
from ._lease import LeaseSession
from ._metrics import record_handler
from ._offline import OfflineBuffer
from ._retry import Backoff, authority_away, retrying
from ._slots import SlotBoard
from ._take import OfferTaker, temporal_timed_out

log = logging.getLogger(__name__)

#: Seconds a handler gets to finish once Temporal cancelled its activity (see ``_Run.execute``).
LATE_RESULT_GRACE_S = 1.0

#: ``async (work, report)``: where progress reports go besides the Authority (the workflow).
ProgressSink = Callable[[ExecuteWorkItemInput, ProgressReport], Awaitable[None]]
#: The phase of the progress sent to the Mission (not the Authority) once the handler has run
#: for :data:`STARTED_SIGNAL_AFTER_S`: the workflow then reads the start from the Authority's
#: log (the status shows ``active``).
STARTED_PHASE = "started"
#: Seconds a handler runs before the Mission is told it started. A handler done sooner is never
#: announced: its outcome tells the workflow within that time anyway, and a Mission of quick
#: WorkItems is spared a signal, a workflow task and a read of the log per WorkItem (issue 26).
STARTED_SIGNAL_AFTER_S = 0.5


def _worker_shutdown() -> bool:
    """Whether this activity's Worker is shutting down (the agent is stopping)."""
    return activity.in_activity() and activity.is_worker_shutdown()


def _budget_reason(verdict: CommandVerdict, budget: Budget) -> str:
    """``budget exceeded: wall_clock_ms 3600412 of 3600000 ms (budget.wall_clock_ms)``: each
    dimension over, with its usage and limit, from the Authority's ``budget_exceeded``."""
    rej = verdict.rejection
    detail = rej.detail if rej is not None else {}
    usage, parts = detail.get("usage") or {}, []
    for dim in detail.get("dimensions") or []:
        if dim == "money":
            used, limit = usage.get("money_minor_units"), budget.money
            cap = f"{limit.amount_minor_units} {limit.currency} minor units" if limit else "?"
            parts.append(f"money {used} of {cap} (budget.money)")
        else:
            unit = " ms" if dim.endswith("_ms") else ""
            limit_text = f"{getattr(budget, dim, '?')}{unit}"
            parts.append(f"{dim} {usage.get(dim)} of {limit_text} (budget.{dim})")
    return "budget exceeded: " + ("; ".join(parts) or "?")


@dataclass(slots=True, eq=False)
class WorkItemExecutor:
    """Holds what the ``execute_work_item`` activity needs; register
    :meth:`execute_work_item` with a Temporal ``Worker`` on the agent's task queue.

    Args:
        actor: the agent (its key and current epochs sign every report).
        client: the Authority client.
        registry: the handlers.
        board: this process's slot board (the scheduler's view of running work).
        progress_sink: also send each progress report here (the Mission workflow's
            ``report_progress`` signal); failures are logged, never fatal.
        report_timeout: how long to keep retrying the final report while the Authority is
            unreachable (the same signed Command each time, so it is idempotent).
        clock: epoch-millisecond clock (lease and token expiry, Evidence timestamps).
        agent_card_version: the agent's Agent Card version, recorded in manifests.
        taker: answers the offer an activity carries and obtains the lease
            (:class:`~missionweave.worker._take.OfferTaker`); ``None``: every input must carry
            its lease already.
        offline_buffer: where progress made while the Authority is unreachable is kept
            durably until reconciled (MW-11.5-c); ``None``: in memory, per execution.

    Attributes:
        interrupted: ids of the WorkItems whose handler was still running, not paused, when
            this agent's Worker shut down, and which were reported failed (retryable) to the
            Authority — it accepted — so each is offered again at once.
    """

    actor: Actor
    client: AuthorityClient
    registry: HandlerRegistry
    _: KW_ONLY
    board: SlotBoard | None = None
    progress_sink: ProgressSink | None = None
    report_timeout: timedelta = timedelta(seconds=30)
    clock: Callable[[], int] = now_ms
    agent_card_version: int = 0
    taker: OfferTaker | None = None
    offline_buffer: OfflineBuffer | None = None
    #: WorkItems whose handler did not pause when the agent stopped: reported failed
    #: (retryable) to the Authority, in the order they were interrupted.
    interrupted: list[str] = field(default_factory=list, init=False)

    @activity.defn(name=EXECUTE_WORK_ITEM)
    async def execute_work_item(self, work: ExecuteWorkItemInput) -> WorkOutcome:
        """Answer the offer ``work`` carries (or resume a WorkItem this agent owns), wait for
        a slot, start under a lease, run the handler and report its outcome to the Authority.

        Returns:
            The outcome with the Authority's verdict on the agent's final Command and every
            Event its Commands produced (``WorkOutcome.events``).

        Raises:
            asyncio.CancelledError: Temporal cancelled the activity (the handler is cancelled
                first). Not when the agent's Worker is shutting down: a handler that did not
                pause by then is cancelled and the execution reported failed, retryable
                (returned, and listed in :attr:`interrupted`).

        Implements MW-11.3-b/c/e, MW-11.4-a/c/f, MW-11.5-b/d and MW-11.1-e (one context,
        lease session, meters and keys per slot).
        """
        events: list[EventSummary] = []
        if work.lease is None:
            if self.taker is None:
                raise ValueError("execute_work_item without a lease needs an OfferTaker")
            taken = await self.taker.take(work)
            if taken.outcome is not None or taken.work is None:
                assert taken.outcome is not None
                return taken.outcome
            work, events = taken.work, taken.events
        outcome = await self._run(work)
        final = outcome.verdict
        if final is not None and final.status != "rejected":
            events += final.events
        return outcome.model_copy(update={"events": events})

    async def _run(self, work: ExecuteWorkItemInput) -> WorkOutcome:
        session = LeaseSession(self.actor, self.client, work, self.clock, self.offline_buffer)
        sink = self.progress_sink
        hook = None if sink is None else (lambda report: sink(work, report))
        ctx = WorkContext(
            work,
            session,
            on_progress=hook,
            agent_card_version=self.agent_card_version,
        )
        key = (work.group_id, work.work_item_id)
        if self.board is not None:
            self.board.begin(key, ctx)
        began, outcome = time.monotonic(), None
        try:
            outcome = await _Run(self, work, session, ctx).execute()
        finally:
            if self.board is not None:
                self.board.end(key)
            record_handler(outcome.kind.value if outcome else "cancelled", time.monotonic() - began)
        if session.buffer is not None and session.buffer.pending(session.lease.lease_id):
            # progress still buffered (the execution ended without reaching the Authority):
            # one more try now; otherwise the runtime reconciles it at its next start
            with contextlib.suppress(AuthorityUnavailable):
                await session.reconcile()
        return outcome


@dataclass(slots=True, eq=False)
class _Run:
    """One execution: the handler task, its heartbeat loop and the final report."""

    ex: WorkItemExecutor
    work: ExecuteWorkItemInput
    session: LeaseSession
    ctx: WorkContext
    budget_verdict: CommandVerdict | None = field(default=None, init=False)

    def _interval_s(self) -> float:
        t = self.work.contract.timeouts
        ms = min(t.heartbeat_ms, max(1, t.lease_ms // 2))
        if activity.in_activity():
            hb = activity.info().heartbeat_timeout
            if hb is not None and hb.total_seconds() > 0:
                ms = min(ms, max(1, int(hb.total_seconds() * 1000) // 2))
        return ms / 1000

    async def execute(self) -> WorkOutcome:
        spec, missing = self.ex.registry.for_capabilities(self.work.contract.required_capabilities)
        if spec is None or missing:
            return await self._fail(f"no handler for {missing}", retryable=False)
        try:  # an input by reference is fetched and verified first (a claim check)
            arg = spec.validate_input(await resolve_input(self.ctx, self.work.input))
        except InputUnavailable as exc:  # a store or an Authority that failed may answer later
            retry = isinstance(exc.__cause__, (ArtifactStoreError, AuthorityUnavailable))
            return await self._fail(str(exc), retryable=retry)
        except ValidationError as exc:
            return await self._fail(f"invalid input: {describe_failure(exc)}", retryable=False)
        self.ctx.capability_versions = self.ctx.capability_versions or {spec.name: spec.version}
        self.ctx.set_estimate(spec.estimate_ms)  # the expected end (MW-11.4-b)
        heartbeat(self.ctx.heartbeat_details())
        task: asyncio.Task[Any] = asyncio.create_task(
            spec.fn(self.ctx, arg), name=f"handler {self.work.work_item_id}"
        )
        if self.ex.progress_sink is not None:  # the Mission learns of a long start (issue 29)
            announce = asyncio.create_task(self._announce_start(task), name="announce start")
            task.add_done_callback(lambda _: announce.cancel())
        stop = asyncio.Event()
        beats = asyncio.create_task(self._heartbeats(task, stop), name="heartbeats")
        # Temporal's heartbeats have their own loop: a renewal held up by a stalled Authority
        # must not starve them (Temporal would time out an owner whose lease is live).
        pulse = asyncio.create_task(self._temporal_heartbeats(task, stop), name="pulse")
        try:
            cancelled = False
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:  # Temporal cancelled the activity
                cancelled = True
                if temporal_timed_out() and await asyncio.shield(self._lease_holds()):
                    # Temporal's timeout is a hint; the Authority decides the lease (MW-11.3). It
                    # is live (or the Authority is unreachable and the grace period runs): the
                    # handler goes on under its renewals and reports to the Authority — accepted
                    # if the lease is still live then, recorded as a late result if not (MW-11.5-b).
                    log.warning(
                        "%s: Temporal timed the activity out, but the lease holds: the handler "
                        "goes on and reports to the Authority",
                        self.work.work_item_id,
                    )
                    await self._outlast(task)
                else:
                    # A process that was frozen past its heartbeat timeout learns of the
                    # cancellation in the same loop turn as its handler's due timers: let the
                    # handler finish what it had done by then, so that its result is recorded
                    # (MW-11.5-b), not dropped.
                    await asyncio.shield(asyncio.wait({task}, timeout=LATE_RESULT_GRACE_S))
                if not task.done() and _worker_shutdown():
                    return await asyncio.shield(self._interrupted(task, beats, stop))
                if not task.done():
                    for t in (task, beats):
                        t.cancel()
                    await asyncio.gather(task, beats, return_exceptions=True)
                    raise
            # The handler finished: its result goes to the Authority even if Temporal cancels the
            # activity meanwhile (it timed out while this agent was frozen or cut off): a former
            # owner's result is then recorded for audit, never lost (MW-11.5-b).
            concluding = asyncio.ensure_future(self._finish(task, beats, stop))
            try:
                outcome = await asyncio.shield(concluding)
            except asyncio.CancelledError:
                await asyncio.gather(concluding, return_exceptions=True)
                raise
            if cancelled:
                raise asyncio.CancelledError(
                    "the activity was cancelled (its outcome was reported)"
                )
            return outcome
        finally:
            pulse.cancel()

    async def _announce_start(self, handler: asyncio.Task[Any]) -> None:
        """Tell the Mission the handler started, once it has run :data:`STARTED_SIGNAL_AFTER_S`
        (cancelled when it ends first)."""
        await asyncio.wait({handler}, timeout=STARTED_SIGNAL_AFTER_S)
        if not handler.done() and self.ex.progress_sink is not None:
            await self.ex.progress_sink(self.work, ProgressReport(phase=STARTED_PHASE))

    async def _lease_holds(self) -> bool:
        """Whether the Authority confirms this slot's lease (MW-11.3), or cannot be reached
        while the lease's grace period runs (MW-11.5-c: the heartbeat loop ends the handler at
        the grace deadline)."""
        try:
            await self.session.check()
        except LeaseLost as exc:
            reachable = exc.code != RejectionCode.AUTHORITY_UNREACHABLE
            return not reachable and self.session.clock() < self.session.grace_deadline_ms
        return True

    async def _outlast(self, task: asyncio.Task[Any]) -> None:
        """Wait for the handler after Temporal gave up on the activity; only the Worker's
        shutdown (a cancellation then) stops the wait early."""
        while not task.done():
            try:
                await asyncio.shield(asyncio.wait({task}))
            except asyncio.CancelledError:
                if _worker_shutdown():
                    return

    async def _temporal_heartbeats(self, task: asyncio.Task[Any], stop: asyncio.Event) -> None:
        """Heartbeat to Temporal every interval until ``stop`` or the handler ends."""
        interval = self._interval_s()
        while not task.done() and not stop.is_set():
            try:
                async with asyncio.timeout(interval):
                    await stop.wait()
            except TimeoutError:
                heartbeat(self.ctx.heartbeat_details())

    async def _interrupted(
        self, task: asyncio.Task[Any], beats: asyncio.Task[None], stop: asyncio.Event
    ) -> WorkOutcome:
        """The agent is stopping and the handler did not pause in time (it ignored
        ``should_pause()``): cancel it and tell the Authority the execution failed, retryable,
        so that the WorkItem is offered again at once rather than after its lease expires. A
        handler that ignores its cancellation too is left behind (the process is exiting)."""
        stop.set()
        task.cancel()
        await asyncio.wait({task}, timeout=LATE_RESULT_GRACE_S)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: never logged as "never retrieved"
        await asyncio.gather(beats, return_exceptions=True)
        why = (
            f"interrupted: agent {self.ex.actor.agent_id} stopped and the handler did not pause "
            "in time (it did not return at should_pause()); the WorkItem may be offered again"
        )
        log.warning("%s: %s", self.work.work_item_id, why)
        outcome = await self._fail(why, retryable=True)
        if outcome.kind is OutcomeKind.FAILED and outcome.verdict and outcome.verdict.accepted:
            self.ex.interrupted.append(self.work.work_item_id)
        else:  # the lease was gone already (its WorkItem is the Authority's again), or the
            # Authority could not be reached: the lease expires as after a crash
            log.warning("%s: interrupted, not reported: %s", self.work.work_item_id, outcome.error)
        return outcome

    async def _finish(
        self, task: asyncio.Task[Any], beats: asyncio.Task[None], stop: asyncio.Event
    ) -> WorkOutcome:
        # Let a renewal in flight finish (its usage delta must be counted once) before the
        # final report.
        stop.set()
        await asyncio.gather(beats, return_exceptions=True)
        return await self._conclude(task)

    async def _heartbeats(self, task: asyncio.Task[Any], stop: asyncio.Event) -> None:
        """Heartbeat and renew every interval until ``stop``; cancel the handler once the lease
        is gone (MW-11.3-c, MW-11.5-d)."""
        interval = self._interval_s()
        while not task.done():
            try:  # asyncio.timeout: wait_for can swallow a racing cancellation on 3.11
                async with asyncio.timeout(interval):
                    await stop.wait()
            except TimeoutError:
                pass
            if task.done() or stop.is_set():
                return
            try:
                verdict = await self.session.renew()
            except AuthorityUnavailable as exc:
                # reversible work goes on until the grace deadline (MW-11.5-c)
                if self.session.clock() < self.session.grace_deadline_ms:
                    log.warning("lease renewal not delivered, retrying: %s", exc)
                    continue
                self.session.lost = LeaseLost(
                    "grace_expired",
                    "the Authority stayed unreachable past the lease's grace deadline",
                )
            else:
                if verdict.accepted:
                    await self.ctx.report_estimate_change()  # MW-11.4-b: by itself
                    continue
                code = verdict.rejection.code if verdict.rejection else verdict.status
                if code == RejectionCode.BUDGET_EXCEEDED:
                    self.budget_verdict = verdict
                elif self.session.lost is None:
                    log.warning("lease renewal rejected (%s); going on", code)
                    continue
            # A handler whose timers were due when this process resumed (it was frozen) has
            # finished its work: let it return, so that its result is recorded (MW-11.5-b).
            # It can take no fenced action meanwhile: ``guard()`` sees the lost lease.
            if self.budget_verdict is None:
                await asyncio.wait({task}, timeout=LATE_RESULT_GRACE_S)
                if task.done():
                    return
            log.warning(
                "cancelling the handler of %s: %s",
                self.work.work_item_id,
                self.session.lost or "budget exceeded",
            )
            task.cancel()
            return

    async def _conclude(self, task: asyncio.Task[Any]) -> WorkOutcome:
        # read the handler's exception first, whatever the outcome: one never retrieved is
        # logged by asyncio as an error with a traceback (seen on Ctrl-C as LeaseLost)
        failure = None if task.cancelled() else task.exception()
        if self.budget_verdict is not None:
            why = _budget_reason(self.budget_verdict, self.work.contract.budget)
            return await self._fail(why, retryable=False, charge=False)
        if task.cancelled() and self.session.lost is not None:
            return self._lease_lost(self.session.lost)  # the heartbeat loop cancelled it
        if task.cancelled():
            return await self._fail("the handler was cancelled", retryable=True)
        result: Any = task.result() if failure is None else failure
        if isinstance(result, LeaseLost):
            return self._lease_lost(result)
        if isinstance(result, Submission):
            return await self._submit(result)
        if isinstance(result, Pause):
            return await self._report(
                OutcomeKind.PAUSED,
                CommandType.WORK_CHECKPOINT,
                {"checkpoint": result.state},
                checkpoint=result.state,
            )
        if isinstance(result, Blocked):
            return await self._report(
                OutcomeKind.BLOCKED,
                CommandType.WORK_BLOCK,
                {"resolution": result.resolution, "checkpoint": result.state},
                checkpoint=result.state,
                resolution=result.resolution,
            )
        if isinstance(result, BaseException):
            permanent = isinstance(result, PermanentFailure)
            log.warning(
                "handler of %s raised (%s)",
                self.work.work_item_id,
                "not retryable" if permanent else "retryable",
                exc_info=result,
            )
            return await self._fail(describe_failure(result), retryable=not permanent)
        return await self._fail(
            f"the handler returned {type(result).__name__}, not a Submission", retryable=False
        )

    def _lease_lost(self, lost: LeaseLost, verdict: CommandVerdict | None = None) -> WorkOutcome:
        log.warning("%s: %s", self.work.work_item_id, lost)
        return WorkOutcome(
            kind=OutcomeKind.LEASE_LOST,
            verdict=verdict if verdict is not None else self.session.last_verdict,
            checkpoint=self.ctx.checkpoint,
            error=str(lost),
            retryable=True,
        )

    async def _final(
        self, type: str, extra: dict[str, Any], *, charge: bool = True
    ) -> CommandVerdict | None:
        """Deliver one final Command, retrying the same signed Command while the Authority is
        unreachable — for ``report_timeout``, or until the lease's grace deadline when that is
        later; buffered progress is reconciled first (MW-11.5-e). ``None`` when it never got
        through."""
        prepared = self.session.prepare(type, extra, charge=charge)
        loop = asyncio.get_running_loop()
        grace_s = (self.session.grace_deadline_ms - self.session.clock()) / 1000
        deadline = loop.time() + max(self.ex.report_timeout.total_seconds(), grace_s)
        # never back off longer than a quarter lease: the Authority that answers again credits
        # its outage and two leases more, and this report must land in them
        cap_s = min(5.0, max(0.05, self.work.contract.timeouts.lease_ms / 4000))
        try:
            return await retrying(
                lambda: self.session.send(prepared),
                when=authority_away,
                backoff=Backoff(cap_s=cap_s),
                seconds_left=lambda: deadline - loop.time(),
                before_wait=lambda _exc, _wait_s: heartbeat(self.ctx.heartbeat_details()),
            )
        except AuthorityUnavailable as exc:
            log.error("%s not delivered: %s", type, exc)
            self.session.abandon(prepared)
            return None

    async def _report(
        self, kind: OutcomeKind, type: str, extra: dict[str, Any], **fields: Any
    ) -> WorkOutcome:
        try:
            verdict = await self._final(type, extra)
        except CanonicalizationError as exc:
            return await self._fail(f"{type} cannot be signed: {exc}", retryable=False)
        if verdict is None:
            return self._lease_lost(
                LeaseLost(RejectionCode.AUTHORITY_UNREACHABLE, f"{type} not delivered")
            )
        if self.session.lost is not None:
            return self._lease_lost(self.session.lost, verdict)
        if not verdict.accepted:
            rej = verdict.rejection
            why = f"{type} rejected: {rej.line()}" if rej else f"{type} rejected"
            # the handler's author reads this line to learn what the submission lacked
            log.warning("%s: %s", self.work.work_item_id, why)
            return await self._fail(
                why,
                retryable=rej is None or rej.code != RejectionCode.BUDGET_EXCEEDED,
                charge=rej is None or rej.code != RejectionCode.BUDGET_EXCEEDED,
            )
        return WorkOutcome(kind=kind, verdict=verdict, **fields)

    async def _submit(self, sub: Submission) -> WorkOutcome:
        # what the handler published is part of its submission (MW-13.1-a: hashes, not bytes)
        artifacts = list(dict.fromkeys([*sub.artifacts, *self.ctx.published]))
        extra = {
            "outputs": sub.outputs,
            "artifacts": artifacts,
            "evidence": [e.model_dump(mode="json") for e in sub.evidence],
        }
        return await self._report(
            OutcomeKind.SUBMITTED,
            CommandType.WORK_SUBMIT,
            extra,
            outputs=sub.outputs,
            artifacts=artifacts,
            evidence=sub.evidence,
        )

    async def _fail(self, error: str, *, retryable: bool, charge: bool = True) -> WorkOutcome:
        """``work.fail`` with one Evidence of the execution failure (MW-11.4-f). ``error`` is a
        summary (:func:`~._failure.describe_failure` for a handler's exception); any absolute
        path left in it is redacted, since every member replays the log."""
        error = redact_paths(error)
        ev = Evidence(
            subject=self.work.work_item_id,
            criterion="execution",
            method="handler",
            result="fail",
            producer=self.ex.actor.agent_id,
            timestamp_ms=self.session.clock(),
            summary=error[:2000],
        )
        extra = {"evidence": [ev.model_dump(mode="json")], "retryable": retryable}
        verdict = await self._final(CommandType.WORK_FAIL, extra, charge=charge)
        if verdict is None:
            return self._lease_lost(
                LeaseLost(RejectionCode.AUTHORITY_UNREACHABLE, "work.fail not delivered")
            )
        if self.session.lost is not None:
            return self._lease_lost(self.session.lost, verdict)
        return WorkOutcome(
            kind=OutcomeKind.FAILED,
            verdict=verdict,
            evidence=[ev],
            error=error,
            retryable=retryable,
            checkpoint=self.ctx.checkpoint,
        )


__all__ = ["ProgressSink", "WorkItemExecutor"]
