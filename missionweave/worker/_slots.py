"""The execution slots of one agent process: starts in flight and running WorkItems.

The Agent Card declares ``max_concurrency`` slots (MW-11.1-e). A slot is taken when the
scheduler grants it to a waiting ``execute_work_item`` (or an offer starts at once) and held
while the handler runs; each running slot has its own :class:`WorkContext`, through which the
runtime asks for a cooperative pause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..authority.wire import now_ms
from ._context import WorkContext
from ._gates import demand
from ._scheduler import RunningItem

#: A slot's key: ``(group_id, work_item_id)``.
SlotKey = tuple[str, str]


@dataclass(slots=True)
class RunningSlot:
    """A WorkItem whose handler is running.

    Attributes:
        key: ``(group_id, work_item_id)``.
        context: its WorkContext (the board asks it to pause; the scheduler never sees it).
        started_at_ms: when the handler started, epoch milliseconds.
        item: its scheduling metadata, taken once at the start (MW-13.3-e).
    """

    key: SlotKey
    context: WorkContext
    started_at_ms: int
    item: RunningItem


def _metadata(key: SlotKey, ctx: WorkContext, started_at_ms: int) -> RunningItem:
    c = ctx.contract
    return RunningItem(
        key[0],
        key[1],
        started_at_ms,
        c.timeouts.interruptible,
        mission_id=ctx.mission_id,
        risk_class=str(c.risk_class),
        resources=demand(c.resource_constraints),
    )


@dataclass(slots=True, eq=False)
class SlotBoard:
    """Which slots are taken, in this process.

    Args:
        capacity: the number of slots (the card's ``max_concurrency``).
        on_change: called (synchronously) whenever a slot is taken or freed.
        clock: epoch-millisecond clock (when a handler started).
    """

    capacity: int
    on_change: Callable[[], None] | None = None
    clock: Callable[[], int] = now_ms
    _starting: dict[SlotKey, float] = field(default_factory=dict, init=False)
    _running: dict[SlotKey, RunningSlot] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("capacity must be >= 1")

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def reserve(self, key: SlotKey, hold_s: float) -> None:
        """Take a slot for a start in flight, for at most ``hold_s`` seconds unless the
        activity begins (a start whose activity never comes frees its slot)."""
        self._starting[key] = time.monotonic() + hold_s
        self._changed()

    def release(self, key: SlotKey) -> None:
        """Free a reserved slot whose start was refused."""
        if self._starting.pop(key, None) is not None:
            self._changed()

    def begin(self, key: SlotKey, context: WorkContext) -> None:
        """The activity of ``key`` started running its handler."""
        self._starting.pop(key, None)
        started = self.clock()
        self._running[key] = RunningSlot(key, context, started, _metadata(key, context, started))
        self._changed()

    def end(self, key: SlotKey) -> None:
        """The activity of ``key`` returned (or failed)."""
        if self._running.pop(key, None) is not None:
            self._changed()

    def busy(self) -> set[SlotKey]:
        """Keys holding a slot (expired reservations are dropped first)."""
        now = time.monotonic()
        for key in [k for k, until in self._starting.items() if until <= now]:
            del self._starting[key]
        return set(self._starting) | set(self._running)

    def taken(self) -> int:
        """Slots taken now, read without changing anything (safe from another thread: the
        metrics exporter's)."""
        now = time.monotonic()
        return len(self._running) + sum(1 for until in list(self._starting.values()) if until > now)

    def free(self) -> int:
        """Slots free now."""
        return max(0, self.capacity - len(self.busy()))

    def running(self) -> list[RunningSlot]:
        """The running slots, oldest first."""
        return sorted(self._running.values(), key=lambda s: s.started_at_ms)

    def request_pause(self, key: SlotKey, reason: str) -> bool:
        """Ask the handler of ``key`` to pause at its next safe point (MW-11.3-g)."""
        slot = self._running.get(key)
        if slot is None:
            return False
        slot.context.request_pause(reason)
        return True

    def pause_all(self, reason: str) -> None:
        """Ask every running handler to pause (shutdown)."""
        for slot in self._running.values():
            slot.context.request_pause(reason)


__all__ = ["RunningSlot", "SlotBoard", "SlotKey"]
