"""A WorkItem's row is the fold of its Events (issue 27): its state and the other folded columns
are written only by the engine's fold (``Ctx.emit`` → ``_fold.fold_event``), never by a handler
(MW-10.2-a, MW-11.1-b). Runs on both Store backends (``tests.authority.test_store_``)."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import missionweave
from missionweave.authority import verify_log
from missionweave.authority.core._command_scope import Ctx
from missionweave.authority.core._fold import (
    FOLDED_COLUMNS,
    Draft,
    UnknownWorkItemEvent,
    columns_of,
    fold_event,
)
from missionweave.authority.core._store_sql import SET_WORK_ITEM, STATEMENTS
from missionweave.protocol import WorkItemFacts, WorkItemState, reduce_events, reduce_work_item
from missionweave.protocol._work_item import FOLDED_EVENT_TYPES, INERT_EVENT_TYPES
from tests.support.world import World, evidence, make_world

CP = {"checkpoint": {"ref": "step-3", "files_done": 3}}


def _writes_state(sql: str) -> bool:
    """Whether ``sql`` writes the ``state`` column of ``work_items``."""
    text = " ".join(sql.split())
    return bool(
        re.match(r"(INSERT|REPLACE|INSERT OR REPLACE) INTO work_items \(.*\bstate\b", text)
        or re.match(r"UPDATE work_items SET .*\bstate\s*=", text)
    )


@pytest.mark.sqlite_only  # reads the source: once is enough
def test_the_statements_writing_a_work_items_state_are_named_only_by_the_fold() -> None:
    """Of the Store's named statements, only ``work_items.upsert`` writes ``work_items.state``
    (the generic ``SET_WORK_ITEM`` is the other way), and in the package only the fold names
    it or calls the Store's ``set_work_item``; the handlers' ``Ctx.set_work_item`` refuses the
    folded columns (next test)."""
    writers = {name for name, sql in STATEMENTS.items() if _writes_state(sql)}
    assert writers == {"work_items.upsert"}
    assert "UPDATE work_items SET" in SET_WORK_ITEM
    package = Path(missionweave.__file__).parent
    users: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        text = path.read_text()
        for needle in ('"work_items.upsert"', "store.set_work_item("):
            if needle in text:
                users.setdefault(needle, set()).add(path.name)
    assert users['"work_items.upsert"'] == {"_fold.py", "_store_sql.py"}
    # Ctx.set_work_item (the handlers' way) calls it too, after refusing folded columns
    assert users["store.set_work_item("] == {"_fold.py", "_command_scope.py"}


def test_a_handler_cannot_set_a_folded_column(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    ctx = _ctx(w)
    for column in sorted(FOLDED_COLUMNS):
        with pytest.raises(ValueError, match="folded from Events"):
            ctx.set_work_item(w.group, "a", {column: None})
    assert w.item("a")["state"] == "open"


def test_a_work_item_event_the_reducer_does_not_know_is_a_handler_bug(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    ctx = _ctx(w)
    with pytest.raises(UnknownWorkItemEvent, match=r"does not know 'work\.invented'"):
        ctx.emit("work.invented", {}, work_item_id="a")
    # a known Event for a WorkItem that has no row (and does not create one)
    with pytest.raises(UnknownWorkItemEvent, match="has no row"):
        fold_event(
            w.authority.store,
            {},
            Draft(w.group, "work.offered", "nope", {}),
            None,
            lambda name, *args: w.authority.store.one(name, *args),
            lambda: None,
        )
    # an Event naming no WorkItem is not folded, whatever its type
    ctx.emit("mission.created", {"mission_id": "m2"})
    assert ctx.drafts[-1].type == "mission.created"


def test_every_write_of_the_state_column_comes_from_emit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a life covering every state (open, offered, queued, active, blocked, submitted,
    verified, failed, cancelled, proposed), each write of ``work_items.state`` is made by the
    fold under ``Ctx.emit``, and the rows equal the fold of the log column for column."""
    w = make_world(tmp_path / "a.db")
    store = w.authority.store
    writes: list[str] = []

    def from_emit() -> bool:
        codes, frame = set(), sys._getframe()
        while frame is not None:
            codes.add(frame.f_code)
            frame = frame.f_back  # type: ignore[assignment]
        return Ctx.emit.__code__ in codes and fold_event.__code__ in codes

    real_set, real_run = store.set_work_item, store.run

    def set_work_item(group_id: str, work_item_id: str, cols: dict[str, Any]) -> None:
        if "state" in cols:
            assert from_emit(), cols
            writes.append(str(cols["state"]))
        real_set(group_id, work_item_id, cols)

    def run(name: str, *args: Any) -> None:
        if _writes_state(STATEMENTS.get(name, "")):
            assert from_emit(), name
            writes.append(name)
        real_run(name, *args)

    monkeypatch.setattr(store, "set_work_item", set_work_item)
    monkeypatch.setattr(store, "run", run)
    _life(w)
    states = {"offered", "queued", "active", "blocked", "submitted", "verified", "failed"}
    assert states | {"cancelled", "work_items.upsert"} <= set(writes), writes
    facts = reduce_events(w.authority.all_events(w.group))
    for row in w.authority.query("SELECT * FROM work_items WHERE group_id=?", w.group):
        folded = columns_of(facts[row["work_item_id"]])
        assert folded == {c: row[c] for c in FOLDED_COLUMNS}, row["work_item_id"]
    report = verify_log(w.authority.store, w.group, w.authority.public_key)  # raises if not
    assert report.events == len(w.authority.all_events(w.group))


