"""What the Mission's ``status`` query shows of each WorkItem: its detail as of its current state
and its outputs, bounded so that the answer stays small. Pure: no clocks, no I/O."""

from __future__ import annotations

import json
from typing import Any

from ..outcome import error_line
from ..protocol import WorkItemState
from ..protocol.temporal_contract import MissionStatus, OutcomeKind, WorkItemStatus
from ._plan import Plan, counts, format_duration
from ._started import started_at_ms
from ._state import ItemState, MissionState, ReviewRecord

#: Bytes of JSON above which a WorkItem's outputs are left out of the ``status`` answer.
OUTPUTS_SHOWN_BYTES = 4096
#: Bytes of outputs one ``status`` answer carries at most, over all its WorkItems.
STATUS_OUTPUTS_BUDGET = 256 * 1024
#: Details that say no agent could take the WorkItem (the ranking found nobody).
_NO_AGENT = ("no eligible agent", "every capable agent is busy")
#: Details written while the WorkItem was being offered: stale once an agent holds it.
_OFFER_NOTES = ("offered to ", *_NO_AGENT, "offer refused", "not_taken")
#: Details written before an agent took the WorkItem: stale once it is active or done.
_BEFORE_TAKEN = (*_OFFER_NOTES, "queued at ")
#: Details of an attempt (how an ``execute_work_item`` ended) or of a wait in review: history
#: once the WorkItem is verified.
_DONE_WITH = (*_BEFORE_TAKEN, *(k.value for k in OutcomeKind), "awaiting ")


#: WorkItems the Mission's current details name as waiting for an agent, at most.
WAITING_LINES = 5


#: Milliseconds of the Mission's own time between two refreshes of the ``OpenWorkItems`` search
#: attribute while its ``MissionStatus`` stays the same (issue 26). Each refresh is an event in
#: the history; a chain of quick WorkItems would otherwise write one per hop.
OPEN_COUNT_EVERY_MS = 2_000


def search_attributes_due(
    published: tuple[str, int] | None, published_at_ms: int, status: str, n: int, now_ms: int
) -> bool:
    """Whether to upsert ``MissionStatus`` = ``status`` and ``OpenWorkItems`` = ``n`` at
    ``now_ms`` (epoch ms, the workflow's clock), given the values ``published`` at
    ``published_at_ms``: always when the status changes, the first time, or the count reaches
    0; a new count otherwise at most every :data:`OPEN_COUNT_EVERY_MS`. A count held back is
    published with the next change after that: ``OpenWorkItems`` may lag by the WorkItems of
    the last two seconds; the ``status`` query is always exact."""
    if published == (status, n):
        return False
    if published is None or published[0] != status or n == 0:
        return True
    return now_ms - published_at_ms >= OPEN_COUNT_EVERY_MS


