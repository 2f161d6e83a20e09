"""Pure planning for the Mission workflow: which WorkItems need an offer now, which have run out
of retries, and when the next durable deadline falls. No clocks: ``now_ms`` is passed in. It
only reads: what it decides the main loop carries out through each WorkItem's execution record
(:class:`~._run.ItemRun`)."""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..protocol import TERMINAL_STATES, WorkGraph, WorkItemState, state_counts
from ._run import IDLE, UnderWay
from ._state import ItemState, MissionState


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
        reasons: why an item of ``exhausted`` failed, when it is not that its retries ran out
            (its contract's deadline passed while it waited for an agent).
        next_deadline_ms: the earliest future deadline to wake up for (``None``: none).
        retry_at: failed items whose retry waits out its backoff, and until when (epoch ms):
            the main loop sets their retry time (:meth:`~._run.ItemRun.retry_at`).
        settled: items that need no planning until an Event changes them or one of their
            dependencies: verified or cancelled, or open and waiting on dependencies with
            nothing in flight.
    """

    offer: list[tuple[str, list[str]]] = field(default_factory=list)
    resume: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    exhausted: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    next_deadline_ms: int | None = None
    retry_at: dict[str, int] = field(default_factory=dict)
    settled: list[str] = field(default_factory=list)

    def wake_at(self, t: int | None) -> None:
        if t is not None and (self.next_deadline_ms is None or t < self.next_deadline_ms):
            self.next_deadline_ms = t


def retries_left(item: ItemState, now_ms: int) -> bool:
    """Whether another attempt may be offered (MW-11.4-d). The retry bound is decided once, by
    the Authority as it records the failure: ``work.failed``'s ``retryable`` is false after a
    failure its agent reported as not retryable (``PermanentFailure``, budget exceeded) or one
    past a retry bound — attempts, total wait, deadline, cost cap or remaining budget
    (``retry_exhausted``, :func:`~missionweave.protocol.exhausted_retry_bound`). The workflow
    only adds that a retry waiting out its backoff is not offered once the deadline has come
    (``now_ms``, epoch milliseconds, the workflow's clock)."""
    c = item.spec.contract
    if not item.w.retryable:
        return False
    return not (c.deadline_ms is not None and now_ms >= c.deadline_ms)


def _awaits_an_agent(it: ItemState, graph: WorkGraph, states: Mapping[str, WorkItemState]) -> bool:
    """Eligible, for an agent, and nobody holds it: open with its dependencies met, or offered
    with no offer activity left (it expired, or every candidate declined)."""
    if it.spec.child_mission is not None:
        return False
    if it.state is WorkItemState.OPEN:
        return graph.is_eligible(it.work_item_id, states)
    return it.state is WorkItemState.OFFERED


def deadline_reason(it: ItemState, deadline_ms: int) -> str:
    """``deadline passed (…Z) with no eligible agent for 5m12s``; ``… before an agent took it``
    when agents were offered it but none took it; ``… after 1 failed attempt(s)`` when a retry
    was due."""
    at = datetime.fromtimestamp(deadline_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if it.state is WorkItemState.FAILED:
        return f"deadline passed ({at}) after {it.attempts} failed attempt(s): no retry after it"
    if it.no_agent_since_ms is not None:
        waited = format_duration(deadline_ms - it.no_agent_since_ms)
        return f"deadline passed ({at}) with no eligible agent for {waited}"
    return f"deadline passed ({at}) before an agent took it"


def format_duration(ms: int) -> str:
    """``45s``, ``5m12s``, ``2h03m``, ``3d04h``: a duration in milliseconds, for people."""
    s = max(0, ms) // 1000
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


class _States(Mapping[str, WorkItemState]):
    """Every WorkItem's state, archived ones included, read on demand (no copy per plan)."""

    def __init__(self, state: MissionState) -> None:
        self._s = state

    def __getitem__(self, wid: str) -> WorkItemState:
        got = self._s.state_of(wid)
        if got is None:
            raise KeyError(wid)
        return got

    def __iter__(self) -> Iterator[str]:
        yield from self._s.archived
        yield from self._s.items

    def __len__(self) -> int:
        return len(self._s.archived) + len(self._s.items)


def plan(
    state: MissionState,
    graph: WorkGraph,
    now_ms: int,
    only: Container[str] | None = None,
    runs: Mapping[str, UnderWay] | None = None,
) -> Plan:
    """Decide, from the state alone, what needs doing at ``now_ms``.

    Args:
        only: look at these WorkItems alone (the others are settled, :attr:`Plan.settled`);
            ``None``: at all of them. Either way in authorization order.
        runs: what is under way for each WorkItem (none when not given): a WorkItem with
            anything under way is left alone.
    """
    p = Plan()
    runs = runs or {}
    states = _States(state)
    for wid, it in state.items.items():
        if only is not None and wid not in only:
            continue
        f = runs.get(wid, IDLE)
        if it.state in TERMINAL_STATES and not (f.running or f.reviewing or f.syncing):
            p.settled.append(wid)
            continue
        if not it.authorized or it.state in TERMINAL_STATES or f.running:
            continue
        if f.offer_pending or f.reviewing or f.syncing:
            continue
        deadline = it.spec.contract.deadline_ms
        if deadline is not None and _awaits_an_agent(it, graph, states):
            if now_ms >= deadline:  # nobody took it in time: it never will (MW-10.1-a)
                p.exhausted.append(wid)
                p.reasons[wid] = deadline_reason(it, deadline)
                continue
            p.wake_at(deadline)
        if it.retry_at_ms is not None and now_ms < it.retry_at_ms:
            p.wake_at(it.retry_at_ms)
            continue
        match it.state:
            case WorkItemState.OPEN:
                if not graph.is_eligible(wid, states):
                    if graph.blocked_forever(wid, states):  # e.g. all_verified, one cancelled
                        p.exhausted.append(wid)
                        p.reasons[wid] = (
                            "it can never start: a dependency was cancelled "
                            f"({graph.strategy(wid).value})"
                        )
                    else:
                        p.settled.append(wid)  # until a dependency's Event (flags are clear)
                    continue
                if it.spec.child_mission is not None:
                    p.children.append(wid)
                else:
                    p.offer.append((wid, []))
            case WorkItemState.FAILED:
                if it.spec.child_mission is not None or not retries_left(it, now_ms):
                    p.exhausted.append(wid)
                    c = it.spec.contract
                    if (  # the deadline passed while a retry was due
                        c.deadline_ms is not None
                        and it.spec.child_mission is None
                        and it.w.retryable
                    ):
                        p.reasons[wid] = deadline_reason(it, c.deadline_ms)
                else:
                    backoff = it.spec.contract.retry.backoff_ms(it.attempts)
                    if it.retry_at_ms is None and backoff > 0:
                        p.retry_at[wid] = now_ms + backoff
                        p.wake_at(p.retry_at[wid])
                    else:
                        p.offer.append((wid, []))
            case WorkItemState.OFFERED:
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
            case WorkItemState.QUEUED:
                if it.start_deadline_ms is not None and now_ms >= it.start_deadline_ms:
                    # MW-11.5-a. The owner is in ``tried`` (it accepted this attempt's offer), so
                    # others go first; once nobody else is eligible ``tried`` starts over and the
                    # owner may get it back (a fixed exclusion would leave it stuck for good).
                    p.offer.append((wid, []))
                elif it.owner is not None:
                    p.resume.append(wid)
            case WorkItemState.ACTIVE:
                # its execution's result was lost: re-offer once the lease has expired (the
                # Authority closes the former owner first, MW-11.5-a)
                lease = it.w.lease
                if lease is not None and now_ms < int(lease["expires_at_ms"]):
                    p.wake_at(int(lease["expires_at_ms"]))
                else:
                    p.offer.append((wid, []))
            case WorkItemState.SUBMITTED if state.stage_of(wid) is None:
                p.review.append(wid)
            case _:
                pass
    return p


class _Verified(_States):
    """The states as they will be once ``verified`` are: what a hop's coordinator step may
    offer after its decisions (:func:`offers_after`)."""

    def __init__(self, state: MissionState, verified: Container[str]) -> None:
        super().__init__(state)
        self._verified = verified

    def __getitem__(self, wid: str) -> WorkItemState:
        return WorkItemState.VERIFIED if wid in self._verified else super().__getitem__(wid)


def offers_after(
    state: MissionState,
    graph: WorkGraph,
    now_ms: int,
    accepting: list[str],
    runs: Mapping[str, UnderWay],
) -> list[tuple[str, list[str]]]:
    """The dependents that :func:`plan` would offer at ``now_ms`` once every WorkItem of
    ``accepting`` is verified, and are not eligible before: ``(dependent, the WorkItems of
    accepting it waits for)``, in authorization order, each once. The hop's coordinator step
    offers them in the request that accepts the results (issue 26); one whose result is not
    accepted is planned again as usual."""
    verified = frozenset(accepting)
    after = _Verified(state, verified)
    now = _States(state)
    found: dict[str, list[str]] = {}
    for wid in accepting:
        for dep in graph.dependents(wid):
            it = state.items.get(dep)
            if it is None or dep in found:
                continue
            f = runs.get(dep, IDLE)
            if (
                not it.authorized
                or it.state is not WorkItemState.OPEN
                or it.spec.child_mission is not None
                or f.running
                or f.offer_pending
                or f.syncing
                or f.reviewing
                or (it.retry_at_ms is not None and now_ms < it.retry_at_ms)
                or ((deadline := it.spec.contract.deadline_ms) is not None and now_ms >= deadline)
            ):
                continue
            if graph.is_eligible(dep, after) and not graph.is_eligible(dep, now):
                found[dep] = [d for d in graph.dependencies(dep) if d in verified]
    order = {w: n for n, w in enumerate(state.items)}
    return sorted(found.items(), key=lambda kv: order[kv[0]])


def open_count(state: MissionState) -> int:
    """WorkItems not yet verified or cancelled (an archived one is)."""
    return sum(1 for it in state.items.values() if it.state not in TERMINAL_STATES)


def counts(state: MissionState) -> dict[str, int]:
    """WorkItems per state, the archived ones included."""
    return state_counts([*state.archived.values(), *(it.state for it in state.items.values())])


def finished(state: MissionState) -> bool:
    """Every WorkItem is verified or cancelled."""
    return all(it.state in TERMINAL_STATES for it in state.items.values()) and all(
        it.authorized for it in state.items.values()
    )
