"""The Mission workflow is made of parts it holds (issue 26 item 2): plain classes, no mixins;
what a run has under way is not state, and the state they carry across continue-as-new reads
a state written before them."""

from __future__ import annotations

import inspect
from pathlib import Path

from missionweave.protocol import WorkItemFacts, WorkItemState
from missionweave.protocol.temporal_contract import MissionSpec, WorkItemSpec
from missionweave.workflows import MissionWorkflow
from missionweave.workflows._review_steps import approval_since_review
from missionweave.workflows._state import (
    ItemState,
    MissionState,
    ReviewRecord,
    ReviewStage,
    compact,
)
from tests.support.mission_harness import contract

C = contract()
WORKFLOWS = Path(inspect.getfile(MissionWorkflow)).parent


def test_the_workflow_is_one_class_holding_parts_not_mixins() -> None:
    assert MissionWorkflow.__mro__ == (MissionWorkflow, object)
    for path in sorted(WORKFLOWS.glob("*.py")):
        text = path.read_text()
        assert "Mixin" not in text, path.name
        assert "if TYPE_CHECKING" not in text, path.name  # no method stubs to join parts
    # run, the main loop and every update, signal and query in one file of ~400 lines
    assert len((WORKFLOWS / "_mission.py").read_text().splitlines()) <= 410


def _old_shape() -> dict[str, object]:
    """A continue-as-new input as the workflow wrote it before its parts: an item marked as
    being ranked (``selecting``, ``offer_pending``: what its run had under way) and one
    awaiting an Approval (its review on the item: ``review_stage`` …)."""
    spec = MissionSpec(group_id="g", mission_id="m")
    items = {
        "a": ItemState(
            spec=WorkItemSpec(work_item_id="a", contract=C),
            w=WorkItemFacts(state=WorkItemState.OPEN, mission_id="m"),
            authorized=True,
        ),
        "b": ItemState(
            spec=WorkItemSpec(work_item_id="b", contract=C),
            w=WorkItemFacts(state=WorkItemState.SUBMITTED, mission_id="m", seq=9),
            authorized=True,
        ),
    }
    data = compact(MissionState(spec=spec, items=items), spec)
    data["items"]["a"].update(selecting=True, offer_pending=True, syncing=False)  # type: ignore[union-attr]
    data["items"]["b"].update(review_stage="approval", review_digest="d" * 64, reviews=1)  # type: ignore[union-attr]
    return data


def test_a_state_written_before_the_parts_is_read() -> None:
    state = MissionState.model_validate(_old_shape())
    a, b = state.items["a"], state.items["b"]
    assert a.authorized and a.state is WorkItemState.OPEN  # planned afresh by the new run
    assert "offer_pending" not in a.model_dump() and "selecting" not in a.model_dump()
    assert b.state is WorkItemState.SUBMITTED and "review_stage" not in b.model_dump()
    assert state.reviews == {
        "b": ReviewRecord(stage=ReviewStage.APPROVAL, digest="d" * 64, count=1, since_seq=None)
    }
    assert MissionState.model_validate(compact(state, state.spec)) == state  # the new shape


def _awaiting(approval_seq: int, since: int | None) -> tuple[ItemState, ReviewRecord]:
    facts = WorkItemFacts(
        state=WorkItemState.SUBMITTED,
        mission_id="m",
        seq=max(approval_seq, since or 0),
        approval={"type": "approval.result_granted", "seq": approval_seq, "approver": "o"},
    )
    item = ItemState(spec=WorkItemSpec(work_item_id="x", contract=C), w=facts)
    return item, ReviewRecord(stage=ReviewStage.APPROVAL, since_seq=since)


def test_only_an_approval_recorded_since_the_review_began_decides__MW_13_2_b() -> None:
    """The review leaves the reducer's facts alone: an Approval of an earlier submission is
    still in them, and is not this review's (step 5)."""
    assert approval_since_review(*_awaiting(approval_seq=5, since=7)) is None
    assert approval_since_review(*_awaiting(approval_seq=8, since=7)) is not None
    # a state written before the field: its review had reset the Approval, so any counts
    assert approval_since_review(*_awaiting(approval_seq=5, since=None)) is not None
