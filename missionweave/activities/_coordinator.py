"""The coordinator's activities: what the Mission workflow calls.

Activities are methods on :class:`CoordinatorActivities`, which holds the Authority client, the
coordinator's signing identity and the review checks; :meth:`CoordinatorActivities.activities`
lists them for the coordinator's Worker (:mod:`missionweave.coordinator`). Signing happens here,
never in the workflow (docs/design.md §5). The workflow runs each step through
``workflows._steps.coordinator_activity`` (issue 26): a *local* activity in the coordinator's own
Worker when it is small — idempotent (every Command carries the id the workflow fixed), costing
a marker in the history, not a round trip through a task queue — and a regular activity on the
coordinator's task queue when it carries more than ``LOCAL_STEP_MAX_ITEMS`` WorkItems, or when
its caller says so. A step that raises is retried in the Worker, then after a durable timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from temporalio import activity

from ..artifacts import ArtifactStore
from ..authority.client import AuthorityClient, AuthorityUnavailable, CursorTooOldError
from ..metrics import series, start_counters
from ..protocol import Actor, Command, CommandType, RejectionCode, sign_command
from ..protocol.review_decision import decision_command, verdict_step
from ..protocol.temporal_contract import (
    BatchEntry,
    ChargeParentUsageInput,
    ChargeParentUsageResult,
    CommandVerdict,
    CoordinatorIntent,
    EventSummary,
    ReviewBatch,
    ReviewBatchResult,
    ReviewResult,
    SelectCandidatesBatch,
    SelectCandidatesBatchResult,
    SelectCandidatesInput,
    SelectCandidatesResult,
    SubmitCommandsInput,
    SubmitCommandsResult,
    WorkItemEventsInput,
)
from ._child_usage import charge_parent_usage
from ._metrics import record_ranking, record_review
from ._ranking import capacities, rank
from ._review import Check, SubmissionReview

log = logging.getLogger(__name__)


def _offer_intent(req: SelectCandidatesInput, res: SelectCandidatesResult) -> CoordinatorIntent:
    """The ``work.offer`` to the ranked candidates, recording their selection basis (MW-10.3-f)."""
    assert req.offer is not None
    return CoordinatorIntent(
        command_id=req.offer.command_id,
        type=CommandType.WORK_OFFER,
        issued_at_ms=req.offer.issued_at_ms,
        body={
            "work_item_id": req.work_item_id,
            "candidates": [c.agent_id for c in res.candidates],
            "expires_at_ms": req.offer.expires_at_ms,
            "selection_basis": {
                c.agent_id: c.basis.model_dump(mode="json") for c in res.candidates
            },
        },
    )


#: Refusals that say "not now" (the Authority's bounds), never "no": the step is retried.
WAIT = frozenset({RejectionCode.RATE_LIMITED, RejectionCode.INSUFFICIENT_STORAGE})


class CoordinatorActivities:
    """The Mission workflow's activities.

    Args:
        authority: the Authority client.
        coordinator: the coordinator's identity (its key signs every coordinator Command).
        checks: deterministic review checks by name (MW-13.2-b step 2).
        schemas: JSON Schemas by id, for deliverables and Artifacts that name a schema id
            (step 1).
        artifact_store: the artifact store the agents publish to, where submitted Artifacts
            are verified (step 1); ``None``: a submission with Artifacts fails the review.
    """

    def __init__(
        self,
        authority: AuthorityClient,
        coordinator: Actor,
        *,
        checks: Mapping[str, Check] | None = None,
        schemas: Mapping[str, dict[str, Any]] | None = None,
        artifact_store: ArtifactStore | None = None,
    ) -> None:
        self.authority = authority
        self.coordinator = coordinator
        self.checks = dict(checks or {})
        self.schemas = dict(schemas or {})
        self.artifact_store = artifact_store
        start_counters(series.COORDINATOR)
        self.review = SubmissionReview(
            authority,
            coordinator.agent_id,
            artifact_store=artifact_store,
            checks=self.checks,
            schemas=self.schemas,
        )

    def activities(self) -> list[Callable[..., Awaitable[Any]]]:
        """Every step of this class, bound, as the coordinator's Worker registers them. A new
        step is added here and called from the workflow; the Worker needs no other change."""
        return [
            self.submit_commands,
            self.select_candidates,
            self.review_submissions,
            self.work_item_events,
            self.charge_parent_usage,
        ]

    def _sign(self, group_id: str, intent: Any) -> Command:
        cmd = Command(
            command_id=intent.command_id,
            group_id=group_id,
            type=intent.type,
            actor=self.coordinator.agent_id,
            issued_at_ms=intent.issued_at_ms,
            membership_epoch=self.coordinator.membership_epochs.get(group_id, 1),
            body=intent.body,
        )
        return sign_command(cmd, self.coordinator.key)

    @activity.defn(name="submit_commands")
    async def submit_commands(self, inp: SubmitCommandsInput) -> SubmitCommandsResult:
        """Sign the workflow's intents and submit the whole batch, in order, in one request.

        The workflow fixes each intent's id and issue time, so a retried activity re-signs
        byte-identical Commands and the Authority answers them idempotently. A
        ``stale_membership_epoch`` refusal of an intent is corrected once (the refusal names the
        current epoch) and that Command is sent again.

        This runs as a *local* activity: one that ran in a workflow task that then failed (an
        ``UnhandledCommand`` race, a crashed coordinator) runs again in the retried task, where
        ``workflow.now()`` — the intent's issue time — has moved on. The re-signed Command then
        differs from the one the Authority already applied (``idempotency_conflict``); the
        original, found in the Group log, is sent again instead so that the workflow gets the
        verdict the Authority actually gave (:meth:`_originals`).

        Raises:
            AuthorityUnavailable: the Authority cannot be reached, or asked to wait
                (``rate_limited``, ``insufficient_storage``): the step is retried, the
                Commands it got in answered again by their ids.
        """
        return await self._submit(inp)

    async def _submit(self, inp: SubmitCommandsInput) -> SubmitCommandsResult:
        cmds = [
            e.command if e.command is not None else self._sign(inp.group_id, e.intent)
            for e in inp.entries
        ]
        results = [r.verdict() for r in await self.authority.submit_many(cmds)]
        redo = [
            i
            for i, (e, v) in enumerate(zip(inp.entries, results, strict=True))
            if e.intent is not None
            and v.rejection is not None
            and v.rejection.code == RejectionCode.STALE_MEMBERSHIP_EPOCH
        ]
        if redo:
            current = results[redo[0]].rejection.detail.get("current")  # type: ignore[union-attr]
            if isinstance(current, int):
                self.coordinator.membership_epochs[inp.group_id] = current
                again = await self.authority.submit_many(
                    [self._sign(inp.group_id, inp.entries[i].intent) for i in redo]
                )
                for i, r in zip(redo, again, strict=True):
                    results[i] = r.verdict()
        conflicts = {
            cmds[i].command_id: i
            for i, (e, v) in enumerate(zip(inp.entries, results, strict=True))
            if e.intent is not None
            and v.rejection is not None
            and v.rejection.code == RejectionCode.IDEMPOTENCY_CONFLICT
        }
        if conflicts:
            found = await self._originals(
                inp.group_id, {cid: cmds[i] for cid, i in conflicts.items()}
            )
            if found:
                repeated = await self.authority.submit_many(list(found.values()))
                for cid, r in zip(found, repeated, strict=True):
                    results[conflicts[cid]] = r.verdict()
        wait = next(
            (v.rejection for v in results if v.rejection and v.rejection.code in WAIT), None
        )
        if wait is not None:  # the Authority's bounds, not a verdict on the work (issue 37)
            raise AuthorityUnavailable(f"the Authority asks to wait: {wait.code}: {wait.reason}")
        return SubmitCommandsResult(verdicts=results)

    async def _submit_by_group(
        self, intents: Mapping[str, list[tuple[int, CoordinatorIntent]]]
    ) -> list[tuple[int, CommandVerdict]]:
        """Sign and submit each Group's intents in one request; ``(position, verdict)`` pairs,
        the positions as given."""
        out: list[tuple[int, CommandVerdict]] = []
        for group_id, entries in intents.items():
            done = await self._submit(
                SubmitCommandsInput(
                    group_id=group_id, entries=[BatchEntry(intent=i) for _, i in entries]
                )
            )
            out += [(n, v) for (n, _), v in zip(entries, done.verdicts, strict=True)]
        return out

    async def _originals(
        self, group_id: str, wanted: Mapping[str, Command], *, pages: int = 20, page: int = 1000
    ) -> dict[str, Command]:
        """The signed Commands the Authority accepted under ``wanted``'s ids, read from the
        newest ``pages`` × ``page`` Events of the Group log (an accepted Command's first Event
        carries it whole). Only the same decision is taken for the original: same actor, type,
        WorkItem and Mission (the bodies may differ in times, e.g. review Evidence)."""
        found: dict[str, Command] = {}
        upper, _ = await self.authority.head(group_id)
        for _ in range(pages):
            if upper <= 0 or len(found) == len(wanted):
                break
            after = max(0, upper - page)
            try:
                events = await self.authority.events(group_id, after, upper - after)
            except CursorTooOldError:
                break
            for ev in events:
                new = wanted.get(ev.command_id or "")
                if new is None or ev.command is None or ev.command_id in found:
                    continue
                old = Command.model_validate(ev.command)
                if (old.actor, old.type) == (new.actor, new.type) and all(
                    old.body.get(k) == new.body.get(k) for k in ("work_item_id", "mission_id")
                ):
                    found[new.command_id] = old
            upper = after
        if len(found) < len(wanted):
            log.warning("idempotency conflict unresolved: %s", sorted(set(wanted) - set(found)))
        return found

    @activity.defn(name="charge_parent_usage")
    async def charge_parent_usage(self, inp: ChargeParentUsageInput) -> ChargeParentUsageResult:
        """Charge a child Mission's forwarded usage to its parent in another Group, once per
        ``mission.usage_forwarded`` Event (:func:`._child_usage.charge_parent_usage`;
        MW-11.5-i, MW-10.4-d).

        Raises:
            AuthorityUnavailable: the Authority cannot be reached (the step is retried).
        """
        return await charge_parent_usage(self.authority, self._submit, inp)

    @activity.defn(name="work_item_events")
    async def work_item_events(self, inp: WorkItemEventsInput) -> list[EventSummary]:
        """The Events of one WorkItem after ``inp.after_sequence``, in log order, as the
        workflow folds them: what the Authority holds when an activity's result was lost
        (a killed agent, a timed-out execution). Reads the Group log onward in pages.

        Raises:
            AuthorityUnavailable: the Authority cannot be reached (the step is retried).
        """
        out: list[EventSummary] = []
        after = inp.after_sequence
        head, _ = await self.authority.head(inp.group_id)
        while after < head:
            page = await self.authority.events(inp.group_id, after, 1000)
            if not page:
                break
            out += [EventSummary.of(e) for e in page if e.work_item_id == inp.work_item_id]
            after = page[-1].seq
        return out

    @activity.defn(name="select_candidates")
    async def select_candidates(self, inp: SelectCandidatesBatch) -> SelectCandidatesBatchResult:
        """Rank agents for each request (MW-10.3-b/f; see :mod:`._ranking`): capability
        match, roles, an open session, room per Presence (less the offers made earlier in the
        same batch; none anywhere → ``saturated``), free slots first, per-capability
        reliability, expected cost. Returns the structured selection basis that the offer
        records; no prose. A request with an ``offer`` slot is also offered to its
        candidates: the signed ``work.offer`` Commands of a batch go to the Authority in one
        request, and each result carries its verdict.

        Raises:
            AuthorityUnavailable: the Authority cannot be reached (the step is retried).
        """
        return await self._select_candidates(inp)

    async def _select_candidates(self, inp: SelectCandidatesBatch) -> SelectCandidatesBatchResult:
        out, offers = await self._rank(inp.requests)
        for n, verdict in await self._submit_by_group(offers):
            out[n] = out[n].model_copy(update={"verdict": verdict})
        for res in out:
            record_ranking(res)
        return SelectCandidatesBatchResult(results=out)

    async def _rank(
        self, requests: list[SelectCandidatesInput]
    ) -> tuple[list[SelectCandidatesResult], dict[str, list[tuple[int, CoordinatorIntent]]]]:
        """Rank each request against its Group's agents and Presence (read once per Group);
        the ``work.offer`` intents of the requests with an offer slot and candidates, by Group,
        with their positions."""
        by_group: dict[str, Any] = {}
        out: list[SelectCandidatesResult] = []
        offers: dict[str, list[tuple[int, CoordinatorIntent]]] = {}
        for req in requests:
            if req.group_id not in by_group:
                agents, presence = await asyncio.gather(
                    self.authority.agents(req.group_id), self.authority.presence(req.group_id)
                )
                by_group[req.group_id] = (agents, capacities(agents, presence))
            agents, capacity = by_group[req.group_id]
            res = rank(req, agents, capacity)
            for c in res.candidates:  # a batch spreads over the room Presence shows
                if c.agent_id in capacity:
                    capacity[c.agent_id].take()
            if req.offer is not None and res.candidates:
                offers.setdefault(req.group_id, []).append((len(out), _offer_intent(req, res)))
            out.append(res)
        return out, offers

    @activity.defn(name="review_submissions")
    async def review_submissions(self, inp: ReviewBatch) -> ReviewBatchResult:
        """The coordinator's review steps for each submission, in the spec's order (MW-13.2-b),
        every result kept: (1) ``integrity`` — Artifact integrity against the artifact store
        and the signed manifests, and required output schemas; (2) ``deterministic`` —
        Evidence for every acceptance criterion and the contract's registered checks. The
        reviewer agent's Evidence (step 3), the combined verdict (4) and the human Approval (5)
        follow in the workflow (:mod:`missionweave.workflows._review`) — except when a review's
        ``decision`` is given and steps 1–2 decide (they failed, or passed and nothing else is
        awaited): then this activity appends the verdict and signs ``work.accept_result`` or
        ``work.fail`` under the workflow's fixed id; the decisions of the batch go to the
        Authority in one request (``ReviewResult.verdict``).

        The same request carries the hop's next offers (issue 26): each ``then_offer`` entry
        whose reviews all end in ``work.accept_result`` is ranked like ``select_candidates``
        and its ``work.offer`` follows the decisions (``ReviewBatchResult.offers``); the others
        are not offered (``None``) and the workflow plans them again.

        Raises:
            ApplicationError: a criterion names a check that is not registered (non-retryable).
            ArtifactStoreError: the artifact store failed (retried).
            AuthorityUnavailable: the Authority cannot be reached (retried).
        """
        return await self._review_submissions(inp)

    async def _review_submissions(self, inp: ReviewBatch) -> ReviewBatchResult:
        results: list[ReviewResult] = []
        decided: dict[str, list[tuple[int, CoordinatorIntent]]] = {}
        accepting: set[str] = set()  # reviews whose decision is work.accept_result
        for r in inp.reviews:
            steps = [await self.review.integrity(r), self.review.deterministic(r)]
            passed = all(s.passed for s in steps)
            slot = r.decision
            if slot is not None and (not passed or slot.final_if_passed):
                steps.append(verdict_step(steps))
                type_, body = decision_command(r.work_item_id, steps, passed, slot.issued_at_ms)
                intent = CoordinatorIntent(
                    command_id=slot.command_id,
                    type=type_,
                    body=body,
                    issued_at_ms=slot.issued_at_ms,
                )
                decided.setdefault(r.group_id, []).append((len(results), intent))
                if passed:
                    accepting.add(r.work_item_id)
            results.append(ReviewResult(steps=steps, passed=passed))
        # the dependents the accepted results make eligible: ranked now, offered in the same
        # request as the decisions, after them (the Authority checks the dependencies in order)
        due = [k for k, o in enumerate(inp.then_offer) if set(o.after) <= accepting]
        ranked, offers = await self._rank([inp.then_offer[k].request for k in due])
        n_reviews = len(results)
        for group_id, entries in offers.items():
            decided.setdefault(group_id, []).extend((n_reviews + n, i) for n, i in entries)
        for n, verdict in await self._submit_by_group(decided):
            if n < n_reviews:
                results[n] = results[n].model_copy(update={"verdict": verdict})
            else:
                k = n - n_reviews
                ranked[k] = ranked[k].model_copy(update={"verdict": verdict})
        for result in results:
            record_review(result)
        for res in ranked:
            record_ranking(res)
        made: list[SelectCandidatesResult | None] = [None] * len(inp.then_offer)
        for k, res in zip(due, ranked, strict=True):
            made[k] = res
        return ReviewBatchResult(results=results, offers=made)
