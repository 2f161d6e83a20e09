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

The names below are what a handler author and an agent operator use; everything else (admission
control, the scheduler, slots, the local projection, the activity class) is internal to the
runtime and lives in its private modules.
"""

from ._admission import AdmissionPolicy
from ._artifacts import authority_artifacts
from ._authorize import WorkAuthorizationRejected
from ._context import WorkContext
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
from ._gates import RiskGate
from ._handlers import HandlerRegistry, HandlerSpec, Submission, handler, load_handlers
from ._runtime import AgentRuntime

__all__ = [  # noqa: RUF022 (grouped by who uses them, as in temporalio)
    # Writing handlers
    "HandlerRegistry",
    "HandlerSpec",
    "Submission",
    "WorkContext",
    "handler",
    "load_handlers",
    # How a handler ends its work, besides returning a Submission
    "Blocked",
    "HandlerOutcome",
    "LeaseLost",
    "Pause",
    "PermanentFailure",
    "WorkAuthorizationRejected",
    # Running an agent
    "AdmissionPolicy",
    "AgentRuntime",
    "RiskGate",
    # A Group's Artifacts through the Authority (handlers use ctx.publish / ctx.fetch)
    "authority_artifacts",
    # Errors of the runtime
    "HandlerLoadError",
    "SessionError",
    "WorkerError",
]
