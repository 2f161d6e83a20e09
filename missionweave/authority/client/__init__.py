"""Client side of the Authority server: HTTP calls and the section-16 event Subscriber.

``AuthorityClient`` submits Commands and reads logs, heads, snapshots, leases, the Group's
agents (``AgentInfo``) and presence (``PresenceInfo``) over HTTP, and verifies capability tokens
(``TokenCheck``) for a tool gateway;
``Subscriber`` follows Groups over the WebSocket stream with verified, ordered, deduplicated,
exactly-once-per-process delivery and durable cursors (``CursorStore``, ``SqliteCursorStore``).
"""

from ..wire import (
    AgentInfo,
    CursorTooOldError,
    PresenceInfo,
    Reliability,
    TokenCheck,
    UnknownGroupError,
    presence_frame,
)
from ._client import (
    AuthorityClient,
    AuthorityClientError,
    AuthorityRequestError,
    AuthorityUnavailable,
    EventVerificationError,
    LogForkedError,
    RemoteCursorTooOldError,
    RemoteUnknownGroupError,
    SnapshotVerificationError,
    SubscriberError,
    SubscriptionRefused,
)
from ._cursors import CursorStore, MemoryCursorStore, SqliteCursorStore
from ._sequencer import GroupSequencer
from ._subscriber import Subscriber, subscribe_frame

__all__ = [
    "AgentInfo",
    "AuthorityClient",
    "AuthorityClientError",
    "AuthorityRequestError",
    "AuthorityUnavailable",
    "CursorStore",
    "CursorTooOldError",
    "EventVerificationError",
    "GroupSequencer",
    "LogForkedError",
    "MemoryCursorStore",
    "PresenceInfo",
    "Reliability",
    "RemoteCursorTooOldError",
    "RemoteUnknownGroupError",
    "SnapshotVerificationError",
    "SqliteCursorStore",
    "Subscriber",
    "SubscriberError",
    "SubscriptionRefused",
    "TokenCheck",
    "UnknownGroupError",
    "presence_frame",
    "subscribe_frame",
]
