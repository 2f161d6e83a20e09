"""The Mission's result (:class:`MissionResult`), built from its state within Temporal's payload
limit. Pure and deterministic."""

from __future__ import annotations

from collections.abc import Callable

from ..protocol.temporal_contract import ItemResult, MissionResult, ReviewStep
from ._state import STATE_BUDGET, ItemState, MissionState, trim

#: Bytes of JSON the Mission's result may have (Temporal fails a completion over 2 MiB).
RESULT_BUDGET = 1 << 20


def mission_result(state: MissionState) -> MissionResult:
    """The Mission's result, ``state`` trimmed (:func:`trim`) until the result's JSON is at
    most :data:`RESULT_BUDGET` bytes: a result over 2 MiB would fail the workflow's completion.
    A failed or cancelled Mission of thousands of unfinished WorkItems goes further: those
    that never ran, then all, are given by their state only (``MissionResult.archived``)."""
    for budget in (STATE_BUDGET, STATE_BUDGET // 8, 0):
        trim(state, budget)
        result = _result_of_state(state)
        if len(result.model_dump_json()) <= RESULT_BUDGET:
            return result
    result = _result_of_state(state, lambda it: it.attempts == 0 and it.owner is None)
    if len(result.model_dump_json()) <= RESULT_BUDGET:
        return result
    return _result_of_state(state, lambda it: True)


def review_steps(state: MissionState, work_item_id: str) -> list[ReviewStep]:
    """The WorkItem's review steps so far (none: never reviewed, or trimmed)."""
    record = state.reviews.get(work_item_id)
    return record.steps if record is not None else []


def _result_of_state(
    state: MissionState, by_state_only: Callable[[ItemState], bool] = lambda it: False
) -> MissionResult:
    status = state.status if state.status != "running" else "failed"
    brief = {w: it.state for w, it in state.items.items() if by_state_only(it)}
    return MissionResult(
        mission_id=state.spec.mission_id,
        group_id=state.spec.group_id,
        status=status,
        event_range=(state.first_seq, state.last_seq)
        if state.first_seq is not None and state.last_seq is not None
        else None,
        items=[
            ItemResult(
                work_item_id=w,
                state=it.state,
                owner=it.owner,
                ownership_epoch=it.ownership_epoch,
                attempts=it.attempts,
                outputs=it.outputs,
                artifacts=it.artifacts,
                evidence=it.evidence,
                review=[st.model_dump(mode="json") for st in review_steps(state, w)],
                review_of=it.review_of,
                detail=it.detail,
                error=it.error,
                dependencies=it.spec.dependencies,
                trimmed=it.trimmed,
            )
            for w, it in state.items.items()
            if w not in brief
        ],
        archived={**state.archived, **brief},
        reason=state.end_reason,
    )


__all__ = ["RESULT_BUDGET", "mission_result"]
