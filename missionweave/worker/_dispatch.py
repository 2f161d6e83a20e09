"""The agent's start queue: accepted WorkItems wait here, heartbeating, for a slot.

Acceptance is a schedule commitment, not immediate execution (spec 10.3): an
``execute_work_item`` activity whose WorkItem the agent accepted (or owns again after a
checkpoint) calls :meth:`Dispatcher.wait_for_slot`; the :class:`Scheduler` decides which
waiting item gets the next free slot (MW-11.1-c/e). The dispatcher also relays the scheduler's
cooperative preemption requests (MW-11.3-g), publishes Presence — free slots and that
Group's own queue depth, never another Group's details (MW-11.2-b) — when the Authority client
offers ``put_presence``, and discloses each waiting WorkItem's schedule to its Group on
acceptance and on every material change (:mod:`._disclosure`, MW-11.2-a/b).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from ..authority.wire import now_ms
from ..protocol import Actor, CommandType
from ._disclosure import MIN_INTERVAL_MS, Disclosure, estimate, material
from ._scheduler import QueuedItem, RunningItem, SchedulePlan, Scheduler
from ._slots import SlotBoard, SlotKey
from ._state import LocalState

log = logging.getLogger(__name__)

#: Seconds after which an unchanged Presence report is sent again.
PRESENCE_REFRESH_S = 10.0
#: Seconds between two Presence reports of one Group: a burst of slot changes (a layer of
#: WorkItems starting and ending) is one report, not one per change.
PRESENCE_MIN_INTERVAL_S = 0.25

#: ``AuthorityClient.put_presence``: ``async (actor, group_id, free_slots, queue_depth, *,
#: issued_at_ms)``.
PresenceFn = Callable[..., Awaitable[Any]]

#: ``async (group_id, bodies)``: send one ``work.disclose_schedule`` per body to the Group.
DiscloseFn = Callable[[str, list[dict[str, Any]]], Awaitable[Any]]


def discloser(actor: Actor, client: Any, clock: Callable[[], int] = now_ms) -> DiscloseFn:
    """A :data:`DiscloseFn` sending ``actor``'s signed ``work.disclose_schedule`` Commands,
    issued at ``clock()``, through ``client`` (an ``AuthorityClient``) in one request; a
    refusal (the item started or changed hands meanwhile) is logged."""

    async def disclose(group_id: str, bodies: list[dict[str, Any]]) -> None:
        at = clock()
        cmds = [
            actor.command(CommandType.WORK_DISCLOSE_SCHEDULE, group_id, b, issued_at_ms=at)
            for b in bodies
        ]
        for r in await client.submit_many(cmds):
            if not r.accepted:
                log.debug("schedule disclosure refused: %s", r.rejection)

    return disclose


@dataclass(slots=True)
class _Waiting:
    item: QueuedItem
    needs_approval: bool
    declared: bool
    fut: asyncio.Future[None]


class NoSlot(Exception):
    """No slot will come: the runtime is shutting down, or (:class:`StartDeadlineMissed`)
    the start deadline passed while the WorkItem waited (MW-11.5-a)."""


class StartDeadlineMissed(NoSlot):
    """The WorkItem's start deadline passed while it waited for a slot (MW-11.5-a)."""


