"""Metrics for operators: OpenTelemetry instruments served as Prometheus text (docs/metrics.md).

The series are named in one place (:mod:`._catalog`); parts record through :func:`add`,
:func:`observe` and :func:`watch`, which cost nothing until a process calls
:func:`serve_metrics` (``--metrics-port`` of ``authority serve``, ``coordinator``, ``worker``
and ``dev up``). Labels never carry a Group, Mission, agent or WorkItem id. Metrics are
recorded in activities and process code, never in workflow code (determinism).
"""

from . import _catalog as series
from ._catalog import ALL, Series
from ._instruments import METER_NAME, add, observe, start_counters, unwatch, watch
from ._serve import (
    AUTHORITY_METRICS_PORT,
    COORDINATOR_METRICS_PORT,
    MetricsEndpoint,
    MetricsError,
    serve_metrics,
    serving_metrics,
    temporal_runtime,
)
from ._temporal import CORE_LOGGER, process_runtime

__all__ = [
    "ALL",
    "AUTHORITY_METRICS_PORT",
    "COORDINATOR_METRICS_PORT",
    "CORE_LOGGER",
    "METER_NAME",
    "MetricsEndpoint",
    "MetricsError",
    "Series",
    "add",
    "observe",
    "process_runtime",
    "series",
    "serve_metrics",
    "serving_metrics",
    "start_counters",
    "temporal_runtime",
    "unwatch",
    "watch",
]
