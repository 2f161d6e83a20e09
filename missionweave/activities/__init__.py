"""Activities the Mission workflow calls, hosted by the coordinator process."""

from ._coordinator import Check, CoordinatorActivities, capability_matches

__all__ = ["Check", "CoordinatorActivities", "capability_matches"]
