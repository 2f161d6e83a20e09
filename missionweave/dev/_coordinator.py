"""The coordinator process: hosts the ``Mission`` workflow and its activities.

``missionweave coordinator`` runs :func:`run_coordinator`; tests and the embedded stack call
:func:`coordinator_worker` to get a ``Worker`` they run inside ``async with``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker

from ..activities import Check, CoordinatorActivities
from ..artifacts import ArtifactStore
from ..authority.client import AuthorityClient
from ..metrics import series, serving_metrics, unwatch, watch
from ..protocol import Actor
from ..protocol.temporal_contract import COORDINATOR_TASK_QUEUE, MISSION_WORKFLOW_TYPE
from ..telemetry import worker_interceptors
from ..workflows import MissionWorkflow

log = logging.getLogger(__name__)


#: Seconds between two counts of the Missions by status (:class:`MissionCounts`).
MISSION_COUNT_INTERVAL_S = 15.0
#: The MissionStatus values counted.
MISSION_STATUSES = ("running", "completed", "failed", "cancelled")


class MissionCounts:
    """The ``missionweave_coordinator_missions`` gauge: Missions by ``MissionStatus``, counted
    in Temporal's visibility store every :data:`MISSION_COUNT_INTERVAL_S` by a task of the
    coordinator's process (visibility is eventually consistent; so is the gauge).

    Args:
        client: the coordinator's Temporal client.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.counts: dict[tuple[str, ...], float] = {}

    async def count(self) -> None:
        """Count once now."""
        counts: dict[tuple[str, ...], float] = {}
        for status in MISSION_STATUSES:
            query = f"WorkflowType = '{MISSION_WORKFLOW_TYPE}' AND MissionStatus = '{status}'"
            counts[(status,)] = float((await self.client.count_workflows(query)).count)
        self.counts = counts

    async def run(self) -> None:
        """Count every interval until cancelled; a failed count keeps the last one."""
        watch(series.COORDINATOR_MISSIONS, self, lambda m: m.counts)
        try:
            while True:
                try:
                    await self.count()
                except Exception as exc:  # Temporal away: the next round counts again
                    log.debug("Missions not counted: %r", exc)
                await asyncio.sleep(MISSION_COUNT_INTERVAL_S)
        finally:
            unwatch(series.COORDINATOR_MISSIONS, self)


def count_missions(client: Client) -> asyncio.Task[None] | None:
    """Start :class:`MissionCounts` when this process serves metrics (else ``None``: the
    counts would cost visibility queries for nobody). Cancel the task to stop."""
    if not serving_metrics():
        return None
    return asyncio.create_task(MissionCounts(client).run(), name="mission-counts")


def coordinator_worker(
    client: Client,
    authority: AuthorityClient,
    coordinator: Actor,
    *,
    task_queue: str = COORDINATOR_TASK_QUEUE,
    checks: Mapping[str, Check] | None = None,
    schemas: Mapping[str, dict[str, Any]] | None = None,
    artifact_store: ArtifactStore | None = None,
    interceptors: list[Interceptor] | None = None,
    max_concurrent_activities: int = 50,
    tracing: bool = True,
) -> Worker:
    """A Worker hosting :class:`MissionWorkflow` and :class:`CoordinatorActivities`.

    Args:
        client: a Temporal client built with ``pydantic_data_converter``.
        authority: the Authority client the activities submit through.
        coordinator: the coordinator identity (member of the Missions' Groups with the
            ``coordinator`` role); its key signs every coordinator Command.
        task_queue: the task queue (default ``missionweave-coordinator``).
        checks: deterministic review checks by name.
        schemas: JSON Schemas by id for deliverables and Artifacts.
        artifact_store: the store the agents publish Artifacts to; the review verifies every
            submitted Artifact there (MW-13.2-b step 1). ``None``: a submission carrying
            Artifacts fails its review.
        interceptors: extra worker interceptors (tracing, tests).
        max_concurrent_activities: activity slots of this worker.
        tracing: add the OpenTelemetry tracing interceptor unless the client already has one
            (see :mod:`missionweave.telemetry`; a no-op until tracing is configured).
    """
    acts = CoordinatorActivities(
        authority, coordinator, checks=checks, schemas=schemas, artifact_store=artifact_store
    )
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[MissionWorkflow],
        activities=[
            acts.submit_commands,
            acts.select_candidates,
            acts.review_submissions,
            acts.work_item_events,
            acts.charge_parent_usage,
        ],
        interceptors=worker_interceptors(client, interceptors or [], tracing=tracing),
        max_concurrent_activities=max_concurrent_activities,
    )


async def run_coordinator(
    client: Client,
    authority_url: str,
    coordinator: Actor,
    *,
    stop: asyncio.Event | None = None,
    artifact_store: ArtifactStore | None = None,
) -> None:
    """Run the coordinator until ``stop`` is set (or forever), then shut down cleanly.

    Args:
        client: a Temporal client built with ``pydantic_data_converter``.
        authority_url: the Authority's base URL.
        coordinator: the coordinator identity.
        stop: set it to stop.
        artifact_store: where submitted Artifacts are verified (see :func:`coordinator_worker`).
    """
    async with AuthorityClient(authority_url, signing_key=coordinator.key) as authority:
        async with coordinator_worker(
            client, authority, coordinator, artifact_store=artifact_store
        ):
            log.info("coordinator %s polling %s", coordinator.agent_id, COORDINATOR_TASK_QUEUE)
            counting = count_missions(client)
            try:
                await (stop or asyncio.Event()).wait()
            finally:
                if counting is not None:
                    counting.cancel()
                    await asyncio.gather(counting, return_exceptions=True)
