"""Offering and running WorkItems, as a mixin of the Mission workflow: ``select_candidates``
ranks agents and makes the offers (MW-10.3-b/c/f); ``execute_work_item`` runs an item on its
owner's task queue under the lease the Authority granted (MW-11.3-b), and its outcome is
applied — submitted (→ review), paused, blocked, failed, or the lease lost (MW-11.5-a).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from ..protocol import WorkItemState
    from ..protocol.mission import (
        CommandVerdict,
        ExecuteWorkItemInput,
        OfferSlot,
        OutcomeKind,
        SelectCandidatesBatch,
        SelectCandidatesBatchResult,
        SelectCandidatesInput,
        WorkOutcome,
        agent_task_queue,
    )
    from ._state import ItemState, apply_events, name_items

if TYPE_CHECKING:
    from ._state import MissionState

S = WorkItemState
#: The longest wait between two rankings of a WorkItem nobody could take, milliseconds.
MAX_IDLE_BACKOFF_MS = 30_000
#: Retries of the coordinator's own activities (the Authority may be briefly unreachable).
SUBMIT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1),
                           maximum_interval=timedelta(seconds=10))  # fmt: skip


class WorkMixin:
    """The offer and execution part of :class:`~missionweave.workflows.MissionWorkflow`."""

    if TYPE_CHECKING:
        s: MissionState
        tasks: dict[str, asyncio.Task[None]]
        wake: bool

        def _now(self) -> int: ...

        def _command_id(self) -> str: ...

        def _applied_intent(self, v: CommandVerdict, purpose: tuple[str, str]) -> None: ...

        async def _review(self, item: ItemState) -> None: ...

    async def _select_and_offer(self, wanted: list[tuple[str, list[str]]]) -> None:
        """Rank agents for the wanted WorkItems and offer each to its best-ranked (or, urgent,
        to a bounded candidate set; MW-10.3-b/c) in one activity, ``select_candidates``."""
        policy = self.s.spec.offer_policy
        now = self._now()
        requests = []
        for wid, exclude in wanted:
            item = self.s.items[wid]
            # an agent may answer the offer (seen on the Group stream) before this workflow
            # has the verdict: while it is in flight, its validators leave it to the Authority
            item.selecting = item.offer_pending = True
            urgent = item.spec.contract.urgency.value == "urgent"
            requests.append(SelectCandidatesInput(
                group_id=self.s.spec.group_id, work_item_id=wid,
                required_capabilities=item.spec.contract.required_capabilities,
                exclude=sorted(set(exclude) | set(item.tried) | set(item.excluded)),
                limit=policy.candidate_set_size if urgent else 1,
                roles=["reviewer", "worker"] if item.review_of else ["worker"],
                offer=OfferSlot(command_id=self._command_id(), issued_at_ms=now,
                                expires_at_ms=now + policy.offer_ttl_ms)))  # fmt: skip
        try:
            ranked = await workflow.execute_activity(
                "select_candidates", SelectCandidatesBatch(requests=requests),
                result_type=SelectCandidatesBatchResult,
                start_to_close_timeout=timedelta(seconds=30), retry_policy=SUBMIT_RETRY,
                summary=f"rank agents for and offer {name_items([w for w, _ in wanted])}",
            )  # fmt: skip
        finally:
            for wid, _ in wanted:
                self.s.items[wid].selecting = False
                self.s.items[wid].offer_pending = False
        now = self._now()
        for (wid, _), res in zip(wanted, ranked.results, strict=True):
            item = self.s.items[wid]
            cands = [c.agent_id for c in res.candidates]
            if res.verdict is not None:  # the offer the Authority recorded is what counts
                cands = next((list(e.body.get("candidates") or cands) for e in res.verdict.events
                              if e.type == "work.offered"), cands)  # fmt: skip
            if not cands and item.tried:  # everyone tried: start over after a pause
                item.tried = []
            if not cands or res.verdict is None:
                item.offer_pending = False
                # doubling while nobody can take it: an unattended Mission's history grows
                # by a few events per try, not by thousands an hour
                wait = max(1000, policy.reoffer_backoff_ms) << min(item.empty_rankings, 5)
                item.empty_rankings += 1
                item.retry_at_ms = now + min(wait, MAX_IDLE_BACKOFF_MS)
                item.detail = "no eligible agent"
                if res.saturated:  # offered again as soon as one of this Mission's runs ends
                    item.detail = "every capable agent is busy"
                    if wid not in self.s.awaiting_room:
                        self.s.awaiting_room.append(wid)
                continue
            item.retry_at_ms = None
            item.empty_rankings = 0
            item.tried = [*item.tried, *cands][-policy.max_sequential_offers * 4 :]
            item.detail = "offered to " + ", ".join(cands)
            self._applied_intent(res.verdict, ("offer", wid))

    async def _execute(self, item: ItemState) -> None:
        """Run the WorkItem on its owner's task queue and apply the outcome."""
        assert item.lease is not None and item.owner is not None
        c = item.spec.contract
        item.running = True
        try:
            outcome = await workflow.execute_activity(
                "execute_work_item",
                ExecuteWorkItemInput(
                    group_id=self.s.spec.group_id, mission_id=self.s.spec.mission_id,
                    work_item_id=item.work_item_id, contract=c, input=item.spec.input,
                    lease=item.lease, checkpoint=item.checkpoint, attempt=item.attempts + 1,
                    dependency_artifacts={d: self.s.items[d].artifacts
                                          for d in item.spec.dependencies
                                          if d in self.s.items and self.s.items[d].artifacts}),
                result_type=WorkOutcome,
                task_queue=agent_task_queue(item.owner),
                heartbeat_timeout=timedelta(milliseconds=c.timeouts.lease_ms),
                start_to_close_timeout=timedelta(
                    milliseconds=c.budget.wall_clock_ms or 24 * 3_600_000),
                retry_policy=RetryPolicy(maximum_attempts=1),
                summary=f"{item.work_item_id} by {item.owner} (epoch {item.ownership_epoch})",
            )  # fmt: skip
        except ActivityError as exc:  # heartbeat timeout: the lease is lost (MW-11.5-a)
            outcome = WorkOutcome(kind=OutcomeKind.LEASE_LOST, error=str(exc.cause or exc))
        finally:
            item.running = False
            self.tasks.pop(item.work_item_id, None)
            for wid in self.s.awaiting_room:  # a slot is free: offer those waiting for one
                self.s.items[wid].retry_at_ms = None
            self.s.awaiting_room.clear()
        if outcome.verdict is not None and outcome.verdict.status != "rejected":
            apply_events(self.s, outcome.verdict.events)
        item.detail = f"{outcome.kind.value}" + (f": {outcome.error}" if outcome.error else "")
        if outcome.kind is OutcomeKind.SUBMITTED and item.state is S.SUBMITTED:
            item.outputs, item.artifacts = outcome.outputs, outcome.artifacts
            item.evidence = outcome.evidence
            await self._review(item)
        elif outcome.kind is OutcomeKind.LEASE_LOST and item.state is S.ACTIVE:
            item.tried = [item.owner] if item.owner else []
            item.lease = None
            item.owner = None  # re-offer with a higher epoch; the Authority closes the owner
        self.wake = True


__all__ = ["SUBMIT_RETRY", "WorkMixin"]
