"""Bounded offline execution, the agent's side (spec 11.5, MW-11.5-c/e/f/g).

While the Authority is unreachable, a slot's progress reports and checkpoints are not dropped:
each becomes a signed Command carrying the critical bounded-offline binding
(:class:`~missionweave.protocol.OfflineBinding`) and is written to an :class:`OfflineBuffer` —
a small SQLite file beside the agent's state file, ``synchronous=FULL``, so that it survives
a restart of the agent. Unlike the local projection, this file is not rebuildable from the
log: do not delete it while it holds Commands.

On reconnection :func:`reconcile` rebases each buffered Command — same command id, type, body
and binding; the current ``issued_at_ms``, Session Epoch and Membership Epoch — re-signs it
and submits it, oldest first, before anything else is sent (MW-11.5-e/g). The Authority
applies each in one transaction with its resource charge, or rejects it writing nothing.

"Before anything else" holds for the whole runtime, not only for the slot that buffered:
every reconciliation empties the whole buffer — the Commands of executions that ended while
cut off too — and the runtime calls it before each offer answer or start (``OfferTaker``),
before each Command of a lease (``LeaseSession``), at start-up, and by itself as soon as the
Authority answers again (:func:`reconcile_when_reachable`).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from ..authority.client import AuthorityClient, AuthorityUnavailable
from ..protocol import BOUNDED_OFFLINE_EXECUTION, Actor, Command, OfflineBinding, RejectionCode
from ..protocol.temporal_contract import CommandVerdict
from ._metrics import record_reconciliation
from ._verdicts import command_verdict

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS buffered (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    command_id TEXT NOT NULL UNIQUE,
    lease_id TEXT NOT NULL,
    command TEXT NOT NULL
)
"""


def offline_buffer_path(state_path: str | Path) -> Path:
    """Where the agent whose local state file is ``state_path`` keeps its offline buffer:
    ``<state file stem>.offline.sqlite3`` in the same directory."""
    p = Path(state_path)
    return p.with_name(p.stem + ".offline.sqlite3")


class OfflineBuffer:
    """Durable buffer of bound Commands awaiting reconciliation.

    Args:
        path: the SQLite file (created with its directory if missing); ``None`` keeps the
            buffer in memory (it then does not survive a restart).

    Thread safety: one lock serializes the connection; :attr:`reconciling` serializes
    reconciliations (one event loop).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            ":memory:" if path is None else str(path),
            isolation_level=None,
            check_same_thread=False,
        )
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.execute(_SCHEMA)
        #: held while a :func:`reconcile` submits this buffer's Commands
        self.reconciling = asyncio.Lock()

    def add(self, command: Command) -> None:
        """Keep ``command`` (signed, carrying the binding) until :meth:`remove`; durable when
        this returns. A second add of the same command id is ignored.

        Raises:
            ValueError: ``command`` carries no bounded-offline binding.
        """
        binding = command.extensions.get(BOUNDED_OFFLINE_EXECUTION)
        if binding is None:
            raise ValueError("only Commands carrying the bounded-offline binding are buffered")
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO buffered (command_id, lease_id, command) VALUES (?,?,?)",
                (command.command_id, binding["lease_id"], command.model_dump_json()),
            )

    def pending(self, lease_id: str | None = None) -> list[Command]:
        """The buffered Commands, oldest first (of ``lease_id`` only, when given)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT command FROM buffered WHERE ?1 IS NULL OR lease_id=?1 ORDER BY n",
                (lease_id,),
            ).fetchall()
        return [Command.model_validate_json(r[0]) for r in rows]

    def remove(self, command_id: str) -> None:
        """Forget a Command the Authority has answered."""
        with self._lock:
            self._conn.execute("DELETE FROM buffered WHERE command_id=?", (command_id,))

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM buffered").fetchone()[0])

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._conn.close()


def bind(actor: Actor, command: Command, binding: OfflineBinding) -> Command:
    """``command`` (same id, type and body, without a ``usage`` delta: the binding carries
    it) signed again with the bounded-offline binding as a critical extension (MW-11.5-f)."""
    body = {k: v for k, v in command.body.items() if k != "usage"}
    return actor.command(
        command.type,
        command.group_id,
        body,
        command_id=command.command_id,
        issued_at_ms=command.issued_at_ms,
        extensions={BOUNDED_OFFLINE_EXECUTION: binding.wire()},
        critical_extensions=[BOUNDED_OFFLINE_EXECUTION],
    )


