"""Temporal workflows: the ``Mission`` workflow (type name ``Mission``).

Register :class:`MissionWorkflow` on the ``missionweave-coordinator`` task queue together with
the coordinator activities (:mod:`missionweave.activities`).
"""

from ._mission import MissionWorkflow
from ._state import ItemState, MissionState

__all__ = ["ItemState", "MissionState", "MissionWorkflow"]
