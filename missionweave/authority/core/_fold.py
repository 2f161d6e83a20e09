"""A WorkItem's row as a fold of its Events: the columns the one reducer owns.

Handlers decide and emit; :meth:`~._command_scope.Ctx.emit` hands each WorkItem Event to
:func:`fold_event`, which applies it to the row's facts through
:func:`~missionweave.protocol.reduce_work_item` and writes the columns that changed. No other
code writes these columns (:data:`FOLDED_COLUMNS`; ``Ctx.set_work_item`` refuses them), so
the row is always what the log folds to — the same facts the workflow and the agents derive
(docs/design.md §4 "One reducer"; MW-10.2-a, MW-11.1-b).

Only WorkItem Events are folded; an Event naming a WorkItem whose type the reducer does not
know is a handler bug (:class:`UnknownWorkItemEvent`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from ...protocol import (
    WORK_ITEM_EVENT_TYPES,
    EventType,
    WorkItemFacts,
    WorkItemState,
    reduce_work_item,
)
from ._store import Row, Store, dumps

#: The ``work_items`` columns folded from Events. The others
#: (``contract``, ``dependencies``, ``usage``, ``child_mission_id``) are the handlers'.
FOLDED_COLUMNS = frozenset(
    (
        "mission_id",
        "state",
        "revision",
        "owner",
        "ownership_epoch",
        "start_deadline_ms",
        "lease_id",
        "approved",
        "checkpoint",
        "attempts",
    )
)


@dataclasses.dataclass(slots=True)
class Draft:
    """An Event not yet sequenced or sealed."""

    group_id: str
    type: str
    work_item_id: str | None
    body: dict[str, Any]


#: The Events that create a WorkItem's row.
CREATING = frozenset({EventType.WORK_PROPOSED, EventType.WORK_AUTHORIZED})


class UnknownWorkItemEvent(AssertionError):
    """A handler emitted an Event naming a WorkItem that the reducer does not know (or one
    naming a WorkItem that has no row and does not create one). A bug, never a caller's."""


def facts_of(row: Row) -> WorkItemFacts:
    """The facts a WorkItem's row holds: every fact a folded column is computed from.

    The ``lease_id`` column is the execution lease while ``active`` and the queued ownership
    lease (``hold_id``) while ``queued`` (:func:`columns_of`)."""
    state = WorkItemState(row["state"])
    lease_id = row["lease_id"]
    cp = row["checkpoint"]
    return WorkItemFacts(
        state=state,
        mission_id=row["mission_id"],
        revision=int(row["revision"]),
        owner=row["owner"],
        ownership_epoch=int(row["ownership_epoch"]),
        lease=None if lease_id is None or state is not WorkItemState.ACTIVE
        else {"lease_id": lease_id},
        hold_id=lease_id if state is WorkItemState.QUEUED else None,
        start_deadline_ms=row["start_deadline_ms"],
        approved=bool(row["approved"]),
        checkpoint=None if cp is None else json.loads(cp),
        attempts=int(row["attempts"]),
    )  # fmt: skip


def known_row(row: Row) -> tuple[WorkItemFacts, dict[str, Any]]:
    """What the fold keeps of a WorkItem's row: its facts and folded columns. A row read at any
    point of the transaction will do: nothing but the fold writes these columns, and the fold
    keeps what it wrote (the engine forgets it all when a Command is undone)."""
    f = facts_of(row)
    return f, columns_of(f, row["checkpoint"])


def columns_of(f: WorkItemFacts, checkpoint: str | None = None) -> dict[str, Any]:
    """The folded columns of facts ``f`` (:data:`FOLDED_COLUMNS`), as stored; ``checkpoint``:
    the text of ``f.checkpoint`` when the caller has it (not encoded again)."""
    lease_id = (
        f.lease_id if f.state is WorkItemState.ACTIVE
        else f.hold_id if f.state is WorkItemState.QUEUED
        else None
    )  # fmt: skip
    return {
        "mission_id": f.mission_id,
        "state": None if f.state is None else f.state.value,
        "revision": f.revision,
        "owner": f.owner,
        "ownership_epoch": f.ownership_epoch,
        "start_deadline_ms": f.start_deadline_ms,
        "lease_id": lease_id,
        "approved": int(f.approved),
        "checkpoint": None if f.checkpoint is None else checkpoint or dumps(f.checkpoint),
        "attempts": f.attempts,
    }