def _life(w: World) -> None:
    """WorkItems through every state: ``a`` checkpointed, blocked, unblocked, submitted and
    verified; ``b`` failed by its worker; ``c`` cancelled while queued; ``d`` proposed."""
    worker = w.workers[0]
    w.authorize("a")
    w.lease("a", worker)
    w.ok(worker, "work.checkpoint", w.leased("a", **CP))
    w.start(worker, "a")
    w.ok(worker, "work.block", w.leased("a", resolution="need credentials", **CP))
    w.ok(w.coordinator, "work.unblock", {"work_item_id": "a"})
    w.start(worker, "a")
    w.ok(worker, "work.submit", w.leased("a", **w.report("a", worker)))
    w.ok(w.coordinator, "work.accept_result", {"work_item_id": "a"})
    w.authorize("b")
    w.lease("b", worker)
    fail = evidence(worker.agent_id, "b", result="fail")
    w.ok(worker, "work.fail", w.leased("b", evidence=fail))
    w.authorize("c")
    assert w.accept(worker, "c", w.offer("c", worker)).accepted
    w.ok(w.coordinator, "work.cancel", {"work_item_id": "c", "reason": "not needed"})
    proposal = {k: v for k, v in w.authorization("d").items() if k != "dependencies"}
    w.ok(w.coordinator, "work.propose", proposal)


def _ctx(w: World) -> Ctx:
    """A handler's context on ``w``'s Authority outside any Command (its writes are refused
    before they reach the Store)."""
    cmd = w.coordinator.command("work.offer", w.group, {}, issued_at_ms=w.clock.now)
    a = w.authority
    return Ctx(a.store, w.clock.now, cmd, frozenset(), a.config, a.key)


def test_the_inert_event_types_change_no_fact_and_are_not_folded_ones() -> None:
    """What the fold lets pass without a column change is what the reducer passes: an inert
    type (it names a WorkItem but changes nothing) leaves every fact but the sequence."""
    assert not INERT_EVENT_TYPES & FOLDED_EVENT_TYPES
    facts = WorkItemFacts(
        state=WorkItemState.ACTIVE, mission_id="m1", owner="worker-0", ownership_epoch=2,
        lease={"lease_id": "lease_1"}, checkpoint={"ref": "x"}, attempts=1,
    )  # fmt: skip
    for type in sorted(INERT_EVENT_TYPES):
        event = SimpleNamespace(type=type, seq=9, body={"lease_id": "lease_1", "state": "failed"})
        assert reduce_work_item(facts, event) == dataclasses.replace(facts, seq=9), type
