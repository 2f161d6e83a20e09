"""``AgentRuntime``: one agent's process — session, subscriptions, offers, scheduler, worker.

Start-up, in order:

1. ``session.open`` (agent-level, no Group) raises the Session Epoch; the Authority revokes the
   agent's previous leases and requeues their WorkItems first (MW-11.3-f);
2. a :class:`Subscriber` follows every Group from the durable cursor in the local state file and
   the runtime waits until the projection reaches each Group's head: the log tells it its
   Membership Epoch per Group (``member.added`` / ``member.updated``), its published card
   version and its WorkItems (MW-11.1-a/b);
3. ``agent.publish_card`` when the log's card is older (a ``stale_card`` answer means another
   process already published it);
4. one Temporal ``Worker`` per Group, on ``missionweave-agent-<agent_id>/<group_id>``
   (:func:`agent_task_queue`: a separate inbox per Group, MW-11.1-a), serves
   ``execute_work_item``: every activity is an offer to this agent (or a WorkItem it owns, to
   resume), answered by admission control and started when the dispatcher gives it a slot.
   Each Worker's activity slots are the card's ``max_concurrency`` plus the admission
   policy's queue depth plus one, so a Group's flood fills its own inbox only.

While serving, progress buffered while the Authority was unreachable is reconciled as soon as
it answers again — every ``tick`` while the buffer holds Commands, and before any offer answer,
start or lease Command — so an execution that ended cut off is reconciled on reconnection,
before anything else is taken or submitted (MW-11.5-e).

:meth:`AgentRuntime.stop` asks running handlers to pause at their next safe point, stops taking
work, and shuts the Worker down gracefully.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Interceptor, Worker

from ..authority.client import AuthorityClient, Subscriber
from ..authority.wire import now_ms
from ..protocol import Actor, AgentCard, Event, EventType, ProgressReport, SigningKey
from ..protocol.temporal_contract import (
    REPORT_PROGRESS_SIGNAL,
    ExecuteWorkItemInput,
    ProgressSignal,
    agent_task_queue,
    mission_workflow_id,
)
from ..telemetry import worker_interceptors
from ._admission import AdmissionControl, AdmissionPolicy
from ._dispatch import Dispatcher, discloser
from ._errors import WorkerError
from ._execute import WorkItemExecutor
from ._gates import RiskGate
from ._handlers import HandlerRegistry
from ._metrics import unwatch_runtime, watch_runtime
from ._offline import OfflineBuffer, offline_buffer_path, reconcile, reconcile_when_reachable
from ._scheduler import Scheduler
from ._slots import SlotBoard
from ._startup import open_session, publish_card, replaced_message, this_process
from ._state import LocalState
from ._take import OfferTaker

log = logging.getLogger(__name__)


def _ws_url(http_url: str) -> str:
    scheme, rest = http_url.rstrip("/").split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/v1/stream"


class AgentRuntime:
    """The agent runtime (docs/design.md §7).

    Use it as ``async with AgentRuntime(...) as rt:`` (returns once the agent is ready) or
    ``await rt.run()`` with :meth:`stop` from elsewhere. An instance runs once; make a new one
    to start again.

    Args:
        card: the Agent Card; its ``public_key`` must be ``key``'s.
        key: the agent's signing key.
        groups: the Group ids to work in (the agent must be a member of each).
        authority_url: the Authority's base URL, e.g. ``"http://127.0.0.1:8787"``.
        temporal_client: a Temporal client using ``pydantic_data_converter``.
        handlers: the handlers this agent runs.
        state_path: the local state SQLite file (created if missing; delete it to rebuild from
            the log). Beside it, ``<stem>.offline.sqlite3`` holds progress buffered while the
            Authority was unreachable (MW-11.5-c): not rebuildable, keep it; it is
            reconciled at the next start.
        admission: admission settings (queue depth, estimates, dependency check).
        max_wait: the scheduler's bound on waiting: an item queued this long goes first,
            and a Group waiting this long with no slot triggers a cooperative preemption
            (``None``: no bound).
        group_weights: per Group, its weight in the scheduler's weighted-fair shares of slot
            time until the Group's log sets one (``group.priority_set``, by the Group's owner
            or a MissionOwner: the priority class factor × the Group's weight, MW-11.1-d),
            which then wins and reorders the queue at once; a Group named by neither weighs 1.
        group_quotas: per Group, the most slots its WorkItems hold at once (MW-11.1-d);
            a Group not named may hold every slot.
        risk_gate: which risk classes wait for an execution approval and each Group's risk
            budget (:class:`~missionweave.worker.RiskGate`; ``None``: no risk gate).
        resources: this agent's capacity per resource dimension, e.g. ``{"gpu": 2}``: a
            WorkItem starts only where its contract's ``resource_constraints`` fit what is
            free, and Groups share several resources by DRF (``None``: slots only).
        tick: how often the scheduler re-plans when nothing happens.
        graceful_shutdown: how long running handlers get to pause when stopping; one still
            running then is cancelled and reported failed, retryable (:attr:`interrupted`).
        authority_transport: an httpx transport for the Authority client (tests).
        clock: epoch-millisecond clock for everything the runtime stamps or compares with the
            Authority's time (SUBSCRIBE and Presence frames, admission, start deadlines,
            lease and token expiry, Evidence); the wall clock by default. Time-skipping tests
            pass the Authority's virtual clock.
        interceptors: Temporal worker interceptors for the agent's Workers (one per Group).
        tracing: add the OpenTelemetry tracing interceptor to the Worker unless the client or
            ``interceptors`` already has one (a no-op until tracing is configured, see
            :mod:`missionweave.telemetry`).

    Raises:
        ValueError: the card's key is not ``key``, ``groups`` is empty, or a weight, quota or
            capacity is out of range.
    """

    def __init__(
        self,
        card: AgentCard,
        key: SigningKey,
        *,
        groups: list[str],
        authority_url: str,
        temporal_client: Client,
        handlers: HandlerRegistry,
        state_path: Path,
        admission: AdmissionPolicy | None = None,
        max_wait: timedelta | None = timedelta(minutes=5),
        group_weights: Mapping[str, float] | None = None,
        group_quotas: Mapping[str, int] | None = None,
        risk_gate: RiskGate | None = None,
        resources: Mapping[str, int] | None = None,
        tick: timedelta = timedelta(seconds=1),
        graceful_shutdown: timedelta = timedelta(seconds=10),
        authority_transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], int] = now_ms,
        interceptors: Sequence[Interceptor] = (),
        tracing: bool = True,
    ) -> None:
        if card.public_key != key.public_key:
            raise ValueError("the card's public_key is not the signing key's")
        if not groups:
            raise ValueError("an agent works in at least one Group")
        self.card = card
        self.groups = list(dict.fromkeys(groups))
        self.authority_url = authority_url
        self.temporal_client = temporal_client
        self.handlers = handlers
        self.state_path = Path(state_path)
        self.actor = Actor(card.agent_id, key, clock=clock)  # every Command on one clock
        self.clock = clock
        self.interceptors = worker_interceptors(temporal_client, interceptors, tracing=tracing)
        self.board = SlotBoard(card.max_concurrency, on_change=self._poke, clock=clock)
        self.admission = AdmissionControl(card, handlers, admission)
        self.admission_policy = admission or AdmissionPolicy()
        self.scheduler = Scheduler(
            card.max_concurrency,
            max_wait_ms=None if max_wait is None else int(max_wait.total_seconds() * 1000),
            weights=group_weights,
            quotas=group_quotas,
            risk_gate=risk_gate,
            resources=resources,
        )
        self._configured_weights = dict(group_weights or {})
        self.tick = tick
        self.graceful_shutdown = graceful_shutdown
        self._transport = authority_transport
        self.state: LocalState | None = None
        self.offline_buffer: OfflineBuffer = OfflineBuffer()  # the file's, once running
        self.dispatcher: Dispatcher | None = None
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._applied = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._signals: set[asyncio.Task[None]] = set()
        self._executor: WorkItemExecutor | None = None
        #: Set when another process opened a newer session for this agent (it then stops):
        #: which session, when and, if it said, which process (host and pid).
        self.replaced_by: str | None = None
        unserved = [c for c in card.capabilities if handlers.find(c) is None]
        if unserved:
            log.warning("card capabilities without a handler: %s", unserved)
        converter = getattr(
            getattr(temporal_client, "data_converter", None), "payload_converter_class", None
        )
        if (
            converter is not None
            and converter is not pydantic_data_converter.payload_converter_class
        ):
            log.warning("the Temporal client should use pydantic_data_converter")

    # --------------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> AgentRuntime:
        self._task = asyncio.create_task(self.run(), name=f"agent {self.card.agent_id}")
        ready = asyncio.create_task(self.ready.wait())
        await asyncio.wait({self._task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            ready.cancel()
            self._task.result()  # raises the start-up error
            raise WorkerError("the runtime stopped during start-up")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
        if self._task is not None:
            await self._task

    @property
    def interrupted(self) -> list[str]:
        """WorkItems whose handler had not paused when the stop's grace
        (``graceful_shutdown``) ran out: each was cancelled and reported failed, retryable, to
        the Authority, which offers it again at once."""
        return list(self._executor.interrupted) if self._executor is not None else []

    async def stop(self) -> None:
        """Make :meth:`run` return: pause running handlers, shut the Worker down gracefully."""
        self._stop.set()

    def _poke(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.poke()

    async def run(self) -> None:
        """Run until :meth:`stop` (or a fatal error). A stop during start-up — session,
        subscription, catching up with the log — ends it at once, even while the Authority
        does not answer: nothing runs yet that would need a graceful end.

        Raises:
            AuthorityUnavailable: the Authority cannot be reached at start-up.
            SessionError: the Authority refused ``session.open``.
            SubscriptionRefused: not a member of a Group.
            RuntimeError: the Temporal Worker failed.
        """
        state = self.state = LocalState(self.state_path, self.card.agent_id)
        self.offline_buffer = OfflineBuffer(offline_buffer_path(self.state_path))
        watch_runtime(self)  # slots, queue, offline buffer: read at each scrape
        try:
            async with AuthorityClient(
                self.authority_url,
                transport=self._transport,
                signing_key=self.actor.key,
                clock=self.clock,
            ) as client:
                running = asyncio.create_task(self._run(client, state), name="agent runtime")
                stopping = asyncio.create_task(self._stop.wait())
                try:
                    await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not running.done() and not self.ready.is_set():
                        running.cancel()  # still starting up
                        await asyncio.gather(running, return_exceptions=True)
                        return
                    await running  # serving: it stops gracefully by itself
                finally:
                    stopping.cancel()
                    if not running.done():
                        running.cancel()
                        await asyncio.gather(running, return_exceptions=True)
        finally:
            for t in list(self._signals):
                t.cancel()
            await asyncio.gather(*self._signals, return_exceptions=True)
            unwatch_runtime(self)
            state.close()
            self.offline_buffer.close()
            self.ready.clear()

    async def _run(self, client: AuthorityClient, state: LocalState) -> None:
        authority_key = await client.public_key()
        await open_session(client, self.actor, this_process())
        sub = Subscriber(
            _ws_url(self.authority_url),
            self.actor,
            self.groups,
            state.cursors,
            self._on_event,
            authority_public_key=authority_key,
            client=client,
            on_snapshot=self._on_snapshot,
            clock=self.clock,
        )
        sub_task = asyncio.create_task(sub.run(), name="subscriber")
        try:
            await self._catch_up(client, state, sub_task)
            # progress buffered while the Authority was unreachable, by this process or by one
            # that died before it could reconcile: before anything else is sent (MW-11.5-e)
            if len(self.offline_buffer):
                await reconcile(client, self.actor, self.offline_buffer, self.clock)
            await publish_card(client, self.actor, self.card, state, self.groups)
            await self._serve(client, state, sub_task)
        finally:
            await sub.stop()
            await asyncio.gather(sub_task, return_exceptions=True)

    async def _serve(
        self, client: AuthorityClient, state: LocalState, sub_task: asyncio.Task[None]
    ) -> None:
        put = getattr(client, "put_presence", None)
        dispatcher = self.dispatcher = Dispatcher(
            self.actor,
            state,
            self.groups,
            self.scheduler,
            self.board,
            presence=put if callable(put) else None,
            disclose=discloser(self.actor, client, self.clock),
            tick_s=self.tick.total_seconds(),
            clock=self.clock,
        )
        taker = OfferTaker(
            self.actor,
            client,
            self.admission,
            state,
            self.board,
            dispatcher,
            self.groups,
            self.clock,
            offline_buffer=self.offline_buffer,
        )
        executor = self._executor = WorkItemExecutor(
            self.actor,
            client,
            self.handlers,
            board=self.board,
            progress_sink=self._progress,
            clock=self.clock,
            agent_card_version=self.card.version,
            taker=taker,
            offline_buffer=self.offline_buffer,
        )
        # One inbox per Group (MW-11.1-a): a Worker per Group on its own task queue, with
        # the running slots, plus the Group's accepted WorkItems that may wait for one
        # (admission control declines beyond that), plus one to answer an offer while
        # everything is taken. One Group's backlog then waits in its own queue only.
        # The last, shared queue is that of Missions scheduled before per-Group inboxes: still
        # answered, never used by a Mission started now.
        queues = [agent_task_queue(self.card.agent_id, g) for g in self.groups]
        queues.append(agent_task_queue(self.card.agent_id))
        workers = [
            Worker(
                self.temporal_client,
                task_queue=queue,
                activities=[executor.execute_work_item],
                max_concurrent_activities=(
                    self.card.max_concurrency + self.admission_policy.max_queue_depth + 1
                ),
                graceful_shutdown_timeout=self.graceful_shutdown,
                interceptors=self.interceptors,
            )
            for queue in queues
        ]
        async with contextlib.AsyncExitStack() as serving:
            for worker in workers:
                await serving.enter_async_context(worker)
            loop: asyncio.Task[Any] = asyncio.create_task(dispatcher.run(), name="dispatcher")
            stopper: asyncio.Task[Any] = asyncio.create_task(self._stop.wait())
            # progress of an execution that ended while cut off: reconciled as soon as the
            # Authority answers again, not only at the next start (MW-11.5-e)
            reconnect = asyncio.create_task(
                reconcile_when_reachable(
                    client,
                    self.actor,
                    self.offline_buffer,
                    self.clock,
                    interval_s=self.tick.total_seconds(),
                ),
                name="reconcile on reconnection",
            )
            self._poke()
            self.ready.set()
            log.info(
                "agent %s ready (session %s) on %s",
                self.card.agent_id,
                self.actor.session_epoch,
                ", ".join(queues),
            )
            try:
                done, _ = await asyncio.wait(
                    {loop, sub_task, stopper}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                self.board.pause_all("the agent is shutting down")
                dispatcher.close("the agent is shutting down")
                for t in (loop, stopper, reconnect):
                    t.cancel()
                await asyncio.gather(loop, stopper, reconnect, return_exceptions=True)
            # leaving ``async with`` shuts the Workers down, waiting for handlers to pause
        for t in done - {stopper}:
            exc = None if t.cancelled() else t.exception()
            if exc is not None:
                raise exc

    # ---------------------------------------------------------------------- start-up

    async def _catch_up(
        self, client: AuthorityClient, state: LocalState, sub_task: asyncio.Task[None]
    ) -> None:
        """Wait until the projection has every Group's Events up to its current head."""
        heads = {g: (await client.head(g))[0] for g in self.groups}
        while any(state.applied_seq(g) < h for g, h in heads.items()):
            self._applied.clear()
            waiter = asyncio.create_task(self._applied.wait())
            await asyncio.wait({waiter, sub_task}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if sub_task.done():
                sub_task.result()
                raise WorkerError("the subscription ended during start-up")
        self._sync_epochs(state)

    def _sync_epochs(self, state: LocalState) -> None:
        for g in self.groups:
            epoch = state.membership(g).membership_epoch
            if epoch:
                self.actor.membership_epochs[g] = epoch
        self._sync_weights(state)

    def _sync_weights(self, state: LocalState) -> None:
        """Each Group's weight: the log's (``group.priority_set``) when set, else the
        configured one; queued items are reordered from the next plan on (MW-11.3-g)."""
        for g in self.groups:
            logged = state.group_weight(g)
            weight = logged if logged is not None else self._configured_weights.get(g)
            if weight is not None and weight != self.scheduler.weight(g):
                log.info("Group %s now weighs %s in the scheduler", g, weight)
                self.scheduler.set_weight(g, weight)

    # ---------------------------------------------------------------- event handling

    async def _on_event(self, event: Event) -> None:
        state = self.state
        assert state is not None
        if not state.apply(event):
            return
        if event.type.startswith("member."):
            self._sync_epochs(state)
        elif event.type == EventType.GROUP_PRIORITY_SET:
            self._sync_weights(state)
        elif (
            event.type == EventType.AGENT_SESSION_OPENED
            and event.body.get("agent_id") == self.card.agent_id
            and int(event.body.get("session_epoch", 0)) > self.actor.session_epoch
        ):
            self.replaced_by = replaced_message(self.card.agent_id, self.actor.session_epoch, event)
            log.error("%s", self.replaced_by)
            self._stop.set()
        self._applied.set()
        self._poke()

    async def _on_snapshot(self, snap: dict[str, Any]) -> None:
        assert self.state is not None
        self.state.restore_snapshot(snap)
        self._sync_epochs(self.state)
        self._applied.set()

    async def _progress(self, work: ExecuteWorkItemInput, report: ProgressReport) -> None:
        """Send the latest progress to the Mission workflow (``report_progress`` signal) in the
        background: the handler does not wait for Temporal (the Authority has the report)."""
        task = asyncio.create_task(self._signal_progress(work, report))
        self._signals.add(task)
        task.add_done_callback(self._signals.discard)

    async def _signal_progress(self, work: ExecuteWorkItemInput, report: ProgressReport) -> None:
        handle = self.temporal_client.get_workflow_handle(mission_workflow_id(work.mission_id))
        signal = ProgressSignal(
            work_item_id=work.work_item_id, agent_id=self.card.agent_id, report=report
        )
        try:
            async with asyncio.timeout(5):
                await handle.signal(REPORT_PROGRESS_SIGNAL, signal)
        except Exception as exc:  # a courtesy to the workflow's status query, never fatal
            log.info("progress signal for %s not delivered: %r", work.work_item_id, exc)


__all__ = ["AgentRuntime"]
