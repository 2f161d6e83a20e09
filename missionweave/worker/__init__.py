"""The agent runtime: handlers, admission control, per-Group state, scheduler and execution.

Write handlers as plain async functions::

    from missionweave.worker import Submission, WorkContext, handler

    @handler("dist.verify", version="1.0")
    async def verify(ctx: WorkContext, input: VerifyInput) -> Submission:
        await ctx.guard()                     # the lease is still ours: safe to act
        ...
        return Submission(outputs={...}, evidence=[ctx.evidence("hashes", method="sha256")])

and run them with :class:`AgentRuntime` (or ``missionweave worker``). The runtime opens a
session, follows each Group's log into a durable local projection (MW-11.1-a/b), and serves
the ``execute_work_item`` activity on its task queue: each one is an offer, answered through
admission control (MW-10.3-d/e) with the agent's own signed Commands to the Authority, then
started when the scheduler gives it a slot (MW-11.1-c/e) and run under a renewed, fenced
lease (MW-11.3, MW-11.4, MW-11.5-b/d). See ``docs/agents.md``.
"""

from ._admission import (
    AMBIGUOUS,
    Accept,
    AdmissionControl,
    AdmissionPolicy,
    AdmissionRequest,
    Decline,
    DependencyCheck,
)
from ._context import WorkAuthorizationRejected, WorkContext
from ._errors import (
    Blocked,
    HandlerLoadError,
    HandlerOutcome,
    LeaseLost,
    Pause,
    PermanentFailure,
    SessionError,
    WorkerError,
)
from ._execute import WorkItemExecutor
from ._gates import RiskGate
from ._handlers import HandlerRegistry, HandlerSpec, Submission, handler, load_handlers
from ._lease import UsageMeter
from ._runtime import AgentRuntime
from ._scheduler import QueuedItem, RunningItem, SchedulePlan, Scheduler
from ._slots import SlotBoard
from ._state import LocalState, Membership, WorkItemView
from ._update_retry import UpdateRetry
from ._verdicts import command_verdict

__all__ = [
    "AMBIGUOUS",
    "Accept",
    "AdmissionControl",
    "AdmissionPolicy",
    "AdmissionRequest",
    "AgentRuntime",
    "Blocked",
    "Decline",
    "DependencyCheck",
    "HandlerLoadError",
    "HandlerOutcome",
    "HandlerRegistry",
    "HandlerSpec",
    "LeaseLost",
    "LocalState",
    "Membership",
    "Pause",
    "PermanentFailure",
    "QueuedItem",
    "RiskGate",
    "RunningItem",
    "SchedulePlan",
    "Scheduler",
    "SessionError",
    "SlotBoard",
    "Submission",
    "UpdateRetry",
    "UsageMeter",
    "WorkAuthorizationRejected",
    "WorkContext",
    "WorkItemExecutor",
    "WorkItemView",
    "WorkerError",
    "command_verdict",
    "handler",
    "load_handlers",
]
