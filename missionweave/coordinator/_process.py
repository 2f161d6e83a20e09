"""The coordinator's process: one Temporal ``Worker`` hosting the Mission workflow and the
coordinator's activities, as ``worker/`` hosts an agent's.

``missionweave coordinator`` runs :func:`run_coordinator`; tests and the embedded stack call
:func:`coordinator_worker` to get a ``Worker`` they run inside ``async with``. The activities it
registers are :meth:`CoordinatorActivities.activities`: a new coordinator step is a method there
(and its call in the workflow), never an edit here.
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
from ..protocol import Actor
from ..protocol.temporal_contract import COORDINATOR_TASK_QUEUE
from ..telemetry import worker_interceptors
from ..workflows import MissionWorkflow
from ._counts import count_missions

log = logging.getLogger(__name__)


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
        activities=acts.activities(),
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


__all__ = ["coordinator_worker", "run_coordinator"]
