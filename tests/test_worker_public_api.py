"""Pin the agent runtime's public surface: names may be added deliberately, never lost.

``UpdateSender`` and ``PendingOffer`` went deliberately with "the offer is the activity"
(docs/design.md §4): agents send no Updates, and offers arrive as activities."""

from __future__ import annotations

import missionweave.worker as worker

WORKER = {
    "AMBIGUOUS", "Accept", "AdmissionControl", "AdmissionPolicy", "AdmissionRequest",
    "AgentRuntime", "Blocked", "Decline", "DependencyCheck", "HandlerLoadError",
    "HandlerOutcome", "HandlerRegistry", "HandlerSpec", "LeaseLost", "LocalState", "Membership",
    "Pause", "PermanentFailure", "QueuedItem", "RiskGate", "RunningItem", "SchedulePlan",
    "Scheduler", "SessionError", "SlotBoard", "Submission", "UpdateRetry",
    "UsageMeter", "WorkAuthorizationRejected", "WorkContext", "WorkItemExecutor", "WorkItemView",
    "WorkerError", "command_verdict", "handler", "load_handlers",
}  # fmt: skip


def test_worker_surface() -> None:
    assert set(worker.__all__) == WORKER
    assert all(hasattr(worker, n) for n in worker.__all__)


def test_activity_name_is_the_contract_with_the_workflow() -> None:
    from temporalio.activity import _Definition

    from missionweave.workflows._edges import execute_work_item

    defn = _Definition.from_callable(worker.WorkItemExecutor.execute_work_item)
    stub = _Definition.from_callable(execute_work_item)  # what the workflow calls
    assert defn is not None and stub is not None
    assert defn.name == stub.name == "execute_work_item"
