"""How a Mission's end travels through Temporal: the execution's status matches what happened.

=====================  ==================  =============================================
the Mission            Temporal status     the caller gets the :class:`MissionResult`
=====================  ==================  =============================================
completed              Completed           as the workflow's result
failed                 Failed              in the details of ``ApplicationError``
                                           ``MissionFailed`` (non-retryable)
cancelled              Failed              in the details of ``ApplicationError``
                                           ``MissionCancelled`` (non-retryable)
cancelled by Temporal  Canceled            nowhere: Canceled carries no details (the
(its cancel request)                       ``status`` query has it)
invalid input          Failed              ``InvalidMission`` (details: the result when the
                                           spec could be read, else none)
id of another run      Failed              ``MissionExists`` (no result: nothing ran)
=====================  ==================  =============================================

A Mission cancelled by its ``cancel`` Update or by a WorkItem id of another Mission is *Failed*
with type ``MissionCancelled``, not *Canceled*: Temporal marks an execution Canceled only in
answer to its own cancel request, and the server refuses a workflow's request to cancel itself
(``ExternalWorkflowExecutionNotFound``). Temporal's cancel request cancels the Mission at the
Authority, then the execution is Canceled.

:func:`start_mission` starts one; :func:`mission_failure` builds the error the workflow raises;
:func:`result_of` and :func:`mission_result` read the :class:`MissionResult` back on the
client's side.
"""

from __future__ import annotations

import difflib
import typing
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError, CancelledError

from .protocol.temporal_contract import (
    COORDINATOR_TASK_QUEUE,
    MISSION_WORKFLOW_TYPE,
    MissionResult,
    MissionSpec,
    mission_workflow_id,
)

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

#: ``MissionId`` (Keyword): the Mission's id within its Group.
MISSION_ID = SearchAttributeKey.for_keyword("MissionId")
#: ``GroupId`` (Keyword): the Group whose log records the Mission.
GROUP_ID = SearchAttributeKey.for_keyword("GroupId")
#: ``MissionStatus`` (Keyword): ``running``, ``completed``, ``failed``, ``cancelled``, ….
MISSION_STATUS = SearchAttributeKey.for_keyword("MissionStatus")
#: ``OpenWorkItems`` (Int): WorkItems not yet terminal.
OPEN_WORK_ITEMS = SearchAttributeKey.for_int("OpenWorkItems")
#: The Mission's custom search attributes (docs/design.md §5), in one place: the workflow sets
#: them, every dev server registers them, clients list Missions by them.
SEARCH_ATTRIBUTES: tuple[SearchAttributeKey[Any], ...] = (
    MISSION_ID,
    GROUP_ID,
    MISSION_STATUS,
    OPEN_WORK_ITEMS,
)

MISSION_FAILED = "MissionFailed"
MISSION_CANCELLED = "MissionCancelled"
INVALID_MISSION = "InvalidMission"
MISSION_EXISTS = "MissionExists"


def error_line(error: str | None) -> str:
    """The first line of a WorkItem's error: the exception's type and message (its traceback
    follows on the next lines); ``""`` for none."""
    return (error or "").split("\n", 1)[0]


