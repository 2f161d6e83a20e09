"""The Temporal SDK's own metrics, exported beside MissionWeave's on the same ``/metrics``.

The SDK's core records its metrics (``temporal_…``: polls, task latencies, slots, sticky
cache, request failures) into a :class:`~temporalio.runtime.MetricBuffer` of a
:class:`~temporalio.runtime.Runtime` made for this process; a thread drains it every second
into OpenTelemetry instruments of the same names, so one exporter and one port serve both.
Chosen over the SDK's own Prometheus server (a second port per process) and over OTLP (a
collector to run).

The ``task_queue`` label of an agent's queue names the agent and its Group
(``missionweave-agent-<agent>/<group>``): it is exported as ``missionweave-agent``, and any
other queue but the coordinator's as ``other``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics

from ..protocol.temporal_contract import COORDINATOR_TASK_QUEUE
from ._catalog import SECONDS_BUCKETS

log = logging.getLogger(__name__)

#: Seconds between two drains of the SDK's buffer.
DRAIN_INTERVAL_S = 1.0
#: Updates the buffer holds between drains (the SDK drops and logs past it).
BUFFER_SIZE = 100_000
#: The scope of the Temporal SDK's series.
TEMPORAL_METER = "temporalio"
#: The Python logger the SDK core's log records are forwarded to (its target appended).
CORE_LOGGER = "temporalio.core"


def task_queue_label(value: str) -> str:
    """The exported value of a ``task_queue`` label: no agent or Group id in it."""
    if value == COORDINATOR_TASK_QUEUE:
        return value
    if value.startswith("missionweave-agent-"):
        return "missionweave-agent"
    return "other"


def clean_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A Temporal metric's attributes as exported: ``task_queue`` by :func:`task_queue_label`
    (other labels name types, namespaces and pollers, never an id)."""
    out = dict(attributes)
    if "task_queue" in out:
        out["task_queue"] = task_queue_label(str(out["task_queue"]))
    return out


class TemporalMetricsBridge:
    """Drains a runtime's :class:`~temporalio.runtime.MetricBuffer` into OpenTelemetry.

    Args:
        buffer: the buffer of the runtime the process's Temporal clients use.
        meter: the meter to create the instruments on.
    """

    def __init__(self, buffer: Any, meter: metrics.Meter) -> None:
        self.buffer = buffer
        self.meter = meter
        self._instruments: dict[str, Any] = {}
        self._attrs: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="temporal-metrics", daemon=True)

    def start(self) -> None:
        """Drain every :data:`DRAIN_INTERVAL_S` in a daemon thread until :meth:`stop`."""
        self._thread.start()

    def stop(self) -> None:
        """Stop draining (after one last drain)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(DRAIN_INTERVAL_S):
            self.drain()
        self.drain()

    def drain(self) -> int:
        """Apply the buffered updates now; how many there were."""
        from temporalio.runtime import (
            BUFFERED_METRIC_KIND_COUNTER,
            BUFFERED_METRIC_KIND_HISTOGRAM,
        )

        try:
            updates = self.buffer.retrieve_updates()
        except Exception as exc:  # the runtime is going away with the process
            log.debug("temporal metrics not drained: %r", exc)
            return 0
        for u in updates:
            metric = u.metric
            instrument = self._instruments.get(metric.name)
            if instrument is None:
                instrument = self._instruments[metric.name] = self._create(metric)
            attrs = self._clean(u.attributes)
            if metric.kind == BUFFERED_METRIC_KIND_COUNTER:
                instrument.add(u.value, attrs)
            elif metric.kind == BUFFERED_METRIC_KIND_HISTOGRAM:
                instrument.record(u.value, attrs)
            else:
                instrument.set(u.value, attrs)
        return len(updates)

    def _clean(self, attributes: Any) -> dict[str, Any]:
        # the SDK hands the same object for the same attribute set: clean each set once
        # (the object is kept, so its id is not reused)
        key = id(attributes)
        cached = self._attrs.get(key)
        if cached is None or cached[0] is not attributes:
            cached = self._attrs[key] = (attributes, clean_attributes(attributes))
        return cached[1]

    def _create(self, metric: Any) -> Any:
        from temporalio.runtime import (
            BUFFERED_METRIC_KIND_COUNTER,
            BUFFERED_METRIC_KIND_HISTOGRAM,
        )

        unit = metric.unit or ""
        desc = metric.description or ""
        if metric.kind == BUFFERED_METRIC_KIND_COUNTER:
            return self.meter.create_counter(metric.name, unit=unit, description=desc)
        if metric.kind == BUFFERED_METRIC_KIND_HISTOGRAM:
            return self.meter.create_histogram(
                metric.name,
                unit=unit,
                description=desc,
                explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
            )
        return self.meter.create_gauge(metric.name, unit=unit, description=desc)


_lock = threading.Lock()
_runtime: Any = None
_bridge: TemporalMetricsBridge | None = None


def process_runtime(meter: metrics.Meter | None = None) -> Any:
    """This process's Temporal :class:`~temporalio.runtime.Runtime`, made on the first call:
    the SDK core's log records go to the Python logger :data:`CORE_LOGGER` (WARN and up, so
    that a command can shape them: ``missionweave worker``), and with ``meter`` its metrics
    to that meter (durations in seconds) through a started :class:`TemporalMetricsBridge`.

    Pass it as ``runtime=`` of ``Client.connect`` (:func:`current_runtime`). A ``meter`` given
    after the runtime was made without one is ignored, with a warning: a runtime's telemetry
    is fixed when it is made.
    """
    global _runtime, _bridge
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        MetricBuffer,
        MetricBufferDurationFormat,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    with _lock:
        if _runtime is not None:
            if meter is not None and _bridge is None:
                log.warning("Temporal SDK metrics off: its runtime was made before metrics")
            return _runtime
        logging_config = LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
            forwarding=LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER)),
        )
        buffer = None
        if meter is not None:
            buffer = MetricBuffer(BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
        _runtime = Runtime(telemetry=TelemetryConfig(logging=logging_config, metrics=buffer))
        if buffer is not None and meter is not None:
            _bridge = TemporalMetricsBridge(buffer, meter)
            _bridge.start()
        return _runtime


def current_runtime() -> Any:
    """The runtime :func:`process_runtime` made, or ``None`` (the SDK's default then)."""
    return _runtime


def exports_metrics() -> bool:
    """Whether this process's Temporal runtime exports the SDK's metrics."""
    return _bridge is not None


__all__ = [
    "CORE_LOGGER",
    "TemporalMetricsBridge",
    "clean_attributes",
    "current_runtime",
    "exports_metrics",
    "process_runtime",
    "task_queue_label",
]
