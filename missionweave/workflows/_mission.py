"""The ``Mission`` workflow: a WorkItem DAG, offers, leases, execution and review on Temporal.

Every state change goes through the Group Authority as a Command; the workflow folds the
Authority's Events with the one reducer, never its own guess. Agents talk to the Authority
themselves, inside the ``execute_work_item`` activity that is their offer; Updates are for
people and tools only. Update handlers validate and enqueue; the main loop submits what is
queued in batches (one ``submit_commands`` activity per batch) and resolves the waiting
handlers. See docs/design.md §4–§5 and docs/missions.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from ..activities import CoordinatorActivities
    from ..outcome import (
        GROUP_ID,
        INVALID_MISSION,
        MISSION_EXISTS,
        MISSION_ID,
        MISSION_STATUS,
        OPEN_WORK_ITEMS,
        all_errors,
        error_line,
        mission_failure,
    )
    from ..protocol import (
        Command,
        CommandType,
        GraphError,
        RejectionCode,
        WorkGraph,
        WorkItemState,
        transition_for,
    )
    from ..protocol.temporal_contract import (
        AUTHORIZE_WORK_UPDATE,
        MISSION_WORKFLOW_TYPE,
        REPORT_PROGRESS_SIGNAL,
        AuthorizeWorkInput,
        BatchEntry,
        CancelInput,
        CommandVerdict,
        CoordinatorIntent,
        EventSummary,
        ItemResult,
        MissionResult,
        MissionSpec,
        MissionStatus,
        ProgressSignal,
        ReviewInput,
        ReviewResult,
        SubmitCommandsInput,
        SubmitCommandsResult,
        UnblockInput,
        first_duplicate,
    )
    from ._children import ChildMissionsMixin
    from ._input_bounds import check_new_inputs, spec_input_problem
    from ._plan import counts, finished, open_count, plan
    from ._review import ReviewMixin
    from ._review import refuse as _refuse
    from ._started import confirmed, needs_confirmation
    from ._state import (
        STATE_BUDGET,
        ItemState,
        MissionState,
        apply_events,
        compact,
        name_items,
        trim,
    )
    from ._status import (
        mission_status,
        note_blocked_dependents,
        search_attributes_due,
        waiting_lines,
    )
    from ._work import WorkMixin, coordinator_activity

_TRANSITION_UNBLOCK = transition_for(CommandType.WORK_UNBLOCK)
assert _TRANSITION_UNBLOCK is not None

MAX_BATCH = 100
#: Bytes of JSON the Mission's result may have (Temporal fails a completion over 2 MiB).
RESULT_BUDGET = 1 << 20
#: The states ``unblock`` may be asked in: the state table's (spec 10.2), not a copy of it.
_UNBLOCK_FROM = frozenset(s for s in _TRANSITION_UNBLOCK.sources if s is not None)


def _item_ids(batch: list[BatchEntry]) -> list[str]:
    """The WorkItems a batch of Commands concerns, in order."""
    out = []
    for e in batch:
        body = e.intent.body if e.intent else e.command.body if e.command else {}
        if "work_item_id" in body:
            out.append(str(body["work_item_id"]))
    return out


def _failed_for_good(item: ItemState) -> str:
    """``failed after 3 attempt(s) at ada: RuntimeError: kaboom`` (the error's first line)."""
    text = f"failed after {item.attempts} attempt(s)"
    bound = item.w.retry_exhausted
    if bound is not None and bound != "max_attempts":
        text += f" (retry bound {bound} reached)"
    elif not item.w.retryable and item.attempts < item.spec.contract.retry.max_attempts:
        text += " (not retryable)"
    if item.w.failed_owner:
        text += f" at {item.w.failed_owner}"
    why = error_line(item.error)
    return text + (f": {why}" if why else "")


async def _despite_cancel(step: Callable[[], Awaitable[object]]) -> None:
    """Await ``step()``; if Temporal's cancel request interrupts it, once more (a workflow is
    cancelled once): for what follows a decided outcome."""
    try:
        await step()
    except asyncio.CancelledError:
        await step()


def _chain() -> str:
    """This chain of runs (continue-as-new keeps it; a new start under the same workflow id
    does not): the random end of its first run id (a UUIDv7 begins with its time)."""
    return workflow.info().first_execution_run_id.replace("-", "")[-12:]


def _stub(raw: Any) -> MissionSpec:
    """A spec with no items standing in for one that does not validate, so that the status
    query, the search attributes and the failure can still name the Mission: the group and
    mission ids when they read as text (else empty: the mission id from the workflow id)."""
    data = raw if isinstance(raw, dict) else {}

    def text(key: str, default: str = "") -> str:
        v = data.get(key)
        return v if isinstance(v, str) and 0 < len(v) <= 128 else default

    wid = workflow.info().workflow_id
    return MissionSpec.model_construct(
        group_id=text("group_id"),
        mission_id=text("mission_id", wid.removeprefix("mission-")),
        title=text("title"),
        items=[],
    )


def _ms(t: timedelta) -> int:
    return int(t.total_seconds() * 1000)


@workflow.defn(name=MISSION_WORKFLOW_TYPE)
class MissionWorkflow(WorkMixin, ChildMissionsMixin, ReviewMixin):
    """One Mission. Input: a :class:`MissionSpec` (plain JSON); result: :class:`MissionResult`.

    Updates (people and tools): ``unblock``, ``cancel``, ``authorize_work`` and ``approve``
    (``approve`` carries a MissionOwner's signed Command, see :mod:`._review`).
    Signals: ``report_progress``, ``child_finished``. Query: ``status``.
    Activities: ``select_candidates``, ``submit_commands``, ``review_submission`` and
    ``work_item_events`` on the coordinator's task queue; ``execute_work_item`` on each
    agent's (:mod:`._work`).
    """

    @workflow.init
    def __init__(
        self, spec: MissionSpec | dict[str, Any], resume: MissionState | None = None
    ) -> None:
        # `temporal workflow start --input-file mission.json` passes one argument for two
        # parameters: the SDK then drops the type hints and the spec arrives as a plain dict.
        # The hint admits a dict too, so that a spec that does not validate reaches this
        # validation (and fails the workflow from `run`) rather than failing the decoding of
        # the arguments, a workflow *task* failure Temporal retries forever.
        self.invalid: str | None = None
        self.readable = True  # the spec validated
        try:
            spec = MissionSpec.model_validate(spec)
            if resume is not None:
                resume = MissionState.model_validate(resume)
        except ValidationError as exc:
            self.invalid = f"invalid MissionSpec: {all_errors(exc, MissionSpec)}"
            self.readable, spec, resume = False, _stub(spec), None
        for it in resume.items.values() if resume is not None else ():
            it.syncing = it.selecting = it.offer_pending = False  # no coroutine of the last run
        self.state = resume or MissionState(
            spec=spec, items={i.work_item_id: ItemState(spec=i) for i in spec.items}
        )
        self.graph = WorkGraph()
        try:
            self.graph.add(  # archived WorkItems are nodes without edges: nothing waits on them
                {
                    **{w: [] for w in self.state.archived},
                    **{w: it.spec.dependencies for w, it in self.state.items.items()},
                },
                {w: it.spec.contract.dependency_strategy for w, it in self.state.items.items()},
            )
        except GraphError as exc:
            self.invalid = f"invalid Mission: {exc}"
        if resume is None and self.invalid is None:  # inputs no continue-as-new could carry
            self.invalid = spec_input_problem(spec)
        self.queue: list[BatchEntry] = []
        #: The spec's WorkItems whose ``work.authorize`` is not queued yet (first run only).
        self.unauthorized: list[str] = []
        self.intent_verdicts: dict[str, CommandVerdict] = {}
        self.purpose: dict[str, tuple[str, str]] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.review_queue: list[ReviewInput] = []
        self.review_results: dict[str, ReviewResult] = {}
        self.wake = False
        #: WorkItems the next plan looks at: all at first; then those an Event changed, their
        #: dependents and new ones (a settled one waits for that, :attr:`Plan.settled`), so a
        #: Mission of 10,000 WorkItems does not re-plan all of them in every workflow task.
        #: A set read for membership only (plans go in authorization order): deterministic.
        self.attention: set[str] = set(self.state.items)
        #: Changes applied so far, and at the last status counted (count only on change).
        self.changes = 0
        self.counted: tuple[int, str, int] | None = None
        self.published: tuple[str, int] | None = None  # MissionStatus, OpenWorkItems
        self.published_at = 0  # when (epoch ms, workflow time)
        self.exists: str | None = None  # the Authority holds this Mission already
        self.ending: tuple[str, str] | None = None  # the status and reason being sent

    # ------------------------------------------------------------------------------ run

    @workflow.run
    async def run(
        self, spec: MissionSpec | dict[str, Any], resume: MissionState | None = None
    ) -> MissionResult:
        """Drive the Mission to its end; see :mod:`missionweave.outcome`.

        Raises:
            ApplicationError: non-retryable, the Mission did not complete: ``MissionFailed``
                or ``MissionCancelled`` (details: the :class:`MissionResult`),
                ``InvalidMission`` (a spec that does not validate or an invalid graph; its
                message names the field) or ``MissionExists`` (the Authority holds this
                Mission already: the id of a finished Mission was started again).
        """
        if self.invalid:
            await self._refuse_start(INVALID_MISSION, self.invalid, with_result=self.readable)
        self._publish_status()
        if not self.state.created:
            # Under an id of this chain of runs: another run started later with the same
            # workflow id (a finished Mission's) is answered `mission_exists`, not this
            # run's verdict.
            self._intent(
                CommandType.MISSION_CREATE,
                {
                    "mission_id": self.state.spec.mission_id,
                    "title": self.state.spec.title,
                    **(
                        {"parent": self.state.spec.parent.model_dump()}
                        if self.state.spec.parent
                        else {}
                    ),
                    **(
                        {"budget": self.state.spec.budget.model_dump(mode="json")}
                        if self.state.spec.budget
                        else {}
                    ),
                },
                ("mission", ""),
                suffix="@" + _chain(),
            )
            # in dependency order, a batch at a time as they are sent (:meth:`_flush`): 10,000
            # Commands built at once would hold one workflow task past Temporal's deadlock bound
            self.unauthorized = self.graph.topological_order()
        cancelled = False
        try:
            await self._drive()
        except asyncio.CancelledError:
            # Temporal's cancel request (`temporal workflow cancel`, `handle.cancel()`): the
            # Authority cancels the Mission too, and the execution ends Canceled
            why = workflow.cancellation_reason() or "Temporal cancel request"
            await self._end("cancelled", CommandType.MISSION_CANCEL, why)
            cancelled = self.state.status == "cancelled"
        # the outcome is decided: a cancel request arriving now changes nothing
        await _despite_cancel(lambda: workflow.wait_condition(workflow.all_handlers_finished))
        result = self._result()
        if self.state.spec.parent is not None:
            parent = self.state.spec.parent
            await _despite_cancel(lambda: self._report_to_parent(parent, result))
        if cancelled:  # Canceled carries no details: the status query has the result
            raise CancelledError(f"mission {result.mission_id} cancelled: {result.reason}")
        if result.status != "completed":
            raise mission_failure(result)  # the execution fails: its status says what happened
        return result

    async def _drive(self) -> None:
        """The main loop: submit, plan, offer, review and wait, until the Mission ends."""
        while True:
            await self._flush()
            if self.exists is not None:
                await self._refuse_start(MISSION_EXISTS, self.exists, with_result=False)
            self._start_reviews()
            self._advance_reviews()  # a verified review WorkItem or an Approval moves a review on
            if self.state.cancel_reason is not None and self.state.status == "running":
                await self._end("cancelled", CommandType.MISSION_CANCEL, self.state.cancel_reason)
                return
            p = plan(self.state, self.graph, self._now(), self.attention)
            self.attention.difference_update(p.settled)
            for wid in p.exhausted:
                item = self.state.items[wid]
                if item.spec.child_mission is None:  # a child's item says what its child did
                    item.detail = p.reasons.get(wid) or _failed_for_good(item)
            if p.exhausted and self.state.status == "running":
                first = self.state.items[p.exhausted[0]]
                why = (
                    p.reasons.get(first.work_item_id)
                    or error_line(first.error)
                    or (first.detail if first.spec.child_mission is not None else "")
                )
                reason = f"{first.work_item_id} failed for good" + (f": {why}" if why else "")
                note_blocked_dependents(self.state, p.exhausted)
                await self._end("failed", CommandType.MISSION_FAIL, reason)
                return
            # Temporal suggests continuing as new: start nothing more, let what is in flight
            # finish, then continue as new (an activity of a closed run would be lost)
            draining = self._draining()
            if not draining:
                for wid in p.children:
                    self._create_child(self.state.items[wid])
                for wid in p.resume:
                    self._resume(self.state.items[wid])
                for wid in p.review:
                    self._spawn_review(self.state.items[wid])
            if p.offer and not draining:
                await self._select_and_offer(p.offer)
                # Nobody could take them: plan again, or their retry time (set by the ranking,
                # after this plan) gets no timer and they wait for good.
                if not self.queue:
                    continue
            if self.queue:
                continue
            if finished(self.state):
                await self._end("completed", CommandType.MISSION_COMPLETE, "")
                return
            if self._can_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                # A handler that finished meanwhile may have queued a Command: continuing as
                # new now would orphan it.
                if self._can_continue_as_new():
                    # The items live in the state: the spec travels without them, so the
                    # continue-as-new input stays well under Temporal's 2 MiB payload limit.
                    slim = self.state.spec.model_copy(update={"items": []})
                    trim(self.state)
                    # without default values (a WorkContract is mostly defaults): about a
                    # quarter of the bytes; the next run's validation restores them
                    # the state's spec has the named contracts; the first argument (ignored
                    # when a state is given) need not carry them twice
                    bare = slim.model_copy(update={"contracts": {}})
                    workflow.continue_as_new(args=[bare, compact(self.state, slim)])
                continue
            self._publish_status()
            self.wake = False
            timeout = None
            if p.next_deadline_ms is not None:
                timeout = timedelta(milliseconds=max(1, p.next_deadline_ms - self._now()))
            try:
                # every reason to act: a change, a Command to send, reviews to start, or a
                # continue-as-new Temporal suggests that nothing in flight holds back any more
                await workflow.wait_condition(
                    lambda: (
                        self.wake
                        or bool(self.queue)
                        or self._reviews_due()
                        or self._can_continue_as_new()
                    ),
                    timeout=timeout,
                )
            except TimeoutError:
                pass

    async def _refuse_start(self, kind: str, why: str, *, with_result: bool) -> None:
        """End a run that must not go on before anything started (an invalid spec, a Mission
        the Authority holds already): status ``failed`` in the query and search attributes,
        then a non-retryable ``ApplicationError`` of type ``kind`` naming ``why``, with the
        Mission's result in its details when ``with_result``."""
        self.state.status, self.state.end_reason = "failed", why
        if kind == MISSION_EXISTS:
            # this run is not the Mission: the Mission's own run keeps its status in the list
            # (`MissionStatus="failed"` must not find a completed Mission) and in the CLI
            workflow.upsert_search_attributes(
                [
                    MISSION_ID.value_unset(),
                    GROUP_ID.value_unset(),
                    MISSION_STATUS.value_unset(),
                    OPEN_WORK_ITEMS.value_unset(),
                ]
            )
        else:
            for item in self.state.items.values():
                item.detail = item.detail or f"not authorized: {why}"
            self._publish_status()
        await workflow.wait_condition(workflow.all_handlers_finished)
        details = [self._result().model_dump(mode="json")] if with_result else []
        raise ApplicationError(why, *details, type=kind, non_retryable=True)

    # -------------------------------------------------------------------------- commands

    def _now(self) -> int:
        return int(workflow.now().timestamp() * 1000)

    def _command_id(self) -> str:
        """A new coordinator Command id: deterministic, unique within the Mission."""
        self.state.next_command += 1
        return f"{workflow.info().workflow_id}/c{self.state.next_command}"

    def _intent(
        self, type: str, body: dict[str, Any], purpose: tuple[str, str], suffix: str = ""
    ) -> str:
        """Queue a coordinator Command with a deterministic id (``suffix`` appended) and issue
        time."""
        cid = self._command_id() + suffix
        self.queue.append(
            BatchEntry(
                intent=CoordinatorIntent(
                    command_id=cid, type=type, body=body, issued_at_ms=self._now()
                )
            )
        )
        self.purpose[cid] = purpose
        return cid

    async def _flush(self) -> None:
        """Submit queued Commands in batches and apply the verdicts."""
        while self.queue or self.unauthorized:
            self._authorize_initial(MAX_BATCH - len(self.queue))
            batch, self.queue = self.queue[:MAX_BATCH], self.queue[MAX_BATCH:]
            # Regular, not local, activities: with local activities, update completions and
            # the commands the main loop issues (search attributes) interleaved differently on
            # replay — a nondeterminism error seen at 100 WorkItems.
            try:
                result = await coordinator_activity(
                    CoordinatorActivities.submit_commands,
                    SubmitCommandsInput(group_id=self.state.spec.group_id, entries=batch),
                    start_to_close=timedelta(seconds=30),
                    summary=f"{len(batch)} command(s) to the Authority"
                    + (f" for {named}" if (named := name_items(_item_ids(batch))) else ""),
                )
            except asyncio.CancelledError:  # Temporal's cancel request: sent again (same ids)
                self.queue = batch + self.queue
                raise
            for entry, verdict in zip(batch, result.verdicts, strict=True):
                if verdict.status != "rejected":
                    self._apply(verdict.events)
                if entry.command is not None:
                    self.state.remember(verdict)
                else:
                    self._on_intent(verdict)
            self.wake = True

    def _apply(self, events: list[EventSummary]) -> None:
        """Fold the Authority's Events into the state; what they changed, and what depends on
        it, is looked at by the next plan."""
        for wid in apply_events(self.state, events):
            self.attention.add(wid)
            self.attention.update(self.graph.dependents(wid))
            self.changes += 1

    def _authorize_initial(self, n: int) -> None:
        """Queue ``work.authorize`` for the next ``n`` of the spec's WorkItems not yet queued."""
        ids, self.unauthorized = self.unauthorized[: max(n, 0)], self.unauthorized[max(n, 0) :]
        for wid in ids:
            self._authorize(self.state.items[wid])

    def _reviews_due(self) -> bool:
        return bool(self.review_queue) and "reviews" not in self.tasks

    def _enqueue(self, command: Command) -> str:
        """Queue a person's signed Command (``approve``) for the next Authority batch."""
        cid = command.command_id
        if cid not in self.state.verdicts and not any(
            e.command is not None and e.command.command_id == cid for e in self.queue
        ):
            self.queue.append(BatchEntry(command=command))
        return cid

    async def _forward(self, command: Command) -> CommandVerdict:
        """Submit a person's signed Command and answer the Authority's verdict (a retried
        update is answered from :attr:`MissionState.verdicts`, not submitted twice)."""
        cid = self._enqueue(command)
        await workflow.wait_condition(lambda: cid in self.state.verdicts)
        return self.state.verdicts[cid]

    def _spawn_review(self, item: ItemState) -> None:
        """Review a submission the Authority holds whose activity's result was lost."""
        self.tasks[f"review:{item.work_item_id}"] = asyncio.create_task(self._review_lost(item))

    async def _review_lost(self, item: ItemState) -> None:
        try:
            await self._review(item)
        finally:
            self.tasks.pop(f"review:{item.work_item_id}", None)
            self.wake = True

    def _applied_intent(self, v: CommandVerdict, purpose: tuple[str, str]) -> None:
        """Apply the verdict on a coordinator Command an activity issued itself."""
        if v.status != "rejected":
            self._apply(v.events)
        self.purpose[v.command_id] = purpose
        self._on_intent(v)
        self.wake = True

    def _on_intent(self, v: CommandVerdict) -> None:
        self.intent_verdicts[v.command_id] = v
        kind, wid = self.purpose.pop(v.command_id, ("", ""))
        item = self.state.items.get(wid)
        now = self._now()
        if kind == "mission":
            self.state.created = v.accepted
            if v.rejection is not None and v.rejection.code == RejectionCode.MISSION_EXISTS:
                self.exists = (
                    f"mission {self.state.spec.mission_id} exists already at the Authority: a "
                    f"Mission's id is never started again ({v.rejection.reason}); start it "
                    "under a new mission_id, or see it with `missionweave mission status "
                    f"{self.state.spec.mission_id}`"
                )
        elif item is None:
            return
        elif kind == "offer":
            item.offer_pending = False
            if not v.accepted:  # e.g. owner_active: the lease has not expired yet
                item.retry_at_ms = now + max(1000, self.state.spec.offer_policy.reoffer_backoff_ms)
                item.detail = f"offer refused: {v.rejection.code if v.rejection else '?'}"
        elif kind == "authorize" and not v.accepted:
            rej = v.rejection
            if (
                rej is not None
                and rej.code == RejectionCode.DUPLICATE_ID
                and (rej.detail.get("mission_id") == self.state.spec.mission_id)
            ):
                item.authorized = True  # authorized by an earlier run of this Mission
            else:  # e.g. the id is another Mission's: WorkItem ids are unique per Group
                item.detail = f"not authorized: {rej.reason if rej else '?'}"
                self.state.cancel_reason = self.state.cancel_reason or f"{wid} not authorized: " + (
                    rej.reason if rej else "?"
                )
        elif kind == "review":
            item.reviewing = False
        elif kind == "child" and v.accepted:
            self._start_child(item)

    def _authorize(self, item: ItemState) -> str:
        return self._intent(
            CommandType.WORK_AUTHORIZE,
            {
                "work_item_id": item.work_item_id,
                "mission_id": self.state.spec.mission_id,
                "contract": item.spec.contract.wire(),
                "dependencies": item.spec.dependencies,
            },
            ("authorize", item.work_item_id),
        )

    # --------------------------------------------------------------- updates from people

    @workflow.update
    async def unblock(self, inp: UnblockInput) -> CommandVerdict:
        """Resolve a blocked WorkItem (MW-11.4-c)."""
        cid = self._intent(
            CommandType.WORK_UNBLOCK,
            {"work_item_id": inp.work_item_id, "resolution": inp.resolution},
            ("unblock", inp.work_item_id),
        )
        await workflow.wait_condition(lambda: cid in self.intent_verdicts)
        return self.intent_verdicts[cid]

    @unblock.validator
    def _check_unblock(self, inp: UnblockInput) -> None:
        item = self.state.items.get(inp.work_item_id)
        if item is None or item.state not in _UNBLOCK_FROM:
            raise _refuse("not_blocked", f"WorkItem {inp.work_item_id} is not blocked")

    @workflow.update
    async def cancel(self, inp: CancelInput) -> str:
        """Cancel the Mission; every unfinished WorkItem is cancelled (spec 10.2)."""
        self.state.cancel_reason = inp.reason
        self.wake = True
        await workflow.wait_condition(lambda: self.state.status != "running")
        return self.state.status

    @cancel.validator
    def _check_cancel(self, inp: CancelInput) -> None:
        if self.state.status != "running":
            raise _refuse(
                RejectionCode.MISSION_CLOSED, f"the Mission is already {self.state.status}"
            )

    @workflow.update(name=AUTHORIZE_WORK_UPDATE)
    async def authorize_work(self, inp: AuthorizeWorkInput) -> SubmitCommandsResult:
        """Add WorkItems and edges while the Mission runs (MW-10.4-a)."""
        await self._until_created()
        # again: another update that waited too may have added the same id or name meanwhile
        self._check_authorize(inp)
        self.graph.add(
            {i.work_item_id: i.dependencies for i in inp.items},
            {i.work_item_id: i.contract.dependency_strategy for i in inp.items},
            inp.edges,
        )
        for name, contract in inp.contracts.items():  # its items name them after continue-as-new
            self.state.spec.contracts.setdefault(name, contract)
        self._authorize_initial(len(self.unauthorized))  # what the new items may depend on
        cids = []
        for spec in inp.items:
            item = self.state.items[spec.work_item_id] = ItemState(spec=spec)
            self.attention.add(spec.work_item_id)
            cids.append(self._authorize(item))
        # Edges into WorkItems authorized before: kept in their spec (the state that travels
        # through continue-as-new) and recorded by the Authority, which checks them on offers.
        added: dict[str, list[str]] = {}
        for dep, dependent in inp.edges:
            added.setdefault(dependent, []).append(dep)
        for wid, deps in added.items():
            item = self.state.items[wid]
            new = [d for d in dict.fromkeys(deps) if d not in item.spec.dependencies]
            if not new:
                continue  # edges it has already: nothing to record
            item.spec = item.spec.model_copy(
                update={"dependencies": [*item.spec.dependencies, *new]}
            )
            cids.append(
                self._intent(
                    CommandType.WORK_ADD_DEPENDENCIES,
                    {"work_item_id": wid, "dependencies": new},
                    ("dependencies", wid),
                )
            )
        await workflow.wait_condition(lambda: all(c in self.intent_verdicts for c in cids))
        return SubmitCommandsResult(verdicts=[self.intent_verdicts[c] for c in cids])

    async def _until_created(self) -> None:
        """Wait until the Authority holds the Mission (an update sent with the workflow's
        start runs before ``run`` has sent ``mission.create``).

        Raises:
            ApplicationError: ``mission_closed``, the run ended without creating it."""
        await workflow.wait_condition(lambda: self.state.created or self.state.status != "running")
        if not self.state.created:
            raise _refuse(
                RejectionCode.MISSION_CLOSED,
                f"the Mission is {self.state.status}: {self.state.end_reason}",
            )

    @authorize_work.validator
    def _check_authorize(self, inp: AuthorizeWorkInput) -> None:
        if self.state.status != "running":
            raise _refuse(RejectionCode.MISSION_CLOSED, f"the Mission is {self.state.status}")
        check_new_inputs(self.state, inp.items)  # what continue-as-new could not carry
        dup = first_duplicate([i.work_item_id for i in inp.items])
        if dup is not None:  # the later copy would replace the first (MW-10.4-c)
            raise _refuse(RejectionCode.DUPLICATE_ID, f"WorkItem {dup} is given twice")
        trial = WorkGraph.from_wire(self.graph.to_wire())
        try:  # cycles, self-loops, unknown and duplicate ids (MW-10.4-c)
            trial.add({i.work_item_id: i.dependencies for i in inp.items}, edges=inp.edges)
        except GraphError as exc:
            raise _refuse(exc.rejection.code, str(exc)) from None
        for name, contract in inp.contracts.items():
            if self.state.spec.contracts.get(name, contract) != contract:
                raise _refuse(
                    "contract_name_taken",
                    f"the Mission's contract {name!r} is "
                    "another contract: give this one another name",
                )
        archived_deps = [d for i in inp.items for d in i.dependencies if d in self.state.archived]
        archived_deps += [dep for dep, _ in inp.edges if dep in self.state.archived]
        if archived_deps:  # its offer would go without the dependency's Artifacts
            raise _refuse(
                "archived_dependency",
                f"WorkItem {archived_deps[0]} is archived (its "
                "details left the Mission's state past its size budget): new work "
                "cannot depend on it",
            )
        for dep, dependent in inp.edges:
            if dependent in self.state.archived:
                raise _refuse(
                    RejectionCode.NOT_OPEN,
                    f"WorkItem {dependent} is "
                    f"{self.state.archived[dependent].value}: edges only go into an "
                    "open WorkItem",
                )
            item = self.state.items.get(dependent)
            if (
                item is not None
                and dep not in item.spec.dependencies
                and (item.state is not WorkItemState.OPEN or item.offer_pending or item.selecting)
            ):  # no agent may hold work that a new edge says cannot start yet
                raise _refuse(
                    RejectionCode.NOT_OPEN,
                    f"WorkItem {dependent} is {item.state.value}"
                    + (" (being offered)" if item.state is WorkItemState.OPEN else "")
                    + ": edges only go into an open WorkItem",
                )

    @workflow.signal(name=REPORT_PROGRESS_SIGNAL)
    def report_progress(self, sig: ProgressSignal) -> None:
        """Structured progress from the owner (MW-11.4-a), shown by the ``status`` query."""
        item = self.state.items.get(sig.work_item_id)
        if item is None:
            return
        if item.owner == sig.agent_id:
            item.last_progress = sig.report
        elif needs_confirmation(item, sig):  # a claim: the Authority's log decides (issue 29)
            key = f"started:{item.work_item_id}"
            if key not in self.tasks:
                self.tasks[key] = asyncio.create_task(self._confirm_start(key, item, sig))

    async def _confirm_start(self, key: str, item: ItemState, sig: ProgressSignal) -> None:
        """Read ``item``'s Events from the Authority after an agent said it started, and show
        its progress if the Authority names it the active owner (:mod:`._started`)."""
        try:
            await self._sync(item)
        except FailureError:  # cancelled as the Mission ends: the claim stays unconfirmed
            return
        else:
            if confirmed(item, sig) and item.last_progress is None:
                item.last_progress = sig.report
        finally:
            self.tasks.pop(key, None)
            # the plan skipped the item while it was being read: look at it again
            self.attention.add(item.work_item_id)
            self.wake = True

    @workflow.query
    def status(self) -> MissionStatus:
        """Per item: state, owner, epoch, lease, attempts, current detail and small outputs
        (:func:`~._status.mission_status`)."""
        return mission_status(self.state, self._now())

    # ------------------------------------------------------------------------ the end

    async def _end(self, status: str, command: str, reason: str) -> None:
        """Send the Mission's end to the Authority and take its status. An end already under
        way (Temporal's cancel request arrived meanwhile) is finished instead."""
        if self.ending is None:
            self.ending = (status, reason)
            for key, task in list(self.tasks.items()):
                if not key.startswith("child:"):
                    task.cancel()  # offers and executions in flight: the Authority ends them
            body: dict[str, Any] = {"mission_id": self.state.spec.mission_id}
            if reason:
                body["reason"] = reason
            self._intent(command, body, ("mission_end", ""))
        await self._flush()
        self.state.status, self.state.end_reason = self.ending
        self._publish_status()

    def _draining(self) -> bool:
        """Temporal suggests continuing as new: nothing more is started."""
        return workflow.info().is_continue_as_new_suggested() or self.ending is not None

    def _can_continue_as_new(self) -> bool:
        return (
            workflow.info().is_continue_as_new_suggested()
            and not self.tasks
            and not self.queue
            and not any(it.running or it.reviewing for it in self.state.items.values())
        )

    def _publish_status(self) -> None:
        key = (self.changes, self.state.status, len(self.state.items) + len(self.state.archived))
        if self.counted == key:
            return  # nothing changed: counting 10,000 WorkItems in every task is not free
        self.counted = key
        # a Mission that ended has nothing open: its failed items are failed for good
        n = open_count(self.state) if self.state.status == "running" else 0
        now = self._now()
        if search_attributes_due(self.published, self.published_at, self.state.status, n, now):
            self.published, self.published_at = (self.state.status, n), now
            workflow.upsert_search_attributes(
                [
                    MISSION_ID.value_set(self.state.spec.mission_id),
                    GROUP_ID.value_set(self.state.spec.group_id),
                    MISSION_STATUS.value_set(self.state.status),
                    OPEN_WORK_ITEMS.value_set(n),
                ]
            )
        c = counts(self.state)
        workflow.set_current_details(
            f"**{self.state.status}** — "
            + ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))
            + waiting_lines(self.state, now)
        )

    def _result(self) -> MissionResult:
        """The Mission's result, trimmed (:func:`trim`) until its JSON is at most
        :data:`RESULT_BUDGET` bytes: a result over 2 MiB would fail the workflow's completion.
        A failed or cancelled Mission of thousands of unfinished WorkItems goes further: those
        that never ran, then all, are given by their state only (``MissionResult.archived``)."""
        for budget in (STATE_BUDGET, STATE_BUDGET // 8, 0):
            trim(self.state, budget)
            result = self._result_of_state()
            if len(result.model_dump_json()) <= RESULT_BUDGET:
                return result
        result = self._result_of_state(lambda it: it.attempts == 0 and it.owner is None)
        if len(result.model_dump_json()) <= RESULT_BUDGET:
            return result
        return self._result_of_state(lambda it: True)

    def _result_of_state(
        self, by_state_only: Callable[[ItemState], bool] = lambda it: False
    ) -> MissionResult:
        status = self.state.status if self.state.status != "running" else "failed"
        brief = {w: it.state for w, it in self.state.items.items() if by_state_only(it)}
        return MissionResult(
            mission_id=self.state.spec.mission_id,
            group_id=self.state.spec.group_id,
            status=status,
            event_range=(self.state.first_seq, self.state.last_seq)
            if self.state.first_seq is not None and self.state.last_seq is not None
            else None,
            items=[
                ItemResult(
                    work_item_id=w,
                    state=it.state,
                    owner=it.owner,
                    ownership_epoch=it.ownership_epoch,
                    attempts=it.attempts,
                    outputs=it.outputs,
                    artifacts=it.artifacts,
                    evidence=it.evidence,
                    review=[st.model_dump(mode="json") for st in it.review],
                    review_of=it.review_of,
                    detail=it.detail,
                    error=it.error,
                    dependencies=it.spec.dependencies,
                    trimmed=it.trimmed,
                )
                for w, it in self.state.items.items()
                if w not in brief
            ],
            archived={**self.state.archived, **brief},
            reason=self.state.end_reason,
        )
