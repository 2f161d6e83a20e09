"""What a Mission can carry: the bounds on WorkItem inputs, checked before anything is added.

The Mission carries every unfinished WorkItem's input through each continue-as-new; an input
accepted past what a Temporal payload holds (2 MiB) leaves a workflow task that fails for ever.
So the ``authorize_work`` validator and the start refuse, with a structured error, an input over
:data:`~missionweave.protocol.MAX_INLINE_INPUT_BYTES` or a total over
:data:`~missionweave.protocol.MAX_CARRIED_INPUT_BYTES`
(:func:`~missionweave.protocol.input_problem`); large inputs travel by reference
(``{"$input_artifact": hash}``), which costs a few bytes. Pure and deterministic: safe in the
workflow.
"""

from __future__ import annotations

from collections.abc import Iterable

from temporalio.exceptions import ApplicationError

from ..protocol import TERMINAL_STATES, input_bytes, input_problem
from ..protocol.temporal_contract import MissionSpec, WorkItemSpec
from ._state import MissionState


def carried_input_bytes(state: MissionState) -> int:
    """Inline input bytes of the Mission's unfinished WorkItems (finished ones' inputs are
    dropped by :func:`~._state.trim` when the state needs room)."""
    return sum(
        input_bytes(it.spec.input) for it in state.items.values() if it.state not in TERMINAL_STATES
    )


def check_new_inputs(state: MissionState, items: Iterable[WorkItemSpec]) -> None:
    """Refuse new WorkItems whose inputs the Mission could not carry (the ``authorize_work``
    validator).

    Raises:
        ApplicationError: non-retryable, ``type`` ``input_too_large`` or
            ``mission_inputs_too_large``, the reason in its message and the detail
            (``work_item_id``, ``bytes``, ``max_bytes``…) as its first detail.
    """
    problem = input_problem(((i.work_item_id, i.input) for i in items), carried_input_bytes(state))
    if problem is not None:
        code, reason, detail = problem
        raise ApplicationError(reason, detail, type=code, non_retryable=True)


def spec_input_problem(spec: MissionSpec) -> str | None:
    """Why a Mission's initial WorkItems' inputs cannot be carried (``"<code>: <reason>"``), or
    ``None``: the start refuses such a spec before anything is recorded."""
    problem = input_problem((i.work_item_id, i.input) for i in spec.items)
    return None if problem is None else f"{problem[0]}: {problem[1]}"


__all__ = ["carried_input_bytes", "check_new_inputs", "spec_input_problem"]
