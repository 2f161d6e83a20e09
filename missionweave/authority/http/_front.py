"""What the Authority's routes share: one :class:`Front` per app, built by ``create_app`` and
kept on ``app.state.front``; a route asks for it with ``front: Front = Depends(get_front)``."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from ...artifacts import ArtifactStore
from ..core import Authority
from ..wire import PresenceBoard, ReadVerifier, SignedRead
from ._batch import BatchWriter, Notifier
from ._read_gate import ReadGate
from ._read_lane import ReadLane


@dataclass(frozen=True)
class Front:
    """The served Authority and the in-process parts every request of one app shares.

    Attributes:
        authority: the Authority (owned by whoever called ``create_app``, who closes it).
        writer: the group-commit writer every Command goes through.
        notifier: wakes the event streams when a Group's log grows.
        presence: the in-memory presence board.
        gate: the bounds on large reads in flight (pages of Events, snapshots).
        lane: the threads large reads run in, and the pressure by which they are shed.
        reads: verifies signed reads and remembers their nonces (replays refused).
        artifact_store: the artifact store's root; ``None``: no Artifacts are served.
        poll_interval_s: seconds between fallback polls of each WebSocket subscription.
        max_replay_events: a ``SUBSCRIBE`` further behind the head than this many Events is
            answered ``CURSOR_TOO_OLD``.
        ws_idle_timeout_s: seconds a WebSocket may hold no subscription before it is closed.
    """

    authority: Authority
    writer: BatchWriter
    notifier: Notifier
    presence: PresenceBoard
    gate: ReadGate
    lane: ReadLane
    reads: ReadVerifier
    artifact_store: ArtifactStore | None
    poll_interval_s: float
    max_replay_events: int
    ws_idle_timeout_s: float

    @property
    def operators(self) -> frozenset[str]:
        """The operator keys (:attr:`AuthorityConfig.operator_keys`): they read everything."""
        keys: frozenset[str] = self.authority.config.operator_keys
        return keys

    def remember(self, read: SignedRead) -> None:
        """Keep ``read``'s nonce, once the read is admitted: the same signature is refused
        again (``ReadRefused`` 401) within its window."""
        self.reads.remember(
            read.key, read.nonce, read.created_ms, operator=read.key in self.operators
        )


def get_front(conn: HTTPConnection) -> Front:
    """The dependency that gives a route (HTTP or WebSocket) its app's :class:`Front`."""
    front: Front = conn.app.state.front
    return front


__all__ = ["Front", "get_front"]
