"""Pin the agent runtime's public surface: names may be added deliberately, never lost; the
runtime's internals (admission control, the scheduler, slots, the projection) stay private.

``UpdateSender`` and ``PendingOffer`` went deliberately with "the offer is the activity"
(docs/design.md §4): agents send no Updates, and offers arrive as activities."""

from __future__ import annotations

import missionweave.worker as worker
from tests.support.surface import assert_surface

WORKER = {
    # writing handlers
    "HandlerRegistry", "HandlerSpec", "Submission", "WorkContext", "handler", "load_handlers",
    # how a handler ends its work
    "Blocked", "HandlerOutcome", "LeaseLost", "Pause", "PermanentFailure",
    "WorkAuthorizationRejected",
    # running an agent
    "AdmissionPolicy", "AgentRuntime", "RiskGate",
    # a Group's Artifacts through the Authority's grants (MW-13.3-d)
    "authority_artifacts",
    # errors of the runtime
    "HandlerLoadError", "SessionError", "WorkerError",
}  # fmt: skip


def test_worker_surface() -> None:
    assert_surface(worker, WORKER)


def test_activity_name_is_the_contract_with_the_workflow() -> None:
    from temporalio.activity import _Definition

    from missionweave.worker._execute import WorkItemExecutor
    from missionweave.workflows._edges import execute_work_item

    defn = _Definition.from_callable(WorkItemExecutor.execute_work_item)
    stub = _Definition.from_callable(execute_work_item)  # what the workflow calls
    assert defn is not None and stub is not None
    assert defn.name == stub.name == "execute_work_item"
