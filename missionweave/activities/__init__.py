"""Activities the Mission workflow calls, hosted by the coordinator process."""

from ._coordinator import CoordinatorActivities
from ._ranking import capability_matches
from ._review import Check

__all__ = ["Check", "CoordinatorActivities", "capability_matches"]