def current_detail(item: ItemState, now_ms: int | None = None) -> str:
    """The detail shown for ``item``: the last thing the workflow noted, unless its state has
    moved on since (``offered to wc-1`` for an item now active reads ``active at wc-1``).

    - cancelled while it waited or was offered: ``cancelled``;
    - waiting for an agent (``no eligible agent``, ``every capable agent is busy``): for how
      long, given ``now_ms`` (``no eligible agent for 5m12s``), then the nearest miss the
      ranking named (``… for 5s (agent ada lacks capability x@2.0; its card is version 1)``);

    - active: ``active at <owner>`` (and the last progress phase, ``· <phase>``, and how long
      since its lease was granted, ``· since 1m5s``, given ``now_ms``) unless what
      was noted happened since it was taken (e.g. ``lease_lost: …``);
    - queued: ``accepted by <owner>, not started`` when the note is from the offer;
    - offered: ``offered to <candidates>`` when nothing was noted;
    - submitted: ``submitted, under review`` when the note is from the offer;
    - verified: ``verified`` unless the note is what it was (a child Mission's summary): an
      earlier attempt (``lease_lost: …``), an offer or a wait in review is history.
    """
    d, state = item.detail, item.state
    owner = item.owner or "no owner"
    since = item.no_agent_since_ms
    if state is WorkItemState.CANCELLED and (not d or d.startswith(_BEFORE_TAKEN)):
        d = "cancelled"  # what it waited for is moot
    elif since is not None and now_ms is not None and d.startswith(_NO_AGENT):
        head, paren, miss = d.partition(" (")  # the nearest miss, if named, stays last
        d = f"{head} for {format_duration(now_ms - since)}" + (paren + miss if paren else "")
    elif state is WorkItemState.ACTIVE and (not d or d.startswith(_BEFORE_TAKEN)):
        d = f"active at {owner}"
        if item.last_progress is not None:
            d += f" · {item.last_progress.phase}"
        began = started_at_ms(item)
        if began is not None and now_ms is not None:
            d += f" · since {format_duration(max(0, now_ms - began))}"
    elif state is WorkItemState.QUEUED and d.startswith(_OFFER_NOTES):
        d = f"accepted by {owner}, not started"
    elif state is WorkItemState.OFFERED and not d and item.offer_candidates:
        d = "offered to " + ", ".join(item.offer_candidates)
    elif state is WorkItemState.SUBMITTED and (not d or d.startswith(_BEFORE_TAKEN)):
        d = "submitted, under review"
    elif state is WorkItemState.VERIFIED and (not d or d.startswith(_DONE_WITH)):
        d = "verified"
    return d


def failed_for_good(item: ItemState) -> str:
    """``failed after 3 attempt(s) at ada: RuntimeError: kaboom`` (the error's first line)."""
    text = f"failed after {item.attempts} attempt(s)"
    bound = item.w.retry_exhausted
    if bound is not None and bound != "max_attempts":
        text += f" (retry bound {bound} reached)"
    elif not item.w.retryable and item.attempts < item.spec.contract.retry.max_attempts:
        text += " (not retryable)"
    if item.w.failed_owner:
        text += f" at {item.w.failed_owner}"
    why = error_line(item.error)
    return text + (f": {why}" if why else "")


def failure_notes(state: MissionState, p: Plan) -> dict[str, str]:
    """The detail each WorkItem is given as ``p`` finds WorkItems failed for good: why each of
    ``p.exhausted`` failed (a child's item says what its child did already); and, when that
    fails the running Mission, why each dependent never starts (:func:`blocked_dependents`).
    The main loop notes them (:meth:`~._run.ItemRun.note`)."""
    notes = {
        wid: p.reasons.get(wid) or failed_for_good(state.items[wid])
        for wid in p.exhausted
        if state.items[wid].spec.child_mission is None
    }
    if p.exhausted and state.status == "running":
        notes.update(blocked_dependents(state, p.exhausted))
    return notes


def failure_reason(state: MissionState, p: Plan) -> str | None:
    """If the Mission runs and ``p`` finds WorkItems failed for good, it fails: its reason (the
    first one's failure). ``None``: nothing failed for good, or the Mission has ended already."""
    if not p.exhausted or state.status != "running":
        return None
    first = state.items[p.exhausted[0]]
    why = (
        p.reasons.get(first.work_item_id)
        or error_line(first.error)
        or (first.detail if first.spec.child_mission is not None else "")
    )
    return f"{first.work_item_id} failed for good" + (f": {why}" if why else "")