def fold_event(
    store: Store,
    facts: dict[tuple[str, str], tuple[WorkItemFacts, dict[str, Any]]],
    draft: Draft,
    new_row: dict[str, Any] | None,
    read: Callable[..., Row | None],
    before_write: Callable[[], None],
) -> None:
    """Apply ``draft`` (an Event naming a WorkItem) to that WorkItem's row: write the folded
    columns that changed (nothing for an Event that changes none).

    Args:
        store: the Store, inside the Command's write transaction.
        facts: the transaction's facts and folded columns per ``(group_id, work_item_id)``,
            read from the row on first use and kept current here (the engine forgets them on a
            rollback).
        draft: the Event, not yet sequenced.
        new_row: for a creating Event (``work.proposed``, ``work.authorized``), the columns the
            fold does not own: ``contract``, ``dependencies`` (JSON text), ``usage``.
        read: ``read(name, *args)``, the Command's (cached) row reader.
        before_write: opens the Command's savepoint; called before any write.

    Raises:
        UnknownWorkItemEvent: the reducer does not know ``draft.type``, or the WorkItem has no
            row and ``draft`` does not create one, or a creating Event came without ``new_row``.
    """
    if draft.type not in WORK_ITEM_EVENT_TYPES:
        raise UnknownWorkItemEvent(f"the reducer does not know {draft.type!r}")
    assert draft.work_item_id is not None
    key = (draft.group_id, draft.work_item_id)
    known = facts.get(key)
    if known is None:
        row = read("work_items.row", *key)
        if row is None and draft.type not in CREATING:
            raise UnknownWorkItemEvent(f"{draft.type} names WorkItem {key[1]!r}, which has no row")
        before, old = (
            (WorkItemFacts(), columns_of(WorkItemFacts())) if row is None else known_row(row)
        )
    else:
        before, old = known
    after = reduce_work_item(before, _Step(draft))
    # the checkpoint's text is kept while the Event keeps the checkpoint
    cols = columns_of(after, old["checkpoint"] if after.checkpoint is before.checkpoint else None)
    facts[key] = (after, cols)
    if draft.type in CREATING:
        if new_row is None:
            raise UnknownWorkItemEvent(f"{draft.type} needs the new row's other columns")
        before_write()
        store.run(
            "work_items.upsert",
            *key,
            cols["mission_id"],
            cols["state"],
            cols["revision"],
            new_row["contract"],
            new_row["dependencies"],
            new_row["usage"],
        )
        changed = {k: v for k, v in cols.items() if k in _DEFAULTS and v != _DEFAULTS[k]}
    else:
        changed = {k: v for k, v in cols.items() if v != old[k]}
    if changed:
        before_write()
        store.set_work_item(*key, changed)


#: The folded columns a new row starts with (the table's defaults).
_DEFAULTS: dict[str, Any] = {
    "owner": None,
    "ownership_epoch": 0,
    "start_deadline_ms": None,
    "lease_id": None,
    "approved": 0,
    "checkpoint": None,
    "attempts": 0,
}


@dataclasses.dataclass(frozen=True, slots=True)
class _Step:
    """A draft as the reducer reads an Event (sequence 0: the row keeps no sequence)."""

    draft: Draft

    @property
    def type(self) -> str:
        return self.draft.type

    @property
    def seq(self) -> int:
        return 0

    @property
    def body(self) -> dict[str, Any]:
        return self.draft.body


__all__ = [
    "FOLDED_COLUMNS",
    "Draft",
    "UnknownWorkItemEvent",
    "columns_of",
    "facts_of",
    "fold_event",
    "known_row",
]
