"""Activities the Mission workflow calls, hosted by the coordinator process."""

from ._coordinator import HEARTBEAT_TIMEOUT, CoordinatorActivities
from ._ranking import capability_matches
from ._review import Check

__all__ = ["HEARTBEAT_TIMEOUT", "Check", "CoordinatorActivities", "capability_matches"]