def rebase(actor: Actor, command: Command, now_ms: int) -> Command:
    """A buffered Command re-signed for the current session: the binding, id, type and body
    kept; ``issued_at_ms`` = ``now_ms`` and the actor's current Session and Membership Epochs
    Implements MW-11.5-g."""
    return actor.command(
        command.type,
        command.group_id,
        command.body,
        command_id=command.command_id,
        issued_at_ms=now_ms,
        extensions=command.extensions,
        critical_extensions=command.critical_extensions,
    )


async def reconcile(
    client: AuthorityClient,
    actor: Actor,
    buffer: OfflineBuffer,
    clock: Callable[[], int],
    *,
    lease_id: str | None = None,
) -> list[CommandVerdict]:
    """Rebase, re-sign and submit every buffered Command, oldest first, whatever its lease
    — an execution that ended while cut off left its Commands here too — each answered one
    leaving the buffer. Call before any other submission or side effect once the Authority
    answers again (Implements MW-11.5-e). Concurrent calls are serialized: the second finds
    what the first left.

    A rejection is final (the Authority wrote nothing) and is logged. An
    ``idempotency_conflict`` means the original, unbound Command did reach the Authority
    before the connection broke: it was applied then, and the buffered copy is dropped.

    Args:
        lease_id: return only the verdicts on this lease's Commands (all are submitted).

    Returns:
        The verdicts, in order.

    Raises:
        AuthorityUnavailable: the Authority stopped answering; what is left stays buffered.
    """
    async with buffer.reconciling:
        return [
            v
            for cmd, v in await _reconcile_all(client, actor, buffer, clock)
            if lease_id is None or _lease_of(cmd) == lease_id
        ]


def _lease_of(cmd: Command) -> str | None:
    binding = cmd.extensions.get(BOUNDED_OFFLINE_EXECUTION)
    return binding.get("lease_id") if isinstance(binding, dict) else None


async def _reconcile_all(
    client: AuthorityClient, actor: Actor, buffer: OfflineBuffer, clock: Callable[[], int]
) -> list[tuple[Command, CommandVerdict]]:
    verdicts: list[tuple[Command, CommandVerdict]] = []
    for cmd in buffer.pending():
        verdict = command_verdict(await client.submit(rebase(actor, cmd, clock())))
        rej = verdict.rejection
        if verdict.accepted:
            record_reconciliation("applied")
            log.info(
                "reconciled buffered %s %s of %s",
                cmd.type,
                cmd.command_id,
                cmd.body.get("work_item_id"),
            )
        elif rej is not None and rej.code == RejectionCode.IDEMPOTENCY_CONFLICT:
            record_reconciliation("already_applied")
            log.info("buffered %s %s had reached the Authority already", cmd.type, cmd.command_id)
        else:
            why = rej.code if rej else verdict.status
            record_reconciliation("refused")
            log.warning(
                "buffered %s %s of %s refused: %s",
                cmd.type,
                cmd.command_id,
                cmd.body.get("work_item_id"),
                why,
            )
        buffer.remove(cmd.command_id)
        verdicts.append((cmd, verdict))
    return verdicts


async def reconcile_when_reachable(
    client: AuthorityClient,
    actor: Actor,
    buffer: OfflineBuffer,
    clock: Callable[[], int],
    *,
    interval_s: float = 1.0,
) -> None:
    """Run until cancelled: whenever ``buffer`` holds Commands, try to reconcile them
    (:func:`reconcile`) every ``interval_s`` — the first attempt the Authority answers after
    an outage is the reconnection. Nothing is lost by an attempt that fails: what is left
    stays buffered. Implements MW-11.5-e for executions that ended while cut off."""
    while True:
        if len(buffer):
            try:
                done = await reconcile(client, actor, buffer, clock)
            except AuthorityUnavailable:
                pass  # still cut off
            except Exception:  # a bug must not stop the runtime; the next attempt retries
                log.exception("reconciling the offline buffer failed")
            else:
                if done:
                    log.info("reconnected: %d buffered Command(s) reconciled", len(done))
        await asyncio.sleep(interval_s)


__all__ = [
    "OfflineBuffer",
    "bind",
    "offline_buffer_path",
    "rebase",
    "reconcile",
    "reconcile_when_reachable",
]
