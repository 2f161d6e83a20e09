"""The Mission workflow's state stays under Temporal's payload limit (2 MiB) however many
WorkItems a Mission has: it is the continue-as-new input and the source of the result.
``trim`` drops the bulky details of finished WorkItems (the Group log keeps them all);
``remember`` keeps agent verdicts with their already-applied Events stripped to sequence and
type."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from missionweave.protocol import Evidence, WorkGraph, WorkItemFacts, WorkItemState
from missionweave.protocol.temporal_contract import (
    AuthorizeWorkInput,
    CommandVerdict,
    EventSummary,
    MissionSpec,
    ReviewStep,
    WorkItemSpec,
)
from missionweave.workflows._plan import counts, finished, open_count, plan
from missionweave.workflows._run import Runs, UnderWay
from missionweave.workflows._state import (
    STATE_BUDGET,
    ItemState,
    MissionState,
    ReviewRecord,
    ReviewStage,
    compact,
    trim,
)
from tests.support.mission_harness import contract

C = contract()


def _item(wid: str, state: WorkItemState, note: str) -> ItemState:
    ev = Evidence(
        subject=wid,
        criterion="done",
        method="test",
        result="pass",
        producer="ada",
        timestamp_ms=1,
        summary=note,
    )
    return ItemState(
        spec=WorkItemSpec(work_item_id=wid, contract=C, input={"blob": note}),
        w=WorkItemFacts(state=state),
        outputs={"report": wid},
        artifacts=["a" * 64],
        evidence=[ev],
    )


def _review(item: ItemState) -> ReviewRecord:
    return ReviewRecord(
        steps=[ReviewStep(step="deterministic", passed=True, evidence=item.evidence)]
    )


def _state(n: int, note: str, *, open_items: int = 0) -> MissionState:
    items = {f"v{i}": _item(f"v{i}", WorkItemState.VERIFIED, note) for i in range(n)}
    items |= {f"o{i}": _item(f"o{i}", WorkItemState.SUBMITTED, note) for i in range(open_items)}
    reviews = {w: _review(it) for w, it in items.items()}
    return MissionState(
        spec=MissionSpec(group_id="g", mission_id="m"), items=items, reviews=reviews
    )


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
    assert v.trimmed and v.evidence == [] and s.reviews["v0"].steps == [] and v.spec.input == {}
    assert v.outputs == {"report": "v0"} and v.artifacts == ["a" * 64]  # kept: small enough
    assert v.state is WorkItemState.VERIFIED and v.spec.contract == C
    o = s.items["o0"]  # not finished: its review still needs everything
    assert not o.trimmed and o.evidence and s.reviews["o0"].steps and o.spec.input


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
    s.items["subject"] = subject
    s.reviews["subject"] = ReviewRecord(stage=ReviewStage.SEMANTIC, review_item="v7")
    trim(s)
    assert s.items["v7"].evidence and not s.items["v7"].trimmed
    assert s.items["v8"].trimmed


def test_remembered_verdicts_keep_their_events_without_bodies() -> None:
    s = _state(0, "")
    started = EventSummary(seq=5, type="work.started", body={"x": 1})
    v = CommandVerdict(
        command_id="c1", status="accepted", reply={"lease": {"lease_id": "l"}}, events=[started]
    )
    s.remember(v)
    kept = s.verdicts["c1"]
    assert [(e.seq, e.type, e.body) for e in kept.events] == [(5, "work.started", {})]
    assert kept.reply == v.reply and kept.accepted


# ------------------------------------------------------------- contracts by reference, archive


def _chain_spec(n: int) -> MissionSpec:
    """``n`` WorkItems in a chain under one contract, given once by name."""
    return MissionSpec.model_validate(
        {
            "group_id": "g",
            "mission_id": "m",
            "contracts": {"step": C.wire()},
            "items": [
                {
                    "work_item_id": f"i{k}",
                    "contract_ref": "step",
                    "dependencies": [f"i{k - 1}"] if k else [],
                }
                for k in range(n)
            ],
        }
    )


def test_items_name_a_shared_contract_and_travel_by_the_name() -> None:
    spec = _chain_spec(3)
    assert spec.items[0].contract == C and spec.items[0].contract is spec.items[2].contract
    data = json.loads(spec.model_dump_json())
    assert all("contract" not in i and i["contract_ref"] == "step" for i in data["items"])
    assert MissionSpec.model_validate(data) == spec


def test_a_ten_thousand_item_spec_and_its_state_fit_temporals_payload_limit() -> None:
    spec = _chain_spec(10_000)
    assert len(spec.model_dump_json(exclude_defaults=True)) < 2 << 20
    s = MissionState(
        spec=spec,
        items={
            i.work_item_id: ItemState(
                spec=i,
                authorized=True,
                w=WorkItemFacts(state=WorkItemState.OPEN, mission_id="m", seq=10_000 + k),
            )
            for k, i in enumerate(spec.items)
        },
    )
    data = compact(s, spec.model_copy(update={"items": []}))
    # authorized and open, the bulk of a run: each item without its id, Mission and contract
    assert len(json.dumps(data, separators=(",", ":"))) < 1_200_000
    assert "work_item_id" not in data["items"]["i5"]["spec"] and "mission_id" not in json.dumps(
        data["items"]
    )
    back = MissionState.model_validate(data)
    assert back.items == s.items and back.items["i9999"].spec.contract == C


def test_an_unknown_or_contradicted_contract_reference_is_refused_naming_the_item() -> None:
    bad = {
        "group_id": "g",
        "mission_id": "m",
        "contracts": {"step": C.wire()},
        "items": [{"work_item_id": "a", "contract_ref": "stpe"}],
    }
    with pytest.raises(ValidationError, match=r"items\[0\] \(a\): contract_ref 'stpe'.*step"):
        MissionSpec.model_validate(bad)
    other = contract(objective="something else").wire()
    bad["items"] = [{"work_item_id": "a", "contract_ref": "step", "contract": other}]
    with pytest.raises(ValidationError, match="differs from the contract 'step'"):
        MissionSpec.model_validate(bad)
    with pytest.raises(ValidationError, match="names no contract"):
        WorkItemSpec.model_validate({"work_item_id": "a", "contract_ref": "step"})


def test_work_added_at_run_time_may_name_its_contracts_too() -> None:
    inp = AuthorizeWorkInput.model_validate(
        {
            "contracts": {"extra": C.wire()},
            "items": [{"work_item_id": "x", "contract_ref": "extra"}],
        }
    )
    assert inp.items[0].contract == C and inp.items[0].contract_ref == "extra"


def _finished_chain(n: int, open_tail: int) -> MissionState:
    spec = _chain_spec(n)
    s = MissionState(spec=spec, items={i.work_item_id: ItemState(spec=i) for i in spec.items})
    for k, it in enumerate(s.items.values()):
        done = k < n - open_tail
        it.w = WorkItemFacts(
            state=WorkItemState.VERIFIED if done else WorkItemState.OPEN,
            owner="agent-1" if done else None,
            ownership_epoch=int(done),
            seq=k + 1,
        )
        it.authorized, it.artifacts = True, ["a" * 64] if done else []
        it.outputs = {"result": {"item": it.work_item_id}} if done else {}
    return s


def test_thousands_of_finished_items_are_archived_all_but_what_open_work_needs() -> None:
    s = _finished_chain(10_000, open_tail=2)
    assert _size(s) > STATE_BUDGET
    assert trim(s) is True
    assert _size(s) <= STATE_BUDGET
    # i9997 is verified and i9998 (open) depends on it: its Artifacts go with the offer
    assert s.items["i9997"].artifacts == ["a" * 64]
    assert set(s.items) == {"i9997", "i9998", "i9999"}
    assert len(s.archived) == 9997 and s.state_of("i0") is WorkItemState.VERIFIED
    assert s.state_of("nope") is None
    assert counts(s) == {"verified": 9998, "open": 2} and open_count(s) == 2
    back = MissionState.model_validate(compact(s, s.spec.model_copy(update={"items": []})))
    assert back.archived == s.archived and set(back.items) == set(s.items)


def test_an_archived_dependency_still_makes_its_dependent_eligible() -> None:
    s = _finished_chain(4, open_tail=1)
    trim(s, budget=0)
    assert set(s.items) == {"i2", "i3"} and s.archived == {
        "i0": WorkItemState.VERIFIED,
        "i1": WorkItemState.VERIFIED,
    }
    g = WorkGraph()
    g.add({**{w: [] for w in s.archived}, **{w: it.spec.dependencies for w, it in s.items.items()}})
    assert plan(s, g, now_ms=0).offer == [("i3", [])]
    s.items["i3"].w = WorkItemFacts(state=WorkItemState.VERIFIED, seq=9)
    assert finished(s)


def test_a_plan_settles_what_waits_on_dependencies_and_looks_only_where_told() -> None:
    """Settled WorkItems (verified, or open behind unfinished dependencies with nothing in
    flight) need no look until an Event changes them or a dependency; a plan over ``only``
    looks at those alone, so no workflow task walks 10,000 of them."""
    s = _finished_chain(4, open_tail=3)  # i0 verified; i1 eligible; i2, i3 wait
    g = WorkGraph()
    g.add({w: it.spec.dependencies for w, it in s.items.items()})
    p = plan(s, g, now_ms=0)
    assert p.offer == [("i1", [])] and p.settled == ["i0", "i2", "i3"]
    runs = {"i2": UnderWay(running=1)}  # in flight: looked at again, never settled
    assert plan(s, g, now_ms=0, runs=runs).settled == ["i0", "i3"]
    assert plan(s, g, now_ms=0, only={"i3"}) == type(p)(settled=["i3"])
    assert g.dependents("i1") == ["i2"]  # whom an Event on i1 puts back in view


def test_the_planner_only_reads_and_a_retry_time_goes_through_the_execution_record() -> None:
    """One home for an execution's state (issue 36): the plan changes nothing; the backoff of a
    failed WorkItem it decides is set through the WorkItem's :class:`ItemRun`, and the next
    plan offers it once the backoff is over."""
    s = _finished_chain(2, open_tail=1)  # i0 verified, i1 failed once, retryable
    s.items["i1"].w = WorkItemFacts(state=WorkItemState.FAILED, attempts=1, seq=9)
    g = WorkGraph()
    g.add({w: it.spec.dependencies for w, it in s.items.items()})
    before = s.model_dump()
    p = plan(s, g, now_ms=5_000)
    backoff = s.items["i1"].spec.contract.retry.backoff_ms(1)
    assert backoff > 0 and p.retry_at == {"i1": 5_000 + backoff} and p.offer == []
    assert s.model_dump() == before  # the planner wrote nothing
    runs = Runs(s)
    runs.of("i1").retry_at(p.retry_at["i1"])
    assert s.items["i1"].retry_at_ms == 5_000 + backoff  # the record writes the item's state
    assert plan(s, g, now_ms=5_000 + backoff - 1, runs=runs).offer == []
    assert plan(s, g, now_ms=5_000 + backoff, runs=runs).offer == [("i1", [])]


def test_a_ranking_that_finds_nobody_doubles_the_wait_up_to_its_bound() -> None:
    s = _finished_chain(1, open_tail=1)
    run = Runs(s).of("i0")
    waits = []
    for _ in range(8):
        run.ranked_nobody(1_000, 1_000, "agent ada lacks x", saturated=False)
        retry_at = s.items["i0"].retry_at_ms
        assert retry_at is not None
        waits.append(retry_at - 1_000)
    assert waits == [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]
    assert s.items["i0"].no_agent_since_ms == 1_000
    assert s.items["i0"].detail == "no eligible agent (agent ada lacks x)"
    run.offer_made(["ada"], keep=4)
    it = s.items["i0"]
    assert (it.retry_at_ms, it.empty_rankings, it.no_agent_since_ms) == (None, 0, None)
    assert it.tried == ["ada"] and it.detail == "offered to ada"