def blocked_dependents(state: MissionState, failed: list[str]) -> dict[str, str]:
    """Before the Mission fails because the WorkItems ``failed`` failed for good: for each open
    WorkItem that waited on one of them (directly or through another waiting one) and has no
    detail yet, the reason it never started (``not started: dependency a failed for good``, or
    ``not started: dependency b did not start (a failed for good)``), which the Mission's end
    otherwise leaves empty (issue 29 item 5)."""
    cause = {w: w for w in failed}  # a WorkItem that never starts -> the failure behind it
    notes: dict[str, str] = {}
    for wid, it in state.items.items():  # authorization order: dependencies come first
        if it.state is not WorkItemState.OPEN or wid in cause:
            continue
        dep = next((d for d in it.spec.dependencies if d in cause), None)
        if dep is None:
            continue
        cause[wid] = cause[dep]
        if not it.detail:
            root = cause[dep]
            notes[wid] = (
                f"not started: dependency {dep} failed for good"
                if dep == root
                else f"not started: dependency {dep} did not start ({root} failed for good)"
            )
    return notes


def waiting_lines(state: MissionState, now_ms: int) -> str:
    """For the Mission's current details: a line per WorkItem no agent could take, with how
    long (``\\n- a: no eligible agent for 5m12s``), at most :data:`WAITING_LINES` and how many
    more; empty when none waits."""
    waiting = [
        f"- {it.work_item_id}: {current_detail(it, now_ms)}"
        for it in state.items.values()
        if it.no_agent_since_ms is not None
        and it.state in (WorkItemState.OPEN, WorkItemState.OFFERED, WorkItemState.FAILED)
    ]
    if len(waiting) > WAITING_LINES:
        waiting = [*waiting[:WAITING_LINES], f"- … and {len(waiting) - WAITING_LINES} more"]
    return "".join("\n" + line for line in waiting)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def item_status(
    item: ItemState,
    outputs_room: int,
    now_ms: int | None = None,
    review: ReviewRecord | None = None,
) -> WorkItemStatus:
    """One WorkItem as the ``status`` query shows it, with its ``review``; its outputs only if
    their JSON is at most :data:`OUTPUTS_SHOWN_BYTES` and ``outputs_room`` bytes (else
    ``outputs_omitted_bytes``)."""
    r = review or ReviewRecord()
    size = _json_size(item.outputs) if item.outputs else 0
    shown = size <= min(OUTPUTS_SHOWN_BYTES, outputs_room)
    return WorkItemStatus(
        work_item_id=item.work_item_id,
        state=item.state,
        owner=item.owner,
        ownership_epoch=item.ownership_epoch,
        lease_id=item.lease_id,
        attempts=item.attempts,
        offer_candidates=item.offer_candidates,
        dependencies=item.spec.dependencies,
        last_progress=item.last_progress,
        detail=current_detail(item, now_ms),
        error=item.error,
        review_stage=r.stage.value if r.stage is not None else None,
        review_item=r.review_item,
        review_digest=r.digest,
        review=[st.model_dump(mode="json") for st in r.steps],
        outputs=dict(item.outputs) if shown else {},
        outputs_omitted_bytes=0 if shown else size,
    )


def mission_status(state: MissionState, now_ms: int | None = None) -> MissionStatus:
    """The ``status`` query's answer: per WorkItem, in authorization order, its state, owner,
    epoch, lease, attempts, current detail and outputs (at most :data:`STATUS_OUTPUTS_BUDGET`
    bytes of outputs in all; the WorkItems after that show how many bytes were left out)."""
    room = STATUS_OUTPUTS_BUDGET
    items = []
    for it in state.items.values():
        shown = item_status(it, room, now_ms, state.reviews.get(it.work_item_id))
        room -= _json_size(shown.outputs) if shown.outputs else 0
        items.append(shown)
    return MissionStatus(
        mission_id=state.spec.mission_id,
        group_id=state.spec.group_id,
        status=state.status,
        counts=counts(state),
        event_range=(state.first_seq, state.last_seq)
        if state.first_seq is not None and state.last_seq is not None
        else None,
        items=items,
        reason=state.end_reason,
    )


__all__ = [
    "OUTPUTS_SHOWN_BYTES",
    "STATUS_OUTPUTS_BUDGET",
    "blocked_dependents",
    "current_detail",
    "failed_for_good",
    "failure_notes",
    "failure_reason",
    "mission_status",
    "waiting_lines",
]
