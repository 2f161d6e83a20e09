"""Pin the agent runtime's public surface: names may be added deliberately, never lost."""

from __future__ import annotations

import missionweave.worker as worker

WORKER = {
    "AMBIGUOUS", "Accept", "AdmissionControl", "AdmissionPolicy", "AdmissionRequest",
    "AgentRuntime", "Blocked", "Decline", "DependencyCheck", "HandlerLoadError",
    "HandlerOutcome", "HandlerRegistry", "HandlerSpec", "LeaseLost", "LocalState", "Membership",
    "Pause", "PendingOffer", "PermanentFailure", "QueuedItem", "RunningItem", "SchedulePlan",
    "Scheduler", "SessionError", "SlotBoard", "Submission", "UpdateRetry", "UpdateSender",
    "UsageMeter", "WorkAuthorizationRejected", "WorkContext", "WorkItemExecutor", "WorkItemView",
    "WorkerError", "command_verdict", "handler", "load_handlers",
}  # fmt: skip


def test_worker_surface() -> None:
    assert set(worker.__all__) == WORKER
    assert all(hasattr(worker, n) for n in worker.__all__)


def test_activity_name_is_the_contract_with_the_workflow() -> None:
    from temporalio.activity import _Definition

    defn = _Definition.from_callable(worker.WorkItemExecutor.execute_work_item)
    assert defn is not None and defn.name == "execute_work_item"
