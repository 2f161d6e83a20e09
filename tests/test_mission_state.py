"""The Mission workflow's state stays under Temporal's payload limit (2 MiB) however many
WorkItems a Mission has: it is the continue-as-new input and the source of the result.
``trim`` drops the bulky details of finished WorkItems (the Group log keeps them all);
``remember`` keeps agent verdicts with their already-applied Events stripped to sequence and
type."""

from __future__ import annotations

import json

from missionweave.protocol import Evidence, WorkItemFacts, WorkItemState
from missionweave.protocol.temporal_contract import (
    CommandVerdict,
    EventSummary,
    MissionSpec,
    ReviewStep,
    WorkItemSpec,
)
from missionweave.workflows._state import (
    STATE_BUDGET,
    ItemState,
    MissionState,
    compact,
    trim,
)

from .mission_harness import contract

C = contract()


def _item(wid: str, state: WorkItemState, note: str) -> ItemState:
    ev = Evidence(subject=wid, criterion="done", method="test", result="pass",
                  producer="ada", timestamp_ms=1, summary=note)  # fmt: skip
    return ItemState(
        spec=WorkItemSpec(work_item_id=wid, contract=C, input={"blob": note}),
        w=WorkItemFacts(state=state), outputs={"report": wid}, artifacts=["a" * 64],
        evidence=[ev],
        review=[ReviewStep(step="deterministic", passed=True, evidence=[ev])],
    )  # fmt: skip


def _state(n: int, note: str, *, open_items: int = 0) -> MissionState:
    items = {f"v{i}": _item(f"v{i}", WorkItemState.VERIFIED, note) for i in range(n)}
    items |= {f"o{i}": _item(f"o{i}", WorkItemState.SUBMITTED, note) for i in range(open_items)}
    return MissionState(spec=MissionSpec(group_id="g", mission_id="m"), items=items)


def _size(s: MissionState) -> int:
    """What the continue-as-new input weighs."""
    return len(json.dumps(compact(s, s.spec.model_copy(update={"items": []}))))


def test_a_small_state_is_left_whole() -> None:
    s = _state(10, "x" * 100)
    before = s.model_dump()
    assert trim(s) is False
    assert s.model_dump() == before


def test_the_continue_as_new_input_round_trips_without_defaults() -> None:
    s = _state(3, "x", open_items=2)
    s.items["o0"].w = WorkItemFacts()  # default values, left out of the input
    slim = s.spec.model_copy(update={"items": []})
    data = compact(s, slim)
    assert "w" not in data["items"]["o0"] and "budget" not in json.dumps(data)
    assert MissionState.model_validate(data) == s.model_copy(update={"spec": slim})
    assert len(json.dumps(data)) < len(s.model_dump_json()) / 2


def test_a_big_state_drops_finished_items_details_first() -> None:
    s = _state(1500, "x" * 1000, open_items=2)
    assert _size(s) > STATE_BUDGET
    assert trim(s) is True
    assert _size(s) <= STATE_BUDGET
    v = s.items["v0"]
    assert v.trimmed and v.evidence == [] and v.review == [] and v.spec.input == {}
    assert v.outputs == {"report": "v0"} and v.artifacts == ["a" * 64]  # kept: small enough
    assert v.state is WorkItemState.VERIFIED and v.spec.contract == C
    o = s.items["o0"]  # not finished: its review still needs everything
    assert not o.trimmed and o.evidence and o.review and o.spec.input


def test_outputs_go_too_when_details_are_not_enough() -> None:
    s = _state(200, "y" * 10)
    for it in s.items.values():
        it.outputs = {"big": "z" * 8000}
    assert _size(s) > STATE_BUDGET
    assert trim(s) is True
    assert _size(s) <= STATE_BUDGET
    assert all(it.outputs == {} and it.artifacts for it in s.items.values())


def test_a_review_item_awaited_by_its_subject_keeps_its_evidence() -> None:
    s = _state(1500, "x" * 1000)
    subject = _item("subject", WorkItemState.SUBMITTED, "s")
    subject.review_stage, subject.review_item = "semantic", "v7"
    s.items["subject"] = subject
    trim(s)
    assert s.items["v7"].evidence and not s.items["v7"].trimmed
    assert s.items["v8"].trimmed


def test_remembered_verdicts_keep_their_events_without_bodies() -> None:
    s = _state(0, "")
    started = EventSummary(seq=5, type="work.started", body={"x": 1})
    v = CommandVerdict(command_id="c1", status="accepted", reply={"lease": {"lease_id": "l"}},
                       events=[started])  # fmt: skip
    s.remember(v)
    kept = s.verdicts["c1"]
    assert [(e.seq, e.type, e.body) for e in kept.events] == [(5, "work.started", {})]
    assert kept.reply == v.reply and kept.accepted
