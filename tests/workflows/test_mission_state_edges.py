"""Edge cases of the Mission's state found by attacking it: contract names that disagree or
dangle are refused, odd states round-trip through continue-as-new, a dependent of a cancelled
item ends the Mission instead of waiting forever, and a failed Mission of 10,000 open items has
a result under Temporal's payload limit."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from missionweave.protocol import WorkGraph, WorkItemFacts, WorkItemState
from missionweave.protocol.temporal_contract import (
    AuthorizeWorkInput,
    MissionSpec,
    WorkItemSpec,
)
from missionweave.workflows._plan import plan
from missionweave.workflows._state import ItemState, MissionState, compact
from tests.support.mission_harness import contract

C1 = contract()
C2 = contract(("demo.other@1.0",))


def _rt(s: MissionState) -> MissionState:
    slim = s.spec.model_copy(update={"items": []})
    return MissionState.model_validate(json.loads(json.dumps(compact(s, slim))))


# ---------------------------------------------------------------- contracts by name


def test_a_built_item_whose_contract_differs_from_its_name_is_refused() -> None:
    """A WorkItemSpec built in Python with contract C2 and ``contract_ref='k'`` under a Mission
    whose ``k`` is C1: refused (its JSON would travel by the name and come back as C1)."""
    item = WorkItemSpec(work_item_id="a", contract=C2, contract_ref="k")
    with pytest.raises(ValidationError, match="differs from the contract 'k'"):
        MissionSpec(group_id="g", mission_id="m", items=[item], contracts={"k": C1})
    same = WorkItemSpec(work_item_id="a", contract=C1, contract_ref="k")
    spec = MissionSpec(group_id="g", mission_id="m", items=[same], contracts={"k": C1})
    assert MissionSpec.model_validate_json(spec.model_dump_json()) == spec


def test_a_built_item_naming_no_contract_is_refused() -> None:
    item = WorkItemSpec(work_item_id="a", contract=C1, contract_ref="nope")
    with pytest.raises(ValidationError, match="contract_ref 'nope' is not one of"):
        MissionSpec(group_id="g", mission_id="m", items=[item])
    with pytest.raises(ValidationError, match="contract_ref 'nope' is not one of"):
        AuthorizeWorkInput(items=[item])


def test_child_mission_with_refs_round_trips() -> None:
    child = MissionSpec.model_validate(
        {
            "group_id": "g",
            "mission_id": "c",
            "contracts": {"k": C2.model_dump(mode="json")},
            "items": [{"work_item_id": "c1", "contract_ref": "k"}],
        }
    )
    spec = MissionSpec.model_validate(
        {
            "group_id": "g",
            "mission_id": "m",
            "contracts": {"k": C1.model_dump(mode="json")},
            "items": [
                {
                    "work_item_id": "p",
                    "contract_ref": "k",
                    "child_mission": child.model_dump(mode="json"),
                }
            ],
        }
    )
    assert spec.items[0].child_mission.items[0].contract == C2
    s = MissionState(spec=spec, items={i.work_item_id: ItemState(spec=i) for i in spec.items})
    back = _rt(s)
    assert back.items["p"].spec.child_mission.items[0].contract == C2
    assert back.items == s.items
    j = MissionSpec.model_validate_json(spec.model_dump_json(exclude_defaults=True))
    assert j == spec


# ---------------------------------------------------------------- compact round trips


def test_odd_states_round_trip_through_continue_as_new() -> None:
    spec = MissionSpec(group_id="g", mission_id="m")
    items = {
        "nofacts": ItemState(spec=WorkItemSpec(work_item_id="nofacts", contract=C1)),
        "other": ItemState(
            spec=WorkItemSpec(work_item_id="other", contract=C1),
            w=WorkItemFacts(state=WorkItemState.OPEN, mission_id="m2"),
        ),
        "none": ItemState(
            spec=WorkItemSpec(work_item_id="none", contract=C1),
            w=WorkItemFacts(state=WorkItemState.OPEN, mission_id=None),
        ),
        "midonly": ItemState(
            spec=WorkItemSpec(work_item_id="midonly", contract=C1), w=WorkItemFacts(mission_id="m")
        ),
        "x:review": ItemState(
            spec=WorkItemSpec(work_item_id="x:review", contract=C1),
            w=WorkItemFacts(state=WorkItemState.ACTIVE, mission_id="m"),
            review_of="x",
        ),
    }
    s = MissionState(spec=spec, items=items, archived={"z": WorkItemState.VERIFIED})
    back = _rt(s)
    for k in items:
        assert back.items[k] == s.items[k], k
    assert back == s


# ---------------------------------------------------------------- plan settled


def _graph(s: MissionState) -> WorkGraph:
    g = WorkGraph()
    g.add(
        {**{w: [] for w in s.archived}, **{w: it.spec.dependencies for w, it in s.items.items()}},
        {w: it.spec.contract.dependency_strategy for w, it in s.items.items()},
    )
    return g


def test_a_dependent_of_a_cancelled_item_ends_the_mission__MW_10_4_b() -> None:
    """``all_verified`` and a dependency cancelled (``work.cancel``): it can never start, so
    the plan says so instead of leaving it settled for good."""
    spec = MissionSpec(group_id="g", mission_id="m")
    s = MissionState(
        spec=spec,
        items={
            "a": ItemState(
                spec=WorkItemSpec(work_item_id="a", contract=C1),
                authorized=True,
                w=WorkItemFacts(state=WorkItemState.CANCELLED),
            ),
            "b": ItemState(
                spec=WorkItemSpec(work_item_id="b", contract=C1, dependencies=["a"]),
                authorized=True,
                w=WorkItemFacts(state=WorkItemState.OPEN),
            ),
        },
    )
    p = plan(s, _graph(s), 0)
    assert p.exhausted == ["b"] and "b" not in p.settled
    assert p.reasons["b"] == "it can never start: a dependency was cancelled (all_verified)"


def test_the_result_of_a_failed_mission_of_10_000_open_items_fits_the_payload_limit() -> None:
    """A 10,000-item Mission that fails early: nothing is finished, trim can drop nothing,
    and the result (also the failure's details) is sent whole."""
    from missionweave.workflows._mission import RESULT_BUDGET, MissionWorkflow

    spec = MissionSpec(group_id="g", mission_id="m", contracts={"k": C1})
    items = {
        f"item-{i:05d}": ItemState(
            spec=WorkItemSpec(
                work_item_id=f"item-{i:05d}",
                contract=C1,
                contract_ref="k",
                dependencies=[f"item-{i - 1:05d}"] if i else [],
            ),
            w=WorkItemFacts(state=WorkItemState.OPEN, mission_id="m"),
            authorized=True,
        )
        for i in range(10_000)
    }
    wf = object.__new__(MissionWorkflow)
    wf.state = MissionState(spec=spec, items=items, status="failed", end_reason="x failed for good")
    r = wf._result()
    assert len(r.model_dump_json()) <= RESULT_BUDGET
    assert r.status == "failed" and len(r.archived) + len(r.items) == 10_000
    assert r.archived["item-00000"] is WorkItemState.OPEN
