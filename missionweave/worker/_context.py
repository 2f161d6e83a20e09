"""``WorkContext``: what a handler sees of its WorkItem, its lease and the runtime
(docs/design.md §4.6).

Each execution slot gets its own context — ids, lease, checkpoint, usage meters and
idempotency keys are never shared between slots (MW-11.1-e).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any, BinaryIO, NoReturn

from temporalio import activity

from ..artifacts import ArtifactRef
from ..protocol import (
    Classification,
    Evidence,
    ProgressReport,
    WorkContract,
    attempt_key,
    idempotency_key,
)
from ..protocol.temporal_contract import (
    CommandVerdict,
    ExecuteWorkItemInput,
    LeaseGrant,
    WorkItemSpec,
)
from ._authorize import UpdateRetry, authorize_work
from ._errors import Blocked, Pause
from ._fence import TOOL_CALLS_KEY, FencedActions, tool_call_counters
from ._lease import LeaseSession, UsageMeter
from ._leased_artifacts import LeasedArtifacts
from ._reporting import ProgressHook, ProgressReporter
from ._tokens import rotate_capability_token

log = logging.getLogger(__name__)


def heartbeat(details: dict[str, Any]) -> None:
    """Temporal heartbeat with ``details`` when running inside an activity (else nothing)."""
    if activity.in_activity():
        activity.heartbeat(details)


class WorkContext(FencedActions):
    """The handler's view of one execution.

    Attributes:
        agent_id: this agent.
        group_id: the Group whose log records the WorkItem.
        mission_id: the Mission.
        work_item_id: the WorkItem.
        contract: its work contract (MW-10.1-a).
        attempt: the execution attempt (1 for the first).
        dependency_artifacts: per verified dependency of this WorkItem, the hashes of the
            Artifacts it submitted (read them with :meth:`fetch`).
        usage: this slot's usage meters; deltas go with every renewal and report.
        logger: a logger whose records carry the ids.

    Args:
        work: the activity input.
        session: this slot's lease session.
        on_progress: also send each progress report here.
        agent_card_version: the agent's Agent Card version (recorded in manifests).
        capability_versions: capability id → version of the handler running (recorded in
            manifests unless :meth:`publish` is given others).
    """

    def __init__(
        self,
        work: ExecuteWorkItemInput,
        session: LeaseSession,
        *,
        on_progress: ProgressHook | None = None,
        agent_card_version: int = 0,
        capability_versions: Mapping[str, str] | None = None,
    ) -> None:
        self._work = work
        self._session = session
        self.capability_versions: dict[str, str] = dict(capability_versions or {})
        self._published: list[str] = []
        self.dependency_artifacts: dict[str, list[str]] = {
            k: list(v) for k, v in work.dependency_artifacts.items()
        }
        self._tool_calls = tool_call_counters(work.checkpoint)
        handler_state = {k: v for k, v in (work.checkpoint or {}).items() if k != TOOL_CALLS_KEY}
        self._checkpoint = handler_state or None
        self._pause_reason: str | None = None
        self.agent_id = session.actor.agent_id
        self.group_id = work.group_id
        self.mission_id = work.mission_id
        self.work_item_id = work.work_item_id
        self.contract: WorkContract = work.contract
        self.attempt = work.attempt
        self.usage: UsageMeter = session.usage
        self.logger = logging.LoggerAdapter(
            logging.getLogger("missionweave.handler"),
            {
                "group_id": work.group_id,
                "mission_id": work.mission_id,
                "work_item_id": work.work_item_id,
                "ownership_epoch": session.lease.ownership_epoch,
            },
        )
        self._reporter = ProgressReporter(session, on_progress=on_progress, logger=self.logger)
        self._artifacts = LeasedArtifacts(
            session,
            group_id=work.group_id,
            mission_id=work.mission_id,
            work_item_id=work.work_item_id,
            agent_card_version=agent_card_version,
            logger=self.logger,
        )

    # ---------------------------------------------------------------------------- facts

    @property
    def lease(self) -> LeaseGrant:
        """The current execution lease (its expiry and token follow renewals)."""
        return self._session.lease

    @property
    def ownership_epoch(self) -> int:
        """The ownership epoch this execution runs under (MW-11.3-a)."""
        return self._session.lease.ownership_epoch

    @property
    def capability_token(self) -> dict[str, Any]:
        """The current capability token, bound to the lease (MW-11.3-d): hand it to a tool
        gateway, which checks it with ``POST /v1/capability-tokens/verify``
        (:meth:`AuthorityClient.verify_token`). It follows renewals and
        :meth:`rotate_capability_token`."""
        return self._session.lease.capability_token

    async def rotate_capability_token(self, scope: Iterable[str] | None = None) -> dict[str, Any]:
        """Replace the capability token while the lease stays active (MW-11.3-d): a new secret
        with the same scope, or — given ``scope``, a subset of the current one — a narrower
        token to hand to a less trusted tool. Every earlier token of the lease is refused by
        tool gateways from then on (``POST /v1/capability-tokens/verify``); later renewals
        keep the narrowed scope. Returns the new token, which :attr:`capability_token` is now.

        Raises:
            ValueError: ``scope`` is not a subset of the current scope.
            LeaseLost: the lease is gone or the Authority cannot be reached.
        """
        return await rotate_capability_token(self._session, scope)

    @property
    def checkpoint(self) -> dict[str, Any] | None:
        """The last durable checkpoint (from the Authority, or the last :meth:`save`), as
        the handler gave it."""
        return self._checkpoint

    def durable(self, state: dict[str, Any]) -> dict[str, Any]:
        """``state`` as a durable checkpoint records it: with the per-tool call counters
        (:meth:`tool_call`) under a reserved key, so that a resumed attempt keys its calls
        as this one did. :meth:`save`, :meth:`pause` and :meth:`block` use it.

        Raises:
            ValueError: ``state`` is empty or uses the reserved key.
        """
        if not isinstance(state, dict) or not state:
            raise ValueError("a checkpoint is a non-empty dict")
        if TOOL_CALLS_KEY in state:
            raise ValueError(f"{TOOL_CALLS_KEY!r} is reserved in a checkpoint")
        if not self._tool_calls:
            return dict(state)
        return {**state, TOOL_CALLS_KEY: dict(self._tool_calls)}

    def idempotency_key(self, op_id: str) -> str:
        """The stable key of external operation ``op_id`` under this ownership epoch: the same
        in every retry and resume of this epoch, different after a reassignment and in every
        other Group (MW-16-f). The key version is the epoch's (``mwk2_`` folds in the Group;
        an epoch begun under ``mwk1_`` keeps it, docs/spec/READINGS.md).

        Raises:
            ValueError: ``op_id`` is empty.
        """
        return idempotency_key(
            self.mission_id,
            self.work_item_id,
            self.ownership_epoch,
            op_id,
            key_version=self._work.key_version,
            group_id=self.group_id,
        )

    def attempt_key(self, op_id: str, n: int) -> str:
        """A deterministic key for attempt ``n`` (≥ 1) of operation ``op_id``, for external APIs
        that need a fresh key per retry (MW-11.4-e).

        Raises:
            ValueError: ``op_id`` is empty or ``n`` < 1.
        """
        return attempt_key(self.idempotency_key(op_id), n)

    def evidence(
        self,
        criterion: str,
        result: str = "pass",
        *,
        method: str,
        summary: str = "",
        artifacts: Iterable[str] = (),
        subject: str | None = None,
    ) -> Evidence:
        """Evidence for one acceptance criterion, with subject, producer and time filled in
        (MW-13.2-c). ``summary`` is a short factual statement, never a reasoning transcript.
        ``subject`` defaults to this WorkItem; a reviewer names the WorkItem it reviews.

        Raises:
            pydantic.ValidationError: ``result`` is not pass/fail/inconclusive, or the summary is
                over 2,000 characters.
        """
        return Evidence(
            subject=subject or self.work_item_id,
            criterion=criterion,
            method=method,
            result=result,
            producer=self.agent_id,
            timestamp_ms=self._session.clock(),
            artifacts=list(artifacts),
            summary=summary,
        )

    # ------------------------------------------------------------------------ artifacts

    @property
    def published(self) -> list[str]:
        """Hashes of the Artifacts :meth:`publish` registered in this execution, in order;
        ``work.submit`` carries them (with ``Submission.artifacts``)."""
        return list(self._published)

    async def publish(
        self,
        data: bytes | BinaryIO | os.PathLike[str],
        media_type: str,
        *,
        schema_id: str | None = None,
        sources: Iterable[str] = (),
        classification: Classification | str = Classification.INTERNAL,
        tool_versions: Mapping[str, str] | None = None,
        model_versions: Mapping[str, str] | None = None,
        capability_versions: Mapping[str, str] | None = None,
        deliverable: bool = True,
    ) -> ArtifactRef:
        """Publish an Artifact produced by this WorkItem (MW-13.1-a/b/c).

        Stores the content under its SHA-256 in the Group's namespace of the artifact store —
        through a write the Authority grants under the current lease; the agent holds no
        store credential (content lives outside the event log) — signs its manifest — every
        MW-13.1-b field: hash, media type, schema, this agent and its Agent Card version,
        Mission / Group / WorkItem, ``sources``, tool / model / capability versions, time,
        classification, size, URI — and has the
        Authority record ``artifact.published`` under the current lease (MW-11.3-c). The hash
        is added to the submission's artifacts automatically.

        Args:
            data: the content: bytes, a binary stream (read once, in bounded memory) or a path.
            media_type: IANA media type, e.g. ``"application/json"``.
            schema_id: the content's schema id (a deliverable's ``schema_id``: the review
                validates JSON content against it), or ``None``.
            sources: hashes of the Artifacts it was derived from (provenance, MW-13.1-c).
            classification: data classification (``public``, ``internal``, ``confidential``,
                ``restricted``).
            tool_versions: tool → version used.
            model_versions: model → version used.
            capability_versions: capability id → version (default: the running handler's).
            deliverable: ``True`` (default): the hash joins the submission's artifacts (and so
                needs Evidence referencing it). ``False``: an Artifact of this WorkItem that is
                not part of what it submits — a conversation checkpoint, the input of WorkItems
                it authorizes — recorded with the Authority all the same.

        Returns:
            The reference: hash (the identity), size in bytes, media type, retrieval URI.

        Raises:
            LeaseLost: the Authority refused because the lease is no longer this slot's — the
                write grant or the registration — or stayed unreachable until the lease's
                grace deadline (publishing is externally visible: it waits for a confirmed
                lease, MW-11.5-d).
            PublishRejected: any other refusal (``invalid_manifest``, ``cross_mission_content``,
                …); the bytes stay in the store.
            ArtifactAccessDenied: the Authority granted no write for another reason.
            AuthorityUnavailable: only for a stream (``BinaryIO``, read once) whose
                registration did not reach the Authority (publishing again is safe); bytes and
                paths are published again until the grace deadline.
            ArtifactStoreError: the transfer failed.
            ValueError: ``classification`` is unknown or a source is not a SHA-256 hex hash.
        """
        done = await self._artifacts.publish(
            data,
            media_type,
            schema_id=schema_id,
            sources=list(sources),
            classification=Classification(classification),
            tool_versions=tool_versions,
            model_versions=model_versions,
            capability_versions=(
                self.capability_versions if capability_versions is None else capability_versions
            ),
        )
        if deliverable and done.ref.hash not in self._published:
            self._published.append(done.ref.hash)
        self.logger.info("published %s (%s, %d bytes)", done.ref.hash, media_type, done.ref.size)
        return done.ref

    async def fetch(self, content_hash: str) -> bytes:
        """The content of Artifact ``content_hash``, its SHA-256 verified (MW-13.1-d): for
        inputs (``contract.inputs``, :attr:`dependency_artifacts`).

        The Authority grants the read after its membership and context checks: the Artifact
        must be held by this Group (content is addressed per Group: knowing a hash grants
        nothing) and usable in this Mission — published in it, promoted to an Organization
        Artifact, or an external input never published in any Mission (MW-13.3-d).

        Raises:
            ValueError: ``content_hash`` is not 64 lowercase hex characters.
            ArtifactNotFound: the Group holds no such Artifact.
            ArtifactAccessDenied: the Authority refused (``cross_mission_content``, …).
            ArtifactIntegrityError: the bytes do not hash to ``content_hash``.
            ArtifactStoreError: the transfer failed.
            AuthorityUnavailable: the Authority could not be reached.
        """
        return await self._artifacts.fetch(content_hash)

    async def _publish_input(self, data: bytes, media_type: str) -> str:
        """Publish ``data`` as an Artifact of this WorkItem that is not one of its deliverables
        (the input of WorkItems it authorizes, :func:`~._input.offload_inputs`); its hash."""
        ref = await self.publish(data, media_type, deliverable=False)
        return ref.hash

    # -------------------------------------------------------------------------- reports

    async def save(
        self, state: dict[str, Any], *, phase: str = "checkpoint"
    ) -> CommandVerdict | None:
        """Record a durable checkpoint: Temporal heartbeat details (a hint for the next
        attempt) and a signed ``progress.report`` carrying ``checkpoint=state``, which the
        Authority stores as the resume point of a reassignment (MW-11.5-a).

        The report is the runtime's own (Implements MW-11.4-b): the last structured report
        (milestones, next checkpoint, blockers, Evidence references) under ``phase``, with
        the current estimate of the remaining time.

        While the Authority is unreachable the report is signed with the bounded-offline
        binding and buffered durably, the handler goes on until the lease's grace deadline,
        and the buffer is reconciled before anything else once the Authority answers
        (MW-11.5-c/e/f).

        Returns:
            The Authority's verdict on the report — a refusal (``budget_exceeded`` when the
            usage it charges would pass the budget, MW-11.5-j) charged nothing and kept no
            checkpoint — or ``None`` when it was buffered offline.

        Raises:
            ValueError: ``state`` is empty.
            LeaseLost: the Authority says the lease is gone, or stayed unreachable past the
                grace deadline: stop now.
        """
        durable = self.durable(state)
        self._checkpoint = dict(state)
        heartbeat(self.heartbeat_details())
        return await self._reporter.checkpoint(phase, durable)

    async def report(
        self,
        phase: str,
        *,
        milestones: Iterable[str] = (),
        next_checkpoint: str | None = None,
        blockers: Iterable[str] = (),
        estimate_remaining_ms: int | None = None,
        evidence_refs: Iterable[str] = (),
    ) -> None:
        """Report structured progress (MW-11.4-a, MW-11.4-b): a signed ``progress.report`` to
        the Authority, and the latest report to the Mission workflow when one is reachable.

        Args:
            phase: the current phase, e.g. ``"hashing"``.
            milestones: milestones completed so far.
            next_checkpoint: the next safe point, in words.
            blockers: what stands in the way, if anything.
            estimate_remaining_ms: revised estimate of the remaining time, milliseconds.
            evidence_refs: ids or hashes of Evidence produced so far.

        While the Authority is unreachable the report is buffered as :meth:`save` says.

        Raises:
            LeaseLost: the Authority says the lease is gone, or stayed unreachable past the
                grace deadline.
        """
        report = ProgressReport(
            phase=phase,
            milestones_completed=list(milestones),
            next_checkpoint=next_checkpoint,
            blockers=list(blockers),
            estimate_remaining_ms=estimate_remaining_ms,
            evidence_refs=list(evidence_refs),
        )
        await self._reporter.send(report, checkpoint=None)

    def set_estimate(self, estimate_ms: int | None) -> None:
        """The handler's declared duration of one execution, milliseconds (the runtime calls
        this before the handler starts): the execution's expected end until the handler
        reports an ``estimate_remaining_ms`` of its own."""
        self._reporter.set_estimate(estimate_ms)

    async def report_estimate_change(self) -> bool:
        """Report a materially changed estimate by itself (Implements MW-11.4-b): when the
        expected end has passed and the handler runs on, a ``progress.report`` repeating the
        last structured report with a revised ``estimate_remaining_ms`` (half the time
        elapsed so far). The runtime calls it at each heartbeat. Never raises: a lost lease is
        the heartbeat loop's to handle.

        Returns:
            Whether a revision was reported.
        """
        return await self._reporter.revise()

    def heartbeat_details(self) -> dict[str, Any]:
        """What goes into Temporal heartbeats: ids, lease, last checkpoint (a hint only; the
        durable checkpoint lives in the Authority)."""
        return {
            "work_item_id": self.work_item_id,
            "lease_id": self.lease.lease_id,
            "ownership_epoch": self.ownership_epoch,
            "checkpoint": self._checkpoint and self.durable(self._checkpoint),
        }

    # ------------------------------------------------------------------------- control

    def should_pause(self) -> bool:
        """Whether the runtime asks this handler to stop at its next safe point: the scheduler
        needs the slot, or the worker is shutting down (cooperative preemption, MW-11.3-g).
        Answer with ``return ctx.pause(state)`` (or ``raise Pause(state)``)."""
        if self._pause_reason is not None:
            return True
        return activity.in_activity() and activity.is_worker_shutdown()

    def request_pause(self, reason: str) -> None:
        """Ask the handler to pause at its next safe point (the runtime calls this)."""
        if self._pause_reason is None:
            self.logger.info("pause requested: %s", reason)
            self._pause_reason = reason

    def pause(self, state: dict[str, Any]) -> Pause:
        """The value to return to pause at checkpoint ``state`` (``return ctx.pause(state)``).

        The checkpoint carries the tool call counters (:meth:`durable`).

        Raises:
            ValueError: ``state`` is empty.
        """
        return Pause(self.durable(state))

    def block(self, resolution: dict[str, Any], state: dict[str, Any]) -> NoReturn:
        """Stop because something is needed: ``work.block`` with ``resolution`` and the
        checkpoint ``state`` (MW-11.4-c). Never returns.

        Raises:
            Blocked: always.
            ValueError: ``resolution`` or ``state`` is empty.
        """
        raise Blocked(resolution, self.durable(state))

    async def guard(self) -> None:
        """Call before any external side effect: reconciles buffered progress, then asks the
        Authority (``GET /v1/leases/{id}``) whether the lease is still valid and checks the
        capability token's expiry. Temporal tells a timed-out attempt nothing until its next
        heartbeat, so this is the real fence (MW-11.5-d). While the Authority is unreachable
        it waits for it, until the lease's grace deadline.

        Raises:
            LeaseLost: the lease is gone or could not be confirmed before the grace deadline.
        """
        await self._session.confirm()

    # ----------------------------------------------------------------- the Mission's DAG

    async def authorize_work(
        self,
        items: Iterable[WorkItemSpec],
        edges: Iterable[tuple[str, str]] = (),
        *,
        contracts: Mapping[str, WorkContract] | None = None,
        update_id: str | None = None,
        retry: UpdateRetry | None = None,
    ) -> list[CommandVerdict]:
        """Add WorkItems (and dependency edges) to this Mission while it runs (MW-10.4-a).

        Sends the Mission workflow's ``authorize_work`` update (:class:`AuthorizeWorkInput`)
        through the agent runtime's Temporal client and waits until the Authority has answered
        every ``work.authorize``. Call it before submitting: a new item that a not-yet-started
        item must wait for (an edge into it) only holds that item back once it is added.
        The lease is checked first (:meth:`guard`). The update id is stable for the same
        items and edges under this ownership epoch, so a retry is answered, not applied twice.
        An input over :data:`~missionweave.protocol.MAX_INLINE_INPUT_BYTES` (of its JSON) is
        published as a JSON Artifact of this WorkItem (not a deliverable) and the new item
        carries ``{"$input_artifact": hash}``; the runtime that executes it fetches and
        verifies the content and hands its handler the input itself.

        Args:
            items: the new WorkItems (ids unique in the Group; dependencies on known or new ids).
            edges: extra ``(dependency, dependent)`` pairs between known or new ids, e.g. a new
                item that an existing, not yet started item must wait for.
            contracts: named contracts the items give by ``contract_ref`` (one copy for many
                items); a name the Mission has already must name the same contract.
            update_id: the Temporal update id (default: derived from the ids and edges).
            retry: backoff while Temporal is busy (the 10-updates-in-flight bound) or briefly
                unreachable.

        Returns:
            The Authority's verdicts on the Commands the change produced — one
            ``work.authorize`` per item, in order, first — all ``accepted``.

        Raises:
            LeaseLost: the lease is gone: nothing was sent.
            WorkAuthorizationRejected: the workflow's validator refused the change (``cycle``,
                ``self_loop``, ``unknown_id``, ``duplicate_id``, ``mission_closed``,
                ``mission_inputs_too_large`` — the Mission's unfinished WorkItems carry too
                much inline input; nothing was added), the Authority refused an item (its
                code; ``verdicts`` tells which), or
                Temporal refused or stayed unreachable (``update_error``,
                ``workflow_unreachable``).
            WorkerError: called outside the ``execute_work_item`` activity.
            pydantic.ValidationError: an item is malformed, or names no contract of
                ``contracts``: nothing was sent.
        """
        return await authorize_work(
            self, items, edges, contracts=contracts, update_id=update_id, retry=retry
        )


__all__ = ["ProgressHook", "WorkContext", "heartbeat"]
