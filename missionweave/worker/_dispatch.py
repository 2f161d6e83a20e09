"""Starting queued WorkItems: the scheduler's plan turned into ``start_work`` Updates.

The :class:`Dispatcher` reads the per-Group work queues from the local projection, asks the
:class:`Scheduler` what fits the free slots (MW-11.1-c/e), reserves a slot per start and sends
the signed ``work.start`` to the Mission workflow. On an accepted verdict the workflow schedules
``execute_work_item`` on this agent's task queue; the runtime never calls a handler directly. It
also relays the scheduler's cooperative preemption requests (MW-11.3-g) and publishes Presence
(free slots and that Group's own queue depth — never another Group's details, MW-11.2-b) when
the Authority client offers ``put_presence``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..authority import now_ms
from ..protocol import Actor
from ._scheduler import QueuedItem, RunningItem, SchedulePlan, Scheduler
from ._slots import SlotBoard, SlotKey
from ._state import LocalState
from ._updates import UpdateSender

log = logging.getLogger(__name__)

#: Seconds before a refused start is tried again when nothing about the item changed.
RETRY_REFUSED_S = 5.0

#: Seconds after which an unchanged Presence report is sent again.
PRESENCE_REFRESH_S = 10.0

#: ``AuthorityClient.put_presence``: ``async (actor, group_id, free_slots, queue_depth, *,
#: issued_at_ms)``.
PresenceFn = Callable[..., Awaitable[Any]]


class Dispatcher:
    """Runs the scheduler and starts what it picks.

    Args:
        actor: the agent.
        state: the local projection.
        groups: the Groups followed.
        scheduler: the scheduling policy.
        sender: the Update sender.
        board: the slot board.
        presence: ``AuthorityClient.put_presence`` (``async (actor, group_id, free_slots,
            queue_depth)``), or ``None`` to publish no Presence.
        tick_s: seconds between plans when nothing happens (deadlines, anti-starvation).
        clock: epoch-millisecond clock (deadlines, ages, Presence time).
    """

    def __init__(
        self,
        actor: Actor,
        state: LocalState,
        groups: list[str],
        scheduler: Scheduler,
        sender: UpdateSender,
        board: SlotBoard,
        *,
        presence: PresenceFn | None = None,
        tick_s: float = 1.0,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.clock = clock
        self.actor, self.state, self.groups, self.scheduler = actor, state, groups, scheduler
        self.sender, self.board, self.presence, self.tick_s = sender, board, presence, tick_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._refused: dict[SlotKey, tuple[int, float]] = {}
        self._missed: set[tuple[str, str, int]] = set()
        self._last_presence: dict[str, tuple[tuple[int, int], float]] = {}

    async def run(self, wake: asyncio.Event) -> None:
        """Plan and start whenever ``wake`` is set (or every ``tick_s``), until cancelled."""
        try:
            while True:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
                # that races the event, and stop() would then wait forever
                try:
                    async with asyncio.timeout(self.tick_s):
                        await wake.wait()
                except TimeoutError:
                    pass
                wake.clear()
                self.dispatch_once()
                await self._publish_presence()
        finally:
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def queues(self) -> dict[str, list[QueuedItem]]:
        """The eligible queued WorkItems per Group: owned, queued, not holding a slot, approved
        when the contract requires it, and not just refused."""
        busy = self.board.busy()
        mono = time.monotonic()
        out: dict[str, list[QueuedItem]] = {}
        for g in self.groups:
            items = []
            for v in self.state.owned(g, "queued"):
                key = (g, v.work_item_id)
                refused = self._refused.get(key)
                if key in busy or (refused and refused[0] == v.updated_seq and mono < refused[1]):
                    continue
                if v.contract is not None and v.contract.approval_required and not v.approved:
                    continue
                lease_ms = v.contract.timeouts.lease_ms if v.contract else 60_000
                items.append(
                    QueuedItem(
                        g,
                        v.work_item_id,
                        v.mission_id,
                        v.ownership_epoch,
                        v.start_deadline_ms,
                        v.queued_at_ms or 0,
                        lease_ms,
                    )
                )
            out[g] = items
        return out

    def running(self) -> list[RunningItem]:
        """The slots taken: running handlers, then starts in flight."""
        slots = {s.key: s for s in self.board.running()}
        out = []
        for key in sorted(self.board.busy()):
            s = slots.get(key)
            if s is None:
                out.append(RunningItem(key[0], key[1], self.clock(), interruptible=False))
            else:
                out.append(
                    RunningItem(
                        key[0], key[1], s.started_at_ms, s.context.contract.timeouts.interruptible
                    )
                )
        return out

    def dispatch_once(self) -> SchedulePlan:
        """One scheduling round: start, preempt, and note missed start deadlines."""
        plan = self.scheduler.plan(self.queues(), self.running(), self.clock())
        for it in plan.start:
            key = (it.group_id, it.work_item_id)
            self.board.reserve(key, hold_s=it.lease_ms / 1000)
            task = asyncio.create_task(self._start(it), name=f"start {it.work_item_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        for r in plan.preempt:
            self.board.request_pause((r.group_id, r.work_item_id), "slot needed by another Group")
        for m in plan.missed:
            mark = (m.group_id, m.work_item_id, m.ownership_epoch)
            if mark not in self._missed:
                self._missed.add(mark)
                log.warning("%s missed its start deadline; left to the Coordinator", m.work_item_id)
        return plan

    async def _start(self, it: QueuedItem) -> None:
        key = (it.group_id, it.work_item_id)
        try:
            cmd = self.actor.command(
                "work.start",
                it.group_id,
                {"work_item_id": it.work_item_id, "ownership_epoch": it.ownership_epoch},
            )
            verdict = await self.sender.send(
                it.mission_id, "start_work", cmd, deadline_ms=it.start_deadline_ms
            )
        except Exception:
            log.exception("start of %s failed", it.work_item_id)
            verdict = None
        if verdict is not None and verdict.accepted:
            log.info(
                "started %s (lease %s)",
                it.work_item_id,
                (verdict.reply.get("lease") or {}).get("lease_id"),
            )
            return
        code = verdict.rejection.code if verdict and verdict.rejection else "error"
        log.info("start of %s refused: %s", it.work_item_id, code)
        view = self.state.item(it.group_id, it.work_item_id)
        self._refused[key] = (view.updated_seq if view else -1, time.monotonic() + RETRY_REFUSED_S)
        self.board.release(key)

    async def _publish_presence(self) -> None:
        """Report free slots and this Group's queue depth to each Group when they change, and
        at least every :data:`PRESENCE_REFRESH_S` (the Authority forgets reports after 30 s).
        Each Group sees only its own queue depth (MW-11.2-b)."""
        if self.presence is None:
            return
        free = self.board.free()
        mono = time.monotonic()
        for g in self.groups:
            report = (free, len(self.state.owned(g, "queued")))
            last = self._last_presence.get(g)
            if last is not None and last[0] == report and mono - last[1] < PRESENCE_REFRESH_S:
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


__all__ = ["Dispatcher", "PresenceFn"]
