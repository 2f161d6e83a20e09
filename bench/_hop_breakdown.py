"""Where a dependency hop's milliseconds go: ``mission_overhead.py --breakdown`` (issue 26).

For the chain (``--layers`` equal to ``--items``) the Mission runs with two probes:

* a Temporal worker interceptor (:class:`StepTimer`) on the coordinator and the agents, which
  times every activity it runs by type — the coordinator's local activities (its steps) and
  the agents' ``execute_work_item``;
* the Authority process's ``GET /metrics`` (``missionweave_authority_request_duration``, by
  route), scraped before and after: the server-side time of every Authority request.

With the Mission's history (schedule-to-start of each ``execute_work_item`` and of each
workflow task, how long each workflow task ran), :func:`breakdown` gives the mean per hop of
each step in milliseconds, so the next person sees the next lever. The steps overlap (the
coordinator's steps run inside workflow tasks, the agents' Authority requests inside their
activity): they are parts, not terms of a sum.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

#: The Authority's request-latency histogram, as its Prometheus exporter names it.
REQUESTS = "missionweave_authority_request_duration_seconds"


class StepTimer(Interceptor):
    """Times every activity the Workers it is given to run: ``seconds[type]`` lists the
    durations (seconds) of each activity type, local ones named ``local <type>``."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Timed(next, self)


class _Timed(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, timer: StepTimer) -> None:
        super().__init__(next)
        self.timer = timer

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        name = ("local " if info.is_local else "") + info.activity_type
        t0 = time.perf_counter()
        try:
            return await super().execute_activity(input)
        finally:
            self.timer.seconds[name].append(time.perf_counter() - t0)


async def scrape(url: str) -> dict[str, tuple[float, float]]:
    """``{"POST /v1/commands": (seconds, requests)}`` from a ``GET /metrics`` at ``url``,
    summed over status classes."""
    async with httpx.AsyncClient(timeout=10) as http:
        text = (await http.get(url)).text
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in (f"{REQUESTS}_sum", f"{REQUESTS}_count"):
                key = f"{s.labels.get('method')} {s.labels.get('route')}"
                out[key][0 if s.name.endswith("_sum") else 1] += s.value
    return {k: (v[0], v[1]) for k, v in out.items()}


def _ms(a: Any, b: Any) -> float:
    return (b.ToDatetime() - a.ToDatetime()).total_seconds() * 1000


def history_steps(history: WorkflowHistory) -> dict[str, float]:
    """Totals in milliseconds over the run: the agents' activities waiting to start and
    running, the workflow tasks waiting to start and running, and their counts."""
    at: dict[int, Any] = {}
    out: dict[str, float] = defaultdict(float)
    wft_scheduled = None
    for e in history.events:
        t = e.event_type
        if t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            at[e.event_id] = e.event_time
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            out["agent activity schedule-to-start"] += _ms(at[a.scheduled_event_id], e.event_time)
            at[-a.scheduled_event_id] = e.event_time
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            a = e.activity_task_completed_event_attributes
            out["agent activity (handler + its Authority calls)"] += _ms(
                at[-a.scheduled_event_id], e.event_time
            )
        elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            wft_scheduled = e.event_time
        elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED and wft_scheduled is not None:
            out["workflow task schedule-to-start"] += _ms(wft_scheduled, e.event_time)
            at[0] = e.event_time
        elif t == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            out["workflow task (incl. coordinator step)"] += _ms(at[0], e.event_time)
            out["workflow tasks"] += 1
    return out


def breakdown(
    history: WorkflowHistory,
    timer: StepTimer,
    before: dict[str, tuple[float, float]],
    after: dict[str, tuple[float, float]],
    hops: int,
) -> dict[str, float]:
    """Mean per hop (milliseconds; ``… requests`` and ``workflow tasks``: counts per hop)."""
    per = max(hops, 1)
    out = {k: round(v / per, 2) for k, v in history_steps(history).items()}
    for name, times in sorted(timer.seconds.items()):
        label = (
            f"coordinator step {name.removeprefix('local ')}"
            if name.startswith("local ")
            else f"agent {name} (in its Worker)"
        )
        out[label] = round(sum(times) * 1000 / per, 2)
    for route, (s, n) in sorted(after.items()):
        s0, n0 = before.get(route, (0.0, 0.0))
        if n - n0 > 0:
            out[f"Authority {route}"] = round((s - s0) * 1000 / per, 2)
            out[f"Authority {route} requests"] = round((n - n0) / per, 2)
    return out


__all__ = ["StepTimer", "breakdown", "history_steps", "scrape"]