def first_error(exc: ValidationError) -> str:
    """A pydantic error in one line naming the first bad field: ``items.0.dependancies: Extra
    inputs are not permitted (and 1 more)``."""
    errors = exc.errors()
    err = errors[0]
    where = ".".join(str(p) for p in err["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    msg = str(err["msg"]).removeprefix("Value error, ")  # our own validators' words, as they are
    return f"{where}: {msg}{more}" if where else f"{msg}{more}"


def all_errors(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """Every pydantic error in one line, each naming its field, with a ``did you mean`` for a
    misspelled key when ``model`` (the validated model) knows a close one: ``2 errors:
    items.0.dependancies: Extra inputs are not permitted (did you mean 'dependencies'?);
    items.0.contract.objective: Field required``. One error reads as :func:`first_error`
    without the count (issue 29 item 4)."""
    parts = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc)
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden" and model is not None and loc:
            close = difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc[:-1]), n=1)
            if close:
                msg += f" (did you mean {close[0]!r}?)"
        parts.append(f"{where}: {msg}" if where else msg)
    text = "; ".join(parts)
    return f"{len(parts)} errors: {text}" if len(parts) > 1 else text


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names (and aliases) of the model found at ``loc`` inside ``model`` (list
    indexes stepped over); none when the path leaves the models."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part)) if current is not None else None
        current = _model_in(field.annotation) if field is not None else None
    if current is None:
        return []
    fields = current.model_fields
    return [*fields, *(f.alias for f in fields.values() if f.alias)]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``X``, ``list[X]``, ``X | None``, ``dict[str,
    X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def mission_failure(result: MissionResult) -> ApplicationError:
    """The non-retryable ``ApplicationError`` a Mission that did not complete ends with: type
    ``MissionFailed`` or ``MissionCancelled``, message ``mission <id> <status>: <reason>``,
    details ``[result]`` (as JSON)."""
    kind = MISSION_CANCELLED if result.status == "cancelled" else MISSION_FAILED
    return ApplicationError(
        f"mission {result.mission_id} {result.status}: {result.reason}".rstrip(": "),
        result.model_dump(mode="json"),
        type=kind,
        non_retryable=True,
    )


def result_of(exc: BaseException | None) -> MissionResult | None:
    """The :class:`MissionResult` a Mission's failure carries (``exc`` is the
    ``WorkflowFailureError``, its cause or any error in the chain); ``None`` when it carries
    none (e.g. ``MissionExists``, a terminated workflow)."""
    while exc is not None:
        if isinstance(exc, ApplicationError | CancelledError):
            details = exc.details
            if details and isinstance(details[0], dict | MissionResult):
                try:
                    return MissionResult.model_validate(details[0])
                except ValueError:
                    return None
        exc = getattr(exc, "cause", None) or exc.__cause__
    return None


async def start_mission(
    client: Client,
    spec: MissionSpec,
    *,
    task_queue: str = COORDINATOR_TASK_QUEUE,
    **kwargs: Any,
) -> WorkflowHandle[Any, MissionResult]:
    """Start the Mission workflow for ``spec``: workflow id
    :func:`~missionweave.protocol.temporal_contract.mission_workflow_id`, on the coordinator's
    ``task_queue``, summarised in the UI by its title (else its id). ``kwargs`` go to
    ``client.start_workflow`` (``id_reuse_policy``, ``rpc_timeout`` …).

    Raises:
        temporalio.exceptions.WorkflowAlreadyStartedError: a workflow of that id runs (or ran,
            under the reuse policy given).
    """
    return await client.start_workflow(
        MISSION_WORKFLOW_TYPE,
        args=[spec, None],
        id=mission_workflow_id(spec.mission_id),
        task_queue=task_queue,
        result_type=MissionResult,
        static_summary=spec.title or spec.mission_id,
        **kwargs,
    )


async def mission_result(handle: WorkflowHandle[Any, Any], **kwargs: Any) -> MissionResult:
    """Wait for a Mission and return its :class:`MissionResult` whether it completed, failed
    or was cancelled. ``kwargs`` go to ``handle.result`` (``rpc_timeout`` …).

    Raises:
        temporalio.client.WorkflowFailureError: the workflow ended without a result
            (``InvalidMission`` of an unreadable spec, ``MissionExists``, Canceled by
            Temporal's cancel request, terminated, timed out).
    """
    from temporalio.client import WorkflowFailureError

    try:
        out = await handle.result(**kwargs)
    except WorkflowFailureError as exc:
        result = result_of(exc.cause)
        if result is None:
            raise
        return result
    return MissionResult.model_validate(out)


__all__ = [
    "INVALID_MISSION",
    "MISSION_CANCELLED",
    "MISSION_EXISTS",
    "MISSION_FAILED",
    "all_errors",
    "error_line",
    "first_error",
    "mission_failure",
    "mission_result",
    "result_of",
    "start_mission",
]
