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
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from ..authority.client import AuthorityClient
from ..protocol import BOUNDED_OFFLINE_EXECUTION, Actor, Command, OfflineBinding
from ..protocol.temporal_contract import CommandVerdict
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

    Thread safety: one lock serializes the connection.
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
    (MW-11.5-g)."""
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
    """Rebase, re-sign and submit every buffered Command (of ``lease_id`` only, when given),
    oldest first; each answered one leaves the buffer. Call before any other submission or
    side effect once the Authority answers again (MW-11.5-e).

    A rejection is final (the Authority wrote nothing) and is logged. An
    ``idempotency_conflict`` means the original, unbound Command did reach the Authority
    before the connection broke: it was applied then, and the buffered copy is dropped.

    Returns:
        The verdicts, in order.

    Raises:
        AuthorityUnavailable: the Authority stopped answering; what is left stays buffered.
    """
    verdicts: list[CommandVerdict] = []
    for cmd in buffer.pending(lease_id):
        verdict = command_verdict(await client.submit(rebase(actor, cmd, clock())))
        rej = verdict.rejection
        if verdict.accepted:
            log.info(
                "reconciled buffered %s %s of %s",
                cmd.type,
                cmd.command_id,
                cmd.body.get("work_item_id"),
            )
        elif rej is not None and rej.code == "idempotency_conflict":
            log.info("buffered %s %s had reached the Authority already", cmd.type, cmd.command_id)
        else:
            why = rej.code if rej else verdict.status
            log.warning(
                "buffered %s %s of %s refused: %s",
                cmd.type,
                cmd.command_id,
                cmd.body.get("work_item_id"),
                why,
            )
        buffer.remove(cmd.command_id)
        verdicts.append(verdict)
    return verdicts


__all__ = ["OfflineBuffer", "bind", "offline_buffer_path", "rebase", "reconcile"]
