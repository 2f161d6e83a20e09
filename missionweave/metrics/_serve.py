"""``GET /metrics`` in the Prometheus text format, on a port of its own.

:func:`serve_metrics` sets this process's OpenTelemetry meter provider (once) with a
Prometheus reader, starts the Temporal SDK's metrics runtime (:mod:`._temporal`) and serves
every series — MissionWeave's, the SDK's ``temporal_…`` and the Python process's
``process_…``/``python_…`` — over HTTP in a daemon thread. Processes that talk to Temporal
pass :func:`temporal_runtime` to ``Client.connect``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics

from ..protocol import MissionWeaveError
from ._temporal import TEMPORAL_METER, current_runtime, process_runtime

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

log = logging.getLogger(__name__)

#: Default ports of ``--metrics-port``: the Authority's and the coordinator's (also ``dev up``'s,
#: whose one process holds both). An agent serves none unless given a port (several agents
#: share a machine): 9466 and up by convention.
AUTHORITY_METRICS_PORT = 9464
COORDINATOR_METRICS_PORT = 9465

_lock = threading.Lock()
_provider: Any = None


class MetricsError(MissionWeaveError):
    """The metrics endpoint cannot be served: its port is taken or cannot be bound."""


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """A running ``/metrics`` server.

    Attributes:
        host: the interface it listens on.
        port: its TCP port (the bound one when 0 was asked).
    """

    host: str
    port: int
    _server: Any

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (the series keep being recorded)."""
        self._server.shutdown()
        self._server.server_close()


def _ensure_provider() -> None:
    global _provider
    with _lock:
        if _provider is not None:
            return
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider

        reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False)
        provider = MeterProvider(metric_readers=[reader])
        metrics.set_meter_provider(provider)
        _provider = provider
        process_runtime(provider.get_meter(TEMPORAL_METER))


def serve_metrics(port: int, host: str = "127.0.0.1") -> MetricsEndpoint:
    """Serve every series of this process at ``http://host:port/metrics`` (Prometheus text
    format 0.0.4) from a daemon thread; the first call also turns recording on (the
    OpenTelemetry meter provider and the Temporal SDK's metrics runtime, for the process's
    lifetime). Several endpoints may serve the same series.

    Args:
        port: TCP port; 0 picks a free one (see :attr:`MetricsEndpoint.port`).
        host: the interface to bind.

    Raises:
        MetricsError: the port cannot be bound (taken, or not allowed).
    """
    from prometheus_client import start_http_server

    _ensure_provider()
    try:
        server, _ = start_http_server(port, addr=host)
    except OSError as exc:
        raise MetricsError(f"cannot serve metrics on {host}:{port}: {exc.strerror}") from None
    endpoint = MetricsEndpoint(host, int(server.server_port), server)
    log.debug("metrics at %s", endpoint.url)
    return endpoint


def temporal_runtime() -> Runtime | None:
    """``runtime=`` of ``Client.connect``: this process's Temporal runtime
    (:func:`~._temporal.process_runtime`: the SDK's metrics once :func:`serve_metrics` ran
    first, its core's logs forwarded to Python logging), or ``None`` when nothing made one
    (the SDK's default runtime)."""
    runtime: Runtime | None = current_runtime()
    return runtime


def serving_metrics() -> bool:
    """Whether :func:`serve_metrics` turned recording on in this process."""
    return _provider is not None


__all__ = [
    "AUTHORITY_METRICS_PORT",
    "COORDINATOR_METRICS_PORT",
    "MetricsEndpoint",
    "MetricsError",
    "serve_metrics",
    "serving_metrics",
    "temporal_runtime",
]
