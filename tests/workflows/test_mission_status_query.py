"""What the Mission's ``status`` query shows of each WorkItem (pure: no server): a detail as of
its current state, and its outputs, bounded so the answer stays small; how long a WorkItem has
waited for an agent, and its deadline ending the wait."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from missionweave.outcome import error_line
from missionweave.protocol import (
    ProgressReport,
    Rejection,
    RejectionCode,
    WorkGraph,
    WorkItemFacts,
    WorkItemState,
)
from missionweave.protocol.temporal_contract import MissionSpec, OutcomeKind, WorkItemSpec
from missionweave.views import render_table
from missionweave.workflows import ItemState, MissionState
from missionweave.workflows._plan import plan
from missionweave.workflows._run import Runs
from missionweave.workflows._status import (
    OUTPUTS_SHOWN_BYTES,
    STATUS_OUTPUTS_BUDGET,
    current_detail,
    failed_for_good,
    mission_status,
    waiting_lines,
)
from tests.support.mission_harness import contract


def _item(wid: str, state: WorkItemState, detail: str = "", **facts: Any) -> ItemState:
    spec = WorkItemSpec(work_item_id=wid, contract=contract())
    return ItemState(spec=spec, w=WorkItemFacts(state=state, **facts), detail=detail)


def _mission(*items: ItemState) -> MissionState:
    spec = MissionSpec.model_validate({"group_id": "g", "mission_id": "m", "title": "t"})
    return MissionState(spec=spec, items={it.work_item_id: it for it in items})


def test_an_active_item_is_not_shown_as_offered() -> None:
    """The offer's note is stale once the agent took it: ``active at <owner>``."""
    item = _item("a", WorkItemState.ACTIVE, "offered to wc-1", owner="wc-1", ownership_epoch=1)
    assert current_detail(item) == "active at wc-1"
    item.last_progress = ProgressReport(phase="hashing")
    assert current_detail(item) == "active at wc-1 · hashing"
    resumed = _item("b", WorkItemState.ACTIVE, "queued at wc-2", owner="wc-2")
    assert current_detail(resumed) == "active at wc-2"
    # what happened since it was taken stays: it is current
    lost = _item("c", WorkItemState.ACTIVE, "lease_lost: heartbeat timeout", owner="wc-1")
    assert current_detail(lost) == "lease_lost: heartbeat timeout"


def test_other_states_read_their_own_detail() -> None:
    queued = _item("a", WorkItemState.QUEUED, "offered to wc-1", owner="wc-1")
    assert current_detail(queued) == "accepted by wc-1, not started"
    assert (
        current_detail(_item("b", WorkItemState.QUEUED, "queued at wc-1", owner="wc-1"))
        == "queued at wc-1"
    )
    offered = _item("c", WorkItemState.OFFERED, offer_candidates=("wc-1", "wc-2"))
    assert current_detail(offered) == "offered to wc-1, wc-2"
    assert current_detail(_item("d", WorkItemState.VERIFIED, "submitted")) == "verified"
    for history in ("offer refused: owner_active", "lease_lost: WorkerShutdown", "queued at x"):
        assert current_detail(_item("d", WorkItemState.VERIFIED, history)) == "verified"
    child = "child Mission m1:c: 3 of 3 verified"
    assert current_detail(_item("d", WorkItemState.VERIFIED, child)) == child
    assert (
        current_detail(_item("e", WorkItemState.SUBMITTED, "offered to x"))
        == "submitted, under review"
    )
    waiting = _item("f", WorkItemState.OPEN, "no eligible agent")
    assert current_detail(waiting) == "no eligible agent"
    # cancelled while it waited: what it waited for is moot
    gone = _item(
        "g",
        WorkItemState.CANCELLED,
        "no eligible agent",
    )
    gone.no_agent_since_ms = 1
    assert current_detail(gone, 600_000) == "cancelled"
    assert current_detail(_item("h", WorkItemState.CANCELLED, "offered to wc-1")) == "cancelled"


def test_the_status_query_carries_small_outputs_and_says_what_it_left_out() -> None:
    small = _item("small", WorkItemState.VERIFIED, "submitted")
    small.outputs = {"result": {"files": 132, "missing": []}}
    big = _item("big", WorkItemState.VERIFIED, "submitted")
    big.outputs = {"blob": "x" * OUTPUTS_SHOWN_BYTES}
    st = mission_status(_mission(small, big))
    shown = {i.work_item_id: i for i in st.items}
    assert shown["small"].outputs == small.outputs and shown["small"].outputs_omitted_bytes == 0
    assert shown["small"].detail == "verified"
    assert shown["big"].outputs == {}
    assert shown["big"].outputs_omitted_bytes == len(f'{{"blob":"{"x" * OUTPUTS_SHOWN_BYTES}"}}')

    console = Console(width=200, record=True)
    console.print(render_table(st))
    text = console.export_text()
    assert '{"result":{"files":132,"missing":[]}}' in text
    assert f"({shown['big'].outputs_omitted_bytes} bytes, not shown)" in text