class Dispatcher:
    """Grants slots to waiting WorkItems in the scheduler's order.

    Args:
        actor: the agent (signs Presence).
        state: the local projection (execution approvals).
        groups: the Groups followed.
        scheduler: the scheduling policy.
        board: the slot board.
        presence: ``AuthorityClient.put_presence``, or ``None`` to publish no Presence.
        disclose: sends schedule disclosures to a Group, or ``None`` to disclose nothing.
        tick_s: seconds between plans when nothing happens (deadlines, anti-starvation).
        clock: epoch-millisecond clock (deadlines, ages, Presence time).
    """

    def __init__(
        self,
        actor: Actor,
        state: LocalState,
        groups: list[str],
        scheduler: Scheduler,
        board: SlotBoard,
        *,
        presence: PresenceFn | None = None,
        disclose: DiscloseFn | None = None,
        tick_s: float = 1.0,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.clock = clock
        self.actor, self.state, self.groups, self.scheduler = actor, state, groups, scheduler
        self.board, self.presence, self.tick_s = board, presence, tick_s
        self._wake = asyncio.Event()
        self.disclose = disclose
        self._waiting: dict[SlotKey, _Waiting] = {}
        #: per waiting item, its last disclosure and when (epoch ms)
        self._disclosed: dict[SlotKey, tuple[Disclosure, int]] = {}
        self._to_disclose: dict[str, list[Disclosure]] = {}
        self._last_presence: dict[str, tuple[tuple[int, int], float]] = {}
        self._closed: str | None = None
        self._presence_due: float | None = None

    def close(self, reason: str) -> None:
        """Grant no more slots: every waiting WorkItem (and any that comes) gets
        :class:`NoSlot` — it stays queued at the Authority, for this agent's next run."""
        self._closed = reason
        for w in self._waiting.values():
            if not w.fut.done():
                w.fut.set_exception(NoSlot(reason))

    def poke(self) -> None:
        """Plan again soon (a slot freed, an approval arrived)."""
        self._wake.set()

    async def run(self) -> None:
        """Plan and grant whenever poked (or every ``tick_s``), until cancelled."""
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that races the event, and stop() would then wait forever
            wait = self.tick_s
            if self._presence_due is not None:
                wait = max(0.0, min(wait, self._presence_due - time.monotonic()))
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            self.dispatch_once()
            await self._publish_presence()
            await self._publish_disclosures()

    def depth(self, group_id: str | None = None) -> int:
        """WorkItems waiting for a slot, in ``group_id`` or in all Groups."""
        return sum(1 for k in self._waiting if group_id is None or k[0] == group_id)

    def depths(self) -> dict[str, int]:
        """WorkItems waiting for a slot, per Group (a snapshot: safe from another thread)."""
        out: dict[str, int] = {}
        for group_id, _ in list(self._waiting):
            out[group_id] = out.get(group_id, 0) + 1
        return out

    async def wait_for_slot(
        self, item: QueuedItem, *, needs_approval: bool = False, declared: bool = False
    ) -> None:
        """Wait until the scheduler gives ``item`` a slot; the slot is then reserved for its
        ``work.start`` (release it with ``board.release`` if the start is refused). Unless it
        gets one at once, its schedule is disclosed to its Group (MW-11.2-a); ``declared``:
        its handler declares its duration (``item.estimate_ms``), which raises the confidence.

        Raises:
            StartDeadlineMissed: its start deadline passed first.
            NoSlot: the runtime is shutting down, or a newer attempt of the same WorkItem
                (Temporal's retry of this activity) took this one's place in the queue.
            asyncio.CancelledError: the activity was cancelled (nothing stays reserved).
        """
        if self._closed is not None:
            raise NoSlot(self._closed)
        key = (item.group_id, item.work_item_id)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        mine = _Waiting(item, needs_approval, declared, fut)
        older = self._waiting.get(key)
        if older is not None and not older.fut.done():
            # A newer attempt of the same WorkItem (Temporal ran the activity again, e.g.
            # after this agent was frozen past its heartbeat timeout): the older one is stale
            # and ends now; the newer one takes its place in the queue.
            older.fut.set_exception(NoSlot(f"{item.work_item_id}: superseded by a newer attempt"))
        self._waiting[key] = mine
        self.poke()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.board.release(key)  # granted just as it was cancelled
            raise
        finally:
            # Only this attempt's own entry: a stale waiter that exits (cancelled, superseded)
            # must never unqueue the newer attempt filed under the same key, which would then
            # wait for ever, heartbeating, never served (issue 24, finding 1).
            if self._waiting.get(key) is mine:
                del self._waiting[key]
                self._disclosed.pop(key, None)

    def queues(self) -> dict[str, list[QueuedItem]]:
        """The waiting WorkItems per Group that may start: approved when their contract
        requires it (the Authority's ``approval.execution_granted``, seen in the projection).
        Each item says whether it is approved (the scheduler's risk gate waits for that)."""
        out: dict[str, list[QueuedItem]] = {g: [] for g in self.groups}
        for (g, wid), w in self._waiting.items():
            if w.fut.done():
                continue
            it = w.item
            view = self.state.item(g, wid)
            approved = (
                view is not None and view.approved and view.ownership_epoch == it.ownership_epoch
            )
            if w.needs_approval and not approved:
                continue
            if approved != it.approved:
                it = dataclasses.replace(it, approved=approved)
            out.setdefault(g, []).append(it)
        return out

    def running(self) -> list[RunningItem]:
        """The slots taken: running handlers (their metadata, never their context), then
        starts in flight."""
        slots = {s.key: s for s in self.board.running()}
        out = []
        for key in sorted(self.board.busy()):
            s = slots.get(key)
            if s is None:
                out.append(RunningItem(key[0], key[1], self.clock(), interruptible=False))
            else:
                out.append(s.item)
        return out

    def dispatch_once(self) -> SchedulePlan:
        """One scheduling round: grant slots, ask for preemptions, fail missed deadlines."""
        queues = self.queues()
        plan = self.scheduler.plan(queues, self.running(), self.clock())
        for it in plan.start:
            key = (it.group_id, it.work_item_id)
            self.board.reserve(key, hold_s=it.lease_ms / 1000)
            self._waiting[key].fut.set_result(None)
        for r in plan.preempt:
            self.board.request_pause((r.group_id, r.work_item_id), "slot needed by another Group")
        for m in plan.missed:
            fut = self._waiting[(m.group_id, m.work_item_id)].fut
            log.warning("%s missed its start deadline; left to the Coordinator", m.work_item_id)
            fut.set_exception(StartDeadlineMissed(m.work_item_id))
        if self.disclose is not None:
            self._plan_disclosures(queues, {(i.group_id, i.work_item_id) for i in plan.start})
        return plan

    def _plan_disclosures(
        self, queues: dict[str, list[QueuedItem]], started: Collection[SlotKey] = ()
    ) -> None:
        """Queue the disclosures due: items still waiting that were never disclosed, or whose
        schedule changed materially, and items given a slot this round that were never
        disclosed — accepted and started at once, they are disclosed on start (MW-11.2-a);
        each computed from its own Group's waiting items only (MW-11.2-b)."""
        now, free = self.clock(), self.board.free()
        by_group: dict[str, list[QueuedItem]] = {}
        for key, w in self._waiting.items():
            if not w.fut.done() or key in started:
                by_group.setdefault(key[0], []).append(w.item)
        ready = {(i.group_id, i.work_item_id): i for q in queues.values() for i in q}
        gate = self.scheduler.risk_gate
        for key, w in self._waiting.items():
            if key in started:
                if key not in self._disclosed:
                    # it starts now: the window is now, whatever was queued before it
                    d = estimate(w.item, [w.item], slots=self.board.capacity, free_slots=1,
                                 max_wait_ms=None, now_ms=now, declared=w.declared)  # fmt: skip
                    d = dataclasses.replace(
                        d,
                        capacity="draining" if self._closed else ("available" if free else "busy"),
                        free_slots=free,
                        queue_depth=len(by_group[key[0]]),
                    )
                    self._disclosed[key] = (d, now)
                    self._to_disclose.setdefault(key[0], []).append(d)
                continue
            if w.fut.done():
                continue
            it = ready.get(key)  # not there: it waits for the approval its contract requires
            held = it is None or (gate.needs_approval(it.risk_class) and not it.approved)
            d = estimate(
                w.item,
                by_group[key[0]],
                slots=self.board.capacity,
                free_slots=free,
                max_wait_ms=self.scheduler.max_wait_ms,
                now_ms=now,
                declared=w.declared,
                draining=self._closed is not None,
                held=held,
            )
            last = self._disclosed.get(key)
            if last is not None and now - last[1] < MIN_INTERVAL_MS:
                continue
            if material(last[0] if last else None, d, now):
                self._disclosed[key] = (d, now)
                self._to_disclose.setdefault(key[0], []).append(d)

    async def _publish_disclosures(self) -> None:
        """Send the queued disclosures, one request per Group; never fatal."""
        pending, self._to_disclose = self._to_disclose, {}
        if self.disclose is None:
            return
        for g, ds in pending.items():
            try:
                await self.disclose(g, [d.body() for d in ds])
            except Exception as exc:  # a courtesy to the Group: log it, go on
                log.info("schedule disclosure not published in %s: %r", g, exc)

    async def _publish_presence(self) -> None:
        """Report free slots and this Group's queue depth to each Group when they change, and
        at least every :data:`PRESENCE_REFRESH_S` (the Authority forgets reports after 30 s).
        Each Group sees only its own queue depth (MW-11.2-b). Reports of one Group are at
        least :data:`PRESENCE_MIN_INTERVAL_S` apart (a change meanwhile goes out then)."""
        if self.presence is None:
            return
        free = self.board.free()
        mono = time.monotonic()
        self._presence_due = None
        for g in self.groups:
            report = (free, self.depth(g))
            last = self._last_presence.get(g)
            if last is not None and last[0] == report and mono - last[1] < PRESENCE_REFRESH_S:
                continue
            if last is not None and mono - last[1] < PRESENCE_MIN_INTERVAL_S:
                due = last[1] + PRESENCE_MIN_INTERVAL_S
                self._presence_due = min(self._presence_due or due, due)
                continue
            try:
                await self.presence(self.actor, g, report[0], report[1], issued_at_ms=self.clock())
                self._last_presence[g] = (report, mono)
            except TypeError as exc:  # an Authority client whose put_presence differs
                log.warning("Presence not published (put_presence signature): %s", exc)
                self.presence = None
                return
            except Exception as exc:  # Presence is ephemeral: never fatal
                log.info("Presence not published in %s: %r", g, exc)


__all__ = ["DiscloseFn", "Dispatcher", "NoSlot", "PresenceFn", "StartDeadlineMissed", "discloser"]
