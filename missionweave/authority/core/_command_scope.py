"""What a command handler sees: the open transaction, the clock, the actor and an event sink."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from ...protocol import (
    Command,
    Rejection,
    RejectionCode,
    Role,
    SigningKey,
    identifier_problem,
    label_problem,
)
from ._fold import FOLDED_COLUMNS, Draft, fold_event, known_row
from ._store import Row, Store, dumps

#: Reads a transaction may answer from memory until its next write: the rows every fenced
#: Command loads (a batch often holds several Commands of one WorkItem). Any write, or the undo
#: of one, forgets them all; the batch's Group locks keep other writers out meanwhile.
CACHED_READS = frozenset({"work_items.row", "leases.row"})


class Reject(Exception):
    """Raised by a handler to refuse the Command; the savepoint is rolled back."""

    def __init__(self, code: RejectionCode, reason: str, **detail: Any) -> None:
        super().__init__(f"{code}: {reason}")
        self.rejection = Rejection(code=code, reason=reason, detail=detail)

    @classmethod
    def wrong_state(
        cls, code: RejectionCode, subject: str, state: str, why: str = "", **ids: Any
    ) -> Reject:
        """A refusal because ``subject`` (e.g. ``WorkItem 'a'``) is in ``state``: the reason
        says so (then ``why``), the detail names ``ids`` and the ``state``."""
        return cls(code, f"{subject} is {state}" + (f": {why}" if why else ""), **ids, state=state)


@dataclass(slots=True)
class Ctx:
    """Handler context for one Command inside one savepoint.

    Attributes:
        store: the Store, inside a write transaction and a savepoint.
        now_ms: the Authority's clock for this Command, epoch milliseconds.
        command: the verified Command.
        roles: the actor's roles in the Command's Group (empty for agent-level Commands).
        config: the Authority's settings.
        key: the Authority's signing key (for capability tokens).
        drafts: Events to append, in order.
        status: ``accepted``, or ``recorded`` for an audit-only outcome (MW-11.5-b).
        rejection: with ``recorded``, why the Command could not take effect.
        reply: extra facts returned to the caller but not logged (e.g. a capability token).
        before_write: called before the handler's first write (opens the Command's savepoint).
        head_seq: a Group's current head sequence, this batch's appends included.
        rows: the Event rows of this Command, filled by the engine.
        cache: the transaction's cached reads (:data:`CACHED_READS`), cleared on every write.
        facts: the transaction's WorkItem facts, kept by the fold (:mod:`._fold`).
    """

    store: Store
    now_ms: int
    command: Command
    roles: frozenset[Role]
    config: Any
    key: SigningKey
    drafts: list[Draft] = field(default_factory=list)
    status: str = "accepted"
    rejection: Rejection | None = None
    reply: dict[str, Any] = field(default_factory=dict)
    before_write: Callable[[], None] = field(default=lambda: None)
    head_seq: Callable[[str], int] = field(default=lambda group_id: 0)
    rows: list[tuple[str, int, str, str, str | None, str]] = field(default_factory=list)
    cache: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    facts: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def body(self) -> dict[str, Any]:
        return self.command.body

    @property
    def group_id(self) -> str:
        assert self.command.group_id is not None
        return self.command.group_id

    def emit(
        self,
        type: str,
        body: dict[str, Any],
        *,
        work_item_id: str | None = None,
        group_id: str | None = None,
        new_row: dict[str, Any] | None = None,
    ) -> None:
        """Queue an Event for this Command; an Event naming a WorkItem is folded into its row
        at once (:func:`._fold.fold_event`: the row's state, owner, lease … are only ever
        written here). ``new_row``: with ``work.proposed`` / ``work.authorized``, the new row's
        ``contract``, ``dependencies`` and ``usage``.

        Raises:
            UnknownWorkItemEvent: a WorkItem Event the reducer does not know (a handler bug).
        """
        draft = Draft(group_id or self.group_id, type, work_item_id, body)
        if work_item_id is not None:
            fold_event(self.store, self.facts, draft, new_row, self.one, self._write)
        self.drafts.append(draft)

    def _write(self) -> None:
        self.before_write()
        self.cache.clear()

    def one(self, name: str, *args: Any) -> Row | None:
        """The first row of the Store's statement ``name``, or ``None``."""
        if name not in CACHED_READS:
            return self.store.one(name, *args)
        key = (name, *args)
        if key in self.cache:
            row: Row | None = self.cache[key]
            return row
        row = self.cache[key] = self.store.one(name, *args)
        if name == "work_items.row" and row is not None and args not in self.facts:
            # kept for the fold: the Command's writes (usage …) do not change these columns,
            # so its Events need not read the row again
            self.facts[args] = known_row(row)
        return row

    def all(self, name: str, *args: Any) -> list[Row]:
        """Every row of the Store's statement ``name``."""
        return self.store.all(name, *args)

    def run(self, name: str, *args: Any) -> None:
        """Run the Store's (writing) statement ``name``."""
        self.before_write()
        self.cache.clear()
        self.store.run(name, *args)

    def set_work_item(self, group_id: str, work_item_id: str, cols: dict[str, Any]) -> None:
        """Update columns of one WorkItem that the fold does not own (see
        :meth:`Store.set_work_item`).

        Raises:
            ValueError: ``cols`` names a folded column (:data:`._fold.FOLDED_COLUMNS`): those
                change only by emitting the Event.
        """
        folded = FOLDED_COLUMNS & cols.keys()
        if folded:
            raise ValueError(f"{sorted(folded)} are folded from Events: emit the Event")
        self.before_write()
        self.cache.clear()
        self.store.set_work_item(group_id, work_item_id, cols)


