"""One coordinator step as the Mission workflow runs it: a *local* activity (a large batch: a
regular one), bounded, then a durable timer and another try (issue 26). Every part of the
workflow that calls the coordinator (:mod:`missionweave.activities`) goes through
:func:`coordinator_activity`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from ..activities import CoordinatorActivities

#: One try of a coordinator step: its local activity's attempts, retried in the Worker with
#: this backoff while the Authority is briefly unreachable — five attempts in about 3 s
#: (:func:`coordinator_activity`). A bound by count, not by ``schedule_to_close``: the SDK core
#: keeps retrying a local activity past its ``schedule_to_close`` (seen with temporalio 1.35).
STEP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                         maximum_interval=timedelta(seconds=2), maximum_attempts=5)  # fmt: skip
#: After a try that did not finish, a durable timer this long (doubling up to
#: :data:`MAX_STEP_PAUSE`) before the next: an outage of hours costs a few history events per
#: pause, not a local activity spinning in the Worker.
FIRST_STEP_PAUSE = timedelta(seconds=5)
MAX_STEP_PAUSE = timedelta(minutes=5)

#: A step carrying more WorkItems than this runs as a regular activity. A local activity holds
#: its workflow task open until it ends, and the commands that task issued (the offers'
#: ``execute_work_item``) reach Temporal only then: a long batch of a wide DAG would stall
#: every agent (measured: 10,000 WorkItems in 10 layers did not finish in 15 min). A small step
#: — a hop of a chain — stays local and costs no round trip.
LOCAL_STEP_MAX_ITEMS = 8

_In = TypeVar("_In")
_Out = TypeVar("_Out")


async def coordinator_activity(
    activity: Callable[[CoordinatorActivities, _In], Awaitable[_Out]],
    arg: _In,
    *,
    start_to_close: timedelta,
    summary: str,
    first_pause: timedelta = FIRST_STEP_PAUSE,
    items: int = 1,
    local: bool | None = None,
) -> _Out:
    """Run one of the coordinator's steps from the workflow as a *local* activity (issue 26):
    it runs in this Worker, in the workflow task that asked for it, and costs one marker in
    the history and no round trip through Temporal's task queues — unless it carries more than
    :data:`LOCAL_STEP_MAX_ITEMS` WorkItems (``items``): then it is a regular activity on the
    coordinator's task queue, so that the workflow task ends and the commands it issued go
    out while the batch runs (``local`` decides instead when given). Every step is idempotent
    (each Command carries the id the workflow fixed), so a try cut short by a crash runs again
    safely.

    A try is bounded: ``start_to_close`` per attempt, at most five attempts
    (:data:`STEP_RETRY`). A try that fails (the Authority unreachable for that long) is followed
    by a durable timer (``first_pause``, :data:`FIRST_STEP_PAUSE` by default, doubling to
    :data:`MAX_STEP_PAUSE`) and another try. ``summary`` is what the Temporal UI shows.

    Raises:
        FailureError: the step failed with a non-retryable ``ApplicationError`` (a bug or a
            refusal the workflow must see), or it was cancelled (``CancelledError``: the
            Mission is ending).
    """
    pause = first_pause
    while True:
        try:
            if not (items <= LOCAL_STEP_MAX_ITEMS if local is None else local):
                return await workflow.execute_activity_method(
                    activity,
                    arg,
                    start_to_close_timeout=start_to_close,
                    retry_policy=STEP_RETRY,
                    summary=summary,
                )
            return await workflow.execute_local_activity_method(
                activity,
                arg,
                start_to_close_timeout=start_to_close,
                retry_policy=STEP_RETRY,
                summary=summary,
            )
        except FailureError as exc:
            # a local activity's failure arrives as itself (an ApplicationError, a
            # CancelledError), not wrapped in an ActivityError as a regular one's
            cause = exc.cause if isinstance(exc, ActivityError) else exc
            if isinstance(cause, CancelledError) or (
                isinstance(cause, ApplicationError) and cause.non_retryable
            ):
                raise
            workflow.logger.warning(
                "%s did not finish (%s); next try in %s", summary, cause or exc, pause
            )
        await workflow.sleep(pause)
        pause = min(pause * 2, MAX_STEP_PAUSE)


__all__ = [
    "FIRST_STEP_PAUSE",
    "LOCAL_STEP_MAX_ITEMS",
    "MAX_STEP_PAUSE",
    "STEP_RETRY",
    "coordinator_activity",
]
