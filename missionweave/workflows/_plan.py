"""Pure planning for the Mission workflow: which WorkItems need an offer now, which have run out
of retries, and when the next durable deadline falls. No clocks: ``now_ms`` is passed in."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol import TERMINAL_STATES, WorkGraph, WorkItemState
from ._state import ItemState, MissionState

S = WorkItemState


@dataclass
class Plan:
    """What the main loop should do next.

    Attributes:
        offer: items that need candidates ranked and an offer made, with the agents to exclude.
        resume: queued items to hand back to their owner (``execute_work_item`` without offer).
        review: submitted items whose review has not begun (their submission reached the
            Authority but the activity's result was lost).
        children: items to hand to a child Mission.
        exhausted: items whose failure is final (retries, deadline or cost exhausted).
        next_deadline_ms: the earliest future deadline to wake up for (``None``: none).
    """

    offer: list[tuple[str, list[str]]] = field(default_factory=list)
    resume: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    exhausted: list[str] = field(default_factory=list)
    next_deadline_ms: int | None = None

    def wake_at(self, t: int | None) -> None:
        if t is not None and (self.next_deadline_ms is None or t < self.next_deadline_ms):
            self.next_deadline_ms = t


def retries_left(item: ItemState, now_ms: int) -> bool:
    """Whether the contract's retry policy still allows an attempt (MW-11.4-d): never after a
    failure its agent reported as not retryable (``PermanentFailure``, budget exceeded)."""
    c = item.spec.contract
    if not item.w.retryable or item.attempts >= c.retry.max_attempts:
        return False
    return not (c.deadline_ms is not None and now_ms >= c.deadline_ms)


def plan(state: MissionState, graph: WorkGraph, now_ms: int) -> Plan:
    """Decide, from the state alone, what needs doing at ``now_ms``."""
    p = Plan()
    states = {wid: it.state for wid, it in state.items.items()}
    for wid, it in state.items.items():
        if not it.authorized or it.state in TERMINAL_STATES or it.running:
            continue
        if it.offer_pending or it.selecting or it.reviewing or it.syncing:
            continue
        if it.retry_at_ms is not None and now_ms < it.retry_at_ms:
            p.wake_at(it.retry_at_ms)
            continue
        match it.state:
            case S.OPEN:
                if not graph.is_eligible(wid, states):
                    continue
                if it.spec.child_mission is not None:
                    p.children.append(wid)
                else:
                    p.offer.append((wid, []))
            case S.FAILED:
                if it.spec.child_mission is not None or not retries_left(it, now_ms):
                    p.exhausted.append(wid)
                else:
                    backoff = it.spec.contract.retry.backoff_ms(it.attempts)
                    if it.retry_at_ms is None and backoff > 0:
                        it.retry_at_ms = now_ms + backoff
                        p.wake_at(it.retry_at_ms)
                    else:
                        p.offer.append((wid, []))
            case S.OFFERED:
                # no offer activity is left: it expired (schedule-to-start), everyone declined,
                # or an agent could not take it
                expires = it.w.offer_expires_at_ms
                if (
                    it.w.offer_id is not None
                    and expires is not None
                    and now_ms < expires
                    and (not set(it.w.offer_candidates) <= set(it.w.declined))
                ):
                    p.wake_at(expires)
                else:
                    p.offer.append((wid, list(it.tried)))
            case S.QUEUED:
                if it.start_deadline_ms is not None and now_ms >= it.start_deadline_ms:
                    # MW-11.5-a. The owner is in ``tried`` (it accepted this attempt's offer), so
                    # others go first; once nobody else is eligible ``tried`` starts over and the
                    # owner may get it back (a fixed exclusion would leave it stuck for good).
                    p.offer.append((wid, []))
                elif it.owner is not None:
                    p.resume.append(wid)
            case S.ACTIVE:
                # its execution's result was lost: re-offer once the lease has expired (the
                # Authority closes the former owner first, MW-11.5-a)
                lease = it.w.lease
                if lease is not None and now_ms < int(lease["expires_at_ms"]):
                    p.wake_at(int(lease["expires_at_ms"]))
                else:
                    p.offer.append((wid, []))
            case S.SUBMITTED if it.review_stage is None:
                p.review.append(wid)
            case _:
                pass
    return p


def open_count(state: MissionState) -> int:
    """WorkItems not yet verified or cancelled."""
    return sum(1 for it in state.items.values() if it.state not in TERMINAL_STATES)


def counts(state: MissionState) -> dict[str, int]:
    """WorkItems per state."""
    out: dict[str, int] = {}
    for it in state.items.values():
        out[it.state.value] = out.get(it.state.value, 0) + 1
    return out


def finished(state: MissionState) -> bool:
    """Every WorkItem is verified or cancelled."""
    return all(it.state in TERMINAL_STATES for it in state.items.values()) and all(
        it.authorized for it in state.items.values()
    )