def need_id(body: dict[str, Any], key: str) -> str:
    """``body[key]``, present and a valid identifier (:mod:`missionweave.protocol`'s one
    rule); raises :class:`Reject` ``invalid_body`` naming the field and the problem."""
    value = need(body, key)
    problem = identifier_problem(value)
    if problem is not None:
        raise Reject(RejectionCode.INVALID_BODY, f"{key} {problem}", field=key)
    return str(value)


def need_label(body: dict[str, Any], key: str) -> str:
    """``body[key]`` (default ``""``), a valid label; raises :class:`Reject` ``invalid_body``."""
    value = body.get(key, "")
    problem = label_problem(value)
    if problem is not None:
        raise Reject(RejectionCode.INVALID_BODY, f"{key} {problem}", field=key)
    return str(value)


def require_role(ctx: Ctx, role: Role) -> None:
    """Raise :class:`Reject` ``role_not_allowed`` (naming the ``needed`` role) unless the
    Command's actor holds ``role`` in its Group."""
    if role not in ctx.roles:
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED,
            f"{ctx.command.type} needs the {role.value} role",
            needed=role.value,
        )


E = TypeVar("E", bound=StrEnum)


def member_of(vocabulary: type[E], value: object, *, field: str, what: str) -> E:
    """``value`` as a member of ``vocabulary`` (a :class:`~enum.StrEnum`, e.g. ``Role``);
    raises :class:`Reject` ``invalid_body`` (``unknown <what>``) naming ``field`` and the
    ``allowed`` values."""
    if isinstance(value, str):
        try:
            return vocabulary(value)
        except ValueError:
            pass
    raise Reject(
        RejectionCode.INVALID_BODY,
        f"unknown {what}",
        field=field,
        allowed=[m.value for m in vocabulary],
    )


def need(body: dict[str, Any], key: str, kind: type | tuple[type, ...] = str) -> Any:
    """``body[key]`` checked for presence and type; raises :class:`Reject` ``invalid_body``."""
    if key not in body:
        raise Reject(RejectionCode.INVALID_BODY, f"body needs {key!r}", field=key)
    value = body[key]
    if isinstance(value, bool) and kind is int:
        raise Reject(RejectionCode.INVALID_BODY, f"{key!r} must be an integer", field=key)
    if not isinstance(value, kind) or (isinstance(value, str) and not value):
        raise Reject(
            RejectionCode.INVALID_BODY, f"{key!r} has the wrong type or is empty", field=key
        )
    return value


__all__ = [
    "CACHED_READS",
    "Ctx",
    "Draft",
    "Reject",
    "dumps",
    "member_of",
    "need",
    "need_id",
    "need_label",
    "require_role",
]