def test_the_status_answer_is_bounded_over_all_items() -> None:
    """Each item's outputs fit the per-item bound, but together they would not: the answer
    carries at most :data:`STATUS_OUTPUTS_BUDGET` bytes of them."""
    per_item = OUTPUTS_SHOWN_BYTES - 100
    items = []
    for n in range(2 * STATUS_OUTPUTS_BUDGET // per_item):
        it = _item(f"w{n}", WorkItemState.VERIFIED)
        it.outputs = {"v": "y" * (per_item - 10)}
        items.append(it)
    st = mission_status(_mission(*items))
    carried = sum(len(i.model_dump_json(include={"outputs"})) for i in st.items)
    assert carried <= STATUS_OUTPUTS_BUDGET + 20 * len(st.items)
    assert st.items[0].outputs and not st.items[-1].outputs
    assert st.items[-1].outputs_omitted_bytes > 0
    assert len(st.model_dump_json()) < 2 * STATUS_OUTPUTS_BUDGET


# ------------------------------------------------------------- waiting for an agent (10)

T0 = 1_796_000_000_000  # some epoch milliseconds


def _waiting(wid: str, since_ms: int, deadline_ms: int | None = None) -> ItemState:
    spec = WorkItemSpec(work_item_id=wid, contract=contract(deadline_ms=deadline_ms))
    item = ItemState(
        spec=spec,
        w=WorkItemFacts(state=WorkItemState.OPEN),
        detail="no eligible agent",
        authorized=True,
    )
    item.no_agent_since_ms, item.retry_at_ms = since_ms, since_ms + 30_000
    return item


def test_the_detail_says_how_long_no_agent_could_take_it() -> None:
    item = _waiting("a", T0)
    assert current_detail(item, T0 + 312_000) == "no eligible agent for 5m12s"
    assert current_detail(item, T0 + 3 * 3_600_000 + 60_000) == "no eligible agent for 3h01m"
    assert current_detail(item) == "no eligible agent"  # no clock: no duration
    busy = _waiting("b", T0)
    busy.detail = "every capable agent is busy"
    assert current_detail(busy, T0 + 45_000) == "every capable agent is busy for 45s"
    st = mission_status(_mission(item), T0 + 312_000)
    assert st.items[0].detail == "no eligible agent for 5m12s"


def test_the_missions_current_details_name_what_waits_for_an_agent() -> None:
    items = [_waiting(f"w{n}", T0 - n * 1000) for n in range(7)]
    taken = _item("t", WorkItemState.ACTIVE, "offered to wc-1", owner="wc-1")
    lines = waiting_lines(_mission(taken, *items), T0 + 60_000).splitlines()
    assert lines[1:3] == ["- w0: no eligible agent for 1m00s", "- w1: no eligible agent for 1m01s"]
    assert lines[0] == "" and len(lines) == 1 + 5 + 1 and lines[-1] == "- … and 2 more"
    assert waiting_lines(_mission(taken), T0) == ""


def test_a_deadline_passing_while_no_agent_can_take_it_fails_it() -> None:
    """The contract's ``deadline_ms`` ends the wait: the item is exhausted (the Mission fails),
    with the reason; before it, the plan wakes at the deadline, not only at the next ranking."""
    graph = WorkGraph()
    graph.add({"a": []})
    item = _waiting("a", T0, deadline_ms=T0 + 10_000)
    state = _mission(item)
    before = plan(state, graph, T0 + 5_000)
    assert before.exhausted == [] and before.next_deadline_ms == T0 + 10_000
    after = plan(state, graph, T0 + 10_000)
    assert after.exhausted == ["a"]
    assert after.reasons["a"] == (
        "deadline passed (2026-11-30T00:53:30Z) with no eligible agent for 10s"
    )
    # without a deadline it only waits
    forever = _waiting("a", T0)
    assert plan(_mission(forever), graph, T0 + 10**9).exhausted == []


def test_open_work_items_is_refreshed_at_most_every_two_seconds_status_at_once() -> None:
    """``OpenWorkItems`` is an event in the history per refresh (issue 26): a new count waits
    :data:`OPEN_COUNT_EVERY_MS`; a new status, the first publication and a count of 0 do not."""
    from missionweave.workflows._status import OPEN_COUNT_EVERY_MS, search_attributes_due

    t = 1_000_000
    assert search_attributes_due(None, 0, "running", 5, t)  # the first
    assert not search_attributes_due(("running", 5), t, "running", 5, t + 10**6)  # unchanged
    assert not search_attributes_due(("running", 5), t, "running", 4, t + 1)  # too soon
    assert search_attributes_due(("running", 5), t, "running", 4, t + OPEN_COUNT_EVERY_MS)
    assert search_attributes_due(("running", 5), t, "running", 0, t + 1)  # nothing open
    assert search_attributes_due(("running", 5), t, "failed", 0, t + 1)  # a new status


def test_a_rejected_submission_says_which_deliverable_or_criteria_in_the_status() -> None:
    """Newcomer friction (issue 36): the detail of a WorkItem whose submission the Authority
    refused names the missing deliverable, or the criteria that need Evidence — while it waits
    for its retry and once it failed for good. The worker records the refusal with
    :meth:`Rejection.line` as its ``work.fail`` error."""
    missing = Rejection(
        code=RejectionCode.DELIVERABLE_MISSING,
        reason="a deliverable of the contract has no non-empty output and no submitted Artifact",
        detail={"deliverable": "report", "schema_id": None, "media_type": "text/markdown"},
    )
    error = f"work.submit rejected: {missing.line()}\nTraceback …"
    item = _item("a", WorkItemState.FAILED, attempts=1, error=error, failed_owner="ada")
    s = _mission(item)
    Runs(s).of("a").ended(OutcomeKind.FAILED, error_line(error))
    shown = mission_status(s, 0).items[0]
    assert "deliverable_missing" in shown.detail and "deliverable=report" in shown.detail
    assert "media_type=text/markdown" in shown.detail and "schema_id" not in shown.detail
    assert "deliverable=report" in failed_for_good(item)
    no_evidence = Rejection(
        code=RejectionCode.EVIDENCE_MISSING,
        reason="every acceptance criterion needs Evidence",
        detail={"missing": ["tests", "docs"]},
    )
    assert no_evidence.line() == (
        "evidence_missing: every acceptance criterion needs Evidence (missing=tests, docs)"
    )
