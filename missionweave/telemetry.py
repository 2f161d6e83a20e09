"""OpenTelemetry tracing: set-up from the standard ``OTEL_*`` variables, the Temporal interceptor.

One trace follows a Mission from the client that starts it (``StartWorkflow:MissionWorkflow``)
through the workflow (``RunWorkflow``, ``StartActivity``), its activities (``RunActivity:…``),
the HTTP calls they make to the Authority (W3C ``traceparent``, server span ``authority.http``)
down to every Command appended (``authority.transaction`` / ``authority.append``) and every
artifact read or written (``artifact.get`` / ``artifact.put``). docs/observability.md lists the
spans and their attributes.

Processes call :func:`setup_tracing` once at start; clients and Workers take
:func:`temporal_interceptors`. Until a provider is configured every span is OpenTelemetry's
no-op span, so the instrumented hot paths cost a few microseconds at most.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from opentelemetry import trace

from .protocol import MissionWeaveError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from temporalio.contrib.opentelemetry import TracingInterceptor
    from temporalio.worker import Interceptor as WorkerInterceptor

log = logging.getLogger(__name__)

#: The instrumentation scope of MissionWeave's own spans.
TRACER_NAME = "missionweave"

#: ``OTEL_EXPORTER_OTLP_PROTOCOL`` values and the exporter entry point serving each.
_OTLP_ENTRY_POINTS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}

_lock = threading.Lock()
_provider: TracerProvider | None = None
# A ProxyTracer until a provider is given: it delegates to the global provider once one is set.
_tracer: trace.Tracer = trace.get_tracer(TRACER_NAME)


class TelemetryError(MissionWeaveError):
    """A tracing setting cannot be honoured: an unknown exporter or OTLP protocol, or an
    exporter package that is not installed."""


def tracer() -> trace.Tracer:
    """The tracer of MissionWeave's spans: the provider given to :func:`setup_tracing`, else
    the global one (OpenTelemetry's no-op tracer while none is set)."""
    return _tracer


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def _exporter_names() -> list[str]:
    """``OTEL_TRACES_EXPORTER`` as a list; unset means ``otlp`` when an OTLP endpoint is set,
    else nothing (tracing stays off unless asked for, unlike the spec's ``otlp`` default)."""
    raw = os.environ.get("OTEL_TRACES_EXPORTER")
    if raw is None:
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return ["otlp"] if endpoint else []
    names = [n.strip() for n in raw.split(",")]
    return [n for n in names if n and n.lower() != "none"]


def _exporter(name: str) -> SpanExporter:
    """An exporter named as ``OTEL_TRACES_EXPORTER`` names it, built by its entry point (each
    exporter then reads its own ``OTEL_EXPORTER_*`` variables: endpoint, headers, timeout).

    Raises:
        TelemetryError: unknown name or protocol, or the exporter's package is not installed.
    """
    if name == "otlp":
        protocol = (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        ).strip()
        if protocol not in _OTLP_ENTRY_POINTS:
            raise TelemetryError(
                f"unsupported OTLP protocol {protocol!r} (use http/protobuf or grpc)"
            )
        name = _OTLP_ENTRY_POINTS[protocol]
    found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
    if not found:
        hint = " (pip install opentelemetry-exporter-otlp-proto-grpc)" if "grpc" in name else ""
        raise TelemetryError(f"no trace exporter {name!r} is installed{hint}")
    exporter: SpanExporter = found[0].load()()
    return exporter


def setup_tracing(
    service_name: str | None = None, *, provider: TracerProvider | None = None
) -> TracerProvider | None:
    """Configure tracing for this process from the standard ``OTEL_*`` environment variables.

    ``OTEL_SDK_DISABLED=true`` turns it off. ``OTEL_TRACES_EXPORTER`` picks the exporters
    (``otlp``, ``console``, ``none`` or any installed exporter entry point, comma-separated);
    when it is unset, setting ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) means
    ``otlp``, and nothing means off. ``otlp`` speaks ``OTEL_EXPORTER_OTLP_PROTOCOL``
    (``http/protobuf`` by default, or ``grpc`` with that exporter installed). The SDK reads the
    rest itself: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (resource),
    ``OTEL_TRACES_SAMPLER[_ARG]``, ``OTEL_BSP_*`` (batching) and ``OTEL_EXPORTER_OTLP_*``.

    The provider becomes the global one, and is flushed and shut down at interpreter exit.
    Idempotent: later calls return the provider of the first that configured one. A global SDK
    provider set by someone else (e.g. ``opentelemetry-instrument``) is used as it is.

    Args:
        service_name: ``service.name`` unless ``OTEL_SERVICE_NAME`` or
            ``OTEL_RESOURCE_ATTRIBUTES`` names one, e.g. ``"missionweave-coordinator"``.
        provider: use this provider for MissionWeave's spans and interceptors instead,
            without reading the environment or touching the global provider (which
            OpenTelemetry lets a process set only once): for tests and embedding. It replaces
            any earlier one; :func:`reset_tracing` forgets it.

    Returns:
        The provider in use, or ``None`` when tracing is disabled or no exporter is configured
        (then every span is a no-op and nothing is exported).

    Raises:
        TelemetryError: ``OTEL_TRACES_EXPORTER`` or the OTLP protocol cannot be honoured.
    """
    global _provider, _tracer
    with _lock:
        if provider is not None:
            _provider, _tracer = provider, provider.get_tracer(TRACER_NAME)
            return provider
        if _provider is not None:
            return _provider
        if _env_true("OTEL_SDK_DISABLED"):
            return None
        names = _exporter_names()
        if not names:
            return None
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            _provider = current
            return current
        exporters = [_exporter(n) for n in names]
        resource = Resource.create()
        if service_name and str(resource.attributes.get(SERVICE_NAME, "")).startswith(
            "unknown_service"
        ):
            resource = resource.merge(Resource({SERVICE_NAME: service_name}))
        built = TracerProvider(resource=resource)
        for exporter in exporters:
            built.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(built)
        _provider = built
        log.info("tracing: exporting %s as %s", names, resource.attributes.get(SERVICE_NAME))
        return built


def reset_tracing() -> None:
    """Forget the provider :func:`setup_tracing` was given or built (tests). It is not shut
    down, and a global provider stays set: OpenTelemetry allows that once per process."""
    global _provider, _tracer
    with _lock:
        _provider, _tracer = None, trace.get_tracer(TRACER_NAME)


def temporal_interceptors() -> list[TracingInterceptor]:
    """``[TracingInterceptor(tracer())]``: for ``Client.connect(interceptors=...)``, where it
    also applies to every Worker of that client, or for a Worker's own ``interceptors``.

    Call it after :func:`setup_tracing` when that was given a ``provider``: the interceptor
    keeps the tracer it was built with.
    """
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(_tracer)]


def worker_interceptors(
    client: object, interceptors: Sequence[WorkerInterceptor] = (), *, tracing: bool = True
) -> list[WorkerInterceptor]:
    """``interceptors`` plus the tracing interceptor, unless ``tracing`` is false or the client
    or the list already has one: Temporal gives a Worker its client's worker interceptors too,
    and two of them would trace everything twice.

    Args:
        client: the Worker's ``temporalio.client.Client``.
        interceptors: the Worker's own interceptors.
        tracing: add the tracing interceptor.
    """
    out = list(interceptors)
    if not tracing:
        return out
    from temporalio.contrib.opentelemetry import TracingInterceptor

    config = getattr(client, "config", None)
    on_client = list(config().get("interceptors", ())) if callable(config) else []
    if any(isinstance(i, TracingInterceptor) for i in [*on_client, *out]):
        return out
    return [*out, *temporal_interceptors()]


__all__ = [
    "TRACER_NAME",
    "TelemetryError",
    "reset_tracing",
    "setup_tracing",
    "temporal_interceptors",
    "tracer",
    "worker_interceptors",
]
