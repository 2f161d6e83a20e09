"""The instruments of :mod:`._catalog`'s series, on the global OpenTelemetry meter.

They are created at import on OpenTelemetry's proxy meter: until :func:`~._serve.serve_metrics`
sets a provider every record is a no-op costing well under a microsecond, so the hot paths
(the Authority's transaction, a handler's end) record unconditionally.

Gauges are sampled when scraped: a part registers itself with :func:`watch` and a function
reading its value; the gauge reports the sum over the live parts of this process (several
agents, or the embedded stack's Authority, coordinator and agents, in one process). A part
is held weakly: one that is gone stops counting.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from ._catalog import ALL, BATCH_BUCKETS, SECONDS_BUCKETS, Series

#: The instrumentation scope of MissionWeave's own series.
METER_NAME = "missionweave"

_meter = metrics.get_meter(METER_NAME)

T = TypeVar("T")
#: What a watched part reports: one value, or values by label values (in the series' order).
Reading = float | Mapping[tuple[str, ...], float]


class _Sampled:
    """An observable gauge summing what its watched parts report at each collection."""

    def __init__(self, series: Series) -> None:
        self.series = series
        self._lock = threading.Lock()
        self._parts: dict[int, tuple[weakref.ref[Any], Callable[[Any], Reading]]] = {}
        _meter.create_observable_gauge(
            series.name, callbacks=[self._observe], unit=series.unit, description=series.help
        )

    def watch(self, owner: T, read: Callable[[T], Reading]) -> None:
        key = id(owner)
        with self._lock:
            self._parts[key] = (weakref.ref(owner, lambda _: self._forget(key)), read)

    def unwatch(self, owner: object) -> None:
        self._forget(id(owner))

    def _forget(self, key: int) -> None:
        with self._lock:
            self._parts.pop(key, None)

    def _observe(self, _: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            parts = list(self._parts.values())
        totals: dict[tuple[str, ...], float] = {}
        for ref, read in parts:
            owner = ref()
            if owner is None:
                continue
            try:
                value = read(owner)
            except Exception:  # a part closing meanwhile: it is not counted this time
                continue
            items = value.items() if isinstance(value, Mapping) else [((), value)]
            for labels, v in items:
                totals[labels] = totals.get(labels, 0.0) + float(v)
        if not parts:  # nothing of this kind in this process (an agent's gauge elsewhere)
            return []
        if not totals and not self.series.labels:
            totals[()] = 0.0
        names = self.series.labels
        return [Observation(v, dict(zip(names, k, strict=True))) for k, v in totals.items()]


def _buckets(series: Series) -> tuple[float, ...]:
    return SECONDS_BUCKETS if series.unit == "s" else BATCH_BUCKETS


_counters: dict[str, metrics.Counter] = {}
_histograms: dict[str, metrics.Histogram] = {}
_sampled: dict[str, _Sampled] = {}
for _s in ALL:
    if _s.kind == "counter":
        _counters[_s.name] = _meter.create_counter(_s.name, unit=_s.unit, description=_s.help)
    elif _s.kind == "histogram":
        _histograms[_s.name] = _meter.create_histogram(
            _s.name,
            unit=_s.unit,
            description=_s.help,
            explicit_bucket_boundaries_advisory=_buckets(_s),
        )
    else:
        _sampled[_s.name] = _Sampled(_s)


_I = TypeVar("_I")


def _instrument(instruments: Mapping[str, _I], series: Series, kind: str) -> _I:
    """The instrument of ``series`` among ``instruments`` (those of one ``kind``).

    Raises:
        ValueError: ``series`` is not of that kind (a programming error: the tests catch it).
    """
    found = instruments.get(series.name)
    if found is None:
        raise ValueError(f"{series.name} is not a {kind}")
    return found


def _attrs(series: Series, labels: Mapping[str, str]) -> dict[str, str]:
    if set(labels) != set(series.labels):  # a programming error: caught by the tests
        raise ValueError(f"{series.name} takes labels {series.labels}, not {sorted(labels)}")
    return {k: str(v) for k, v in labels.items()}


def add(series: Series, amount: float = 1, **labels: str) -> None:
    """Add ``amount`` (>= 0) to the counter ``series`` with ``labels`` (its label names,
    bounded values only).

    Raises:
        ValueError: ``series`` is not a counter, or the labels are not its labels.
    """
    _instrument(_counters, series, "counter").add(amount, _attrs(series, labels))


def start_counters(component: Iterable[Series]) -> None:
    """Export each counter of ``component`` (``series.AUTHORITY``, ``AGENT``,
    ``COORDINATOR``) at 0 for its :attr:`~._catalog.Series.initial` label values: a process
    calls it as it starts that part."""
    for series in component:
        counter = _counters.get(series.name)
        if counter is None:
            continue
        for values in series.initial:
            counter.add(0, dict(zip(series.labels, values, strict=True)))


def observe(series: Series, value: float, **labels: str) -> None:
    """Record ``value`` (seconds for a unit of ``s``) in the histogram ``series``.

    Raises:
        ValueError: ``series`` is not a histogram, or the labels are not its labels.
    """
    _instrument(_histograms, series, "histogram").record(value, _attrs(series, labels))


def watch(series: Series, owner: T, read: Callable[[T], Reading]) -> None:
    """Report ``read(owner)`` in the gauge ``series`` while ``owner`` lives (or until
    :func:`unwatch`); several owners are summed. ``read`` runs at each scrape, in the
    exporter's thread: it must be cheap and thread-safe (a ``len``, a counter).

    Raises:
        ValueError: ``series`` is not a gauge.
    """
    _instrument(_sampled, series, "gauge").watch(owner, read)


def unwatch(series: Series, owner: object) -> None:
    """Stop reporting ``owner`` in the gauge ``series``."""
    gauge = _sampled.get(series.name)
    if gauge is not None:
        gauge.unwatch(owner)


__all__ = ["METER_NAME", "Reading", "add", "observe", "start_counters", "unwatch", "watch"]
