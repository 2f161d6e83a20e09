"""The coordinator's process (docs/design.md §8): what ``missionweave coordinator`` runs.

One Temporal ``Worker`` on the ``missionweave-coordinator`` task queue hosts the Mission
workflow (:mod:`missionweave.workflows`) and the coordinator's activities
(:class:`~missionweave.activities.CoordinatorActivities`, which sign with the coordinator's
key), as :mod:`missionweave.worker` hosts an agent's::

    from missionweave.coordinator import coordinator_worker

    async with coordinator_worker(client, authority, Actor("coordinator", key)):
        ...   # Missions started meanwhile run here

:func:`run_coordinator` runs it until told to stop, with :class:`MissionCounts` (the
``missionweave_coordinator_missions`` gauge) when the process serves metrics.

This package sits above ``workflows`` and ``activities`` (it imports both; neither imports
it) and below ``dev``, whose embedded stack runs the same Worker.
"""

from ._counts import MissionCounts, count_missions
from ._process import coordinator_worker, run_coordinator

__all__ = ["MissionCounts", "coordinator_worker", "count_missions", "run_coordinator"]
