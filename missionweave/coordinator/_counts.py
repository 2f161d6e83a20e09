"""The ``missionweave_coordinator_missions`` gauge: Missions by status, counted by the
coordinator's process in Temporal's visibility store."""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client

from ..metrics import series, serving_metrics, unwatch, watch
from ..protocol.temporal_contract import MISSION_WORKFLOW_TYPE

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


__all__ = ["MISSION_COUNT_INTERVAL_S", "MISSION_STATUSES", "MissionCounts", "count_missions"]
