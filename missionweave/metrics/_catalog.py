"""Every series MissionWeave exports, in one place: name, kind, unit, labels and meaning.

The instruments (:mod:`._instruments`), docs/metrics.md and the Grafana dashboards all name
these series; a test holds the three together. Labels carry bounded values only — Command and
Event types, rejection codes, reasons, causes, route templates — never a Group, Mission, agent
or WorkItem id (cardinality, and nothing a stranger may not know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "histogram", "gauge"]

#: Seconds, for latency histograms: from a fast SQLite commit to a slow handler.
SECONDS_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 1800.0,
)  # fmt: skip
#: Commands per transaction (the group commit's batch).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True, slots=True)
class Series:
    """One exported series.

    Attributes:
        name: the OpenTelemetry instrument name (also the Prometheus name's stem).
        kind: ``counter`` (only goes up), ``histogram`` or ``gauge`` (a value now).
        unit: UCUM unit: ``s`` (seconds) or an annotation such as ``{command}`` (a count).
        help: what it measures, one sentence.
        labels: its label names.
        initial: label values a counter is exported with, at 0, from its process's start
            (known values: a dashboard's query finds the series before the first event).
    """

    name: str
    kind: Kind
    unit: str
    help: str
    labels: tuple[str, ...] = ()
    initial: tuple[tuple[str, ...], ...] = ()

    @property
    def prometheus(self) -> str:
        """The name Prometheus shows: ``_seconds`` for a unit of seconds, ``_total`` for a
        counter (a histogram adds ``_bucket``, ``_sum`` and ``_count`` to it)."""
        name = self.name + ("_seconds" if self.unit == "s" else "")
        return name + ("_total" if self.kind == "counter" else "")


#: The reasons a lease or an ownership closes as expired (``lease.expired``, and an owner's
#: ``ownership.closed`` when the Authority judged it gone): label values of the lease-expiry
#: and reassignment series.
EXPIRY_REASONS = (
    "lease_expired", "start_deadline_missed", "ownership_lease_expired", "blocked_lease_expired",
)  # fmt: skip

# ------------------------------------------------------------------------------ Authority
AUTHORITY_COMMANDS = Series(
    "missionweave_authority_commands", "counter", "{command}",
    "Commands judged, by type and verdict (accepted, rejected, recorded) and rejection code "
    "(none when accepted).",
    ("type", "status", "code"),
)  # fmt: skip
AUTHORITY_APPENDS = Series(
    "missionweave_authority_events_appended", "counter", "{event}",
    "Events appended to Group logs, by Event type.",
    ("type",),
)  # fmt: skip
AUTHORITY_BATCH_SIZE = Series(
    "missionweave_authority_batch_size", "histogram", "{command}",
    "Commands per write transaction (group commit).",
)  # fmt: skip
AUTHORITY_COMMIT = Series(
    "missionweave_authority_commit_duration", "histogram", "s",
    "Time of one write transaction: verify, apply, append, commit (one fsync).",
)  # fmt: skip
AUTHORITY_LEASES_LIVE = Series(
    "missionweave_authority_leases_live", "gauge", "{lease}",
    "Active, unexpired leases now, by kind (queued, execution, blocked).",
    ("kind",),
)  # fmt: skip
AUTHORITY_LEASE_EXPIRIES = Series(
    "missionweave_authority_lease_expiries", "counter", "{lease}",
    "Leases closed as expired, by reason (lease_expired, start_deadline_missed, …).",
    ("reason",),
    tuple((r,) for r in EXPIRY_REASONS),
)  # fmt: skip
AUTHORITY_LEASE_REVOCATIONS = Series(
    "missionweave_authority_lease_revocations", "counter", "{lease}",
    "Leases revoked, by reason (a new session, a failure, a child Mission, …).",
    ("reason",),
    (('session_replaced',), ('failed',), ('cancelled',)),
)  # fmt: skip
#: The causes of a credit to live leases (MW-11.5-c; docs/authority.md, "Operating").
CREDIT_CAUSES = ("down", "stalled", "silent", "store_failed", "queued", "clock_step")
AUTHORITY_DOWNTIME_CREDITS = Series(
    "missionweave_authority_downtime_credits", "counter", "{lease}",
    "Leases extended for the Authority's own outage (MW-11.5-c), by cause: down (a restart), "
    "stalled (it stood still), silent (nobody's request arrived), store_failed (the store "
    "could not commit), queued (a Command waited in the writer's queue), clock_step (the wall "
    "clock stepped forward).",
    ("cause",),
    tuple((c,) for c in CREDIT_CAUSES),
)  # fmt: skip
AUTHORITY_CREDITED = Series(
    "missionweave_authority_credited", "counter", "s",
    "Time credited to live leases for the Authority's own outages (MW-11.5-c; each incident "
    "capped at 10 minutes), by cause as in missionweave_authority_downtime_credits.",
    ("cause",),
    tuple((c,) for c in CREDIT_CAUSES),
)  # fmt: skip
AUTHORITY_STORE_ERRORS = Series(
    "missionweave_authority_store_errors", "counter", "{error}",
    "Store operations that failed for the database, not the request (each answered 503), by "
    "kind: unreachable (no connection), lost (the connection broke mid-transaction or "
    "mid-commit), failed (a statement failed for the server, e.g. its disk), forked (the "
    "store's log differs from what this Authority signed or served).",
    ("kind",),
    (('unreachable',), ('lost',), ('failed',), ('forked',)),
)  # fmt: skip
AUTHORITY_STORE_RECONNECTS = Series(
    "missionweave_authority_store_reconnects", "counter", "{connection}",
    "Database connections re-established after one was lost, by role: session (the "
    "Authority's writes and reads), listen (LISTEN for other replicas' commits).",
    ("role",),
    (('session',), ('listen',)),
)  # fmt: skip
AUTHORITY_SUBSCRIBERS = Series(
    "missionweave_authority_subscribers", "gauge", "{subscription}",
    "WebSocket subscriptions to Group logs open now.",
)  # fmt: skip
AUTHORITY_READS_REFUSED = Series(
    "missionweave_authority_reads_refused", "counter", "{read}",
    "Reads refused, by code (unauthenticated, not_a_member, too_many_reads, read_shed, …).",
    ("code",),
    (('unauthenticated',), ('not_a_member',), ('too_many_reads',), ('read_shed',)),
)  # fmt: skip
AUTHORITY_UNAUTHENTICATED = Series(
    "missionweave_authority_unauthenticated_connections", "gauge", "{connection}",
    "Connections held now that have not authenticated (no request a member or an operator "
    "signed, no accepted SUBSCRIBE).",
)  # fmt: skip
AUTHORITY_CONNECTIONS_CLOSED = Series(
    "missionweave_authority_connections_closed", "counter", "{connection}",
    "Connections the Authority closed to keep its budget, by reason (evicted, auth_timeout, "
    "over_limit).",
    ("reason",),
    (('evicted',), ('auth_timeout',), ('over_limit',)),
)  # fmt: skip
AUTHORITY_REQUESTS = Series(
    "missionweave_authority_request_duration", "histogram", "s",
    "HTTP request latency, by method, route template and status class (2xx, 4xx, 5xx).",
    ("method", "route", "status_class"),
)  # fmt: skip

# ---------------------------------------------------------------------------------- agents
AGENT_SLOTS = Series(
    "missionweave_agent_slots", "gauge", "{slot}",
    "Execution slots of the agents in this process (their cards' max_concurrency).",
)  # fmt: skip
AGENT_SLOTS_BUSY = Series(
    "missionweave_agent_slots_busy", "gauge", "{slot}",
    "Slots taken now: a handler running, or a start in flight.",
)  # fmt: skip
AGENT_QUEUE_DEPTH = Series(
    "missionweave_agent_queue_depth", "gauge", "{work_item}",
    "Accepted WorkItems waiting for a slot, all Groups together.",
)  # fmt: skip
AGENT_QUEUE_DEPTH_MAX = Series(
    "missionweave_agent_queue_depth_max", "gauge", "{work_item}",
    "The deepest single Group's queue of waiting WorkItems (which Group is not said).",
)  # fmt: skip
AGENT_DECLINES = Series(
    "missionweave_agent_admission_declines", "counter", "{offer}",
    "Offers declined by admission control, by reason (capability, queue_full, deadline, …).",
    ("reason",),
    (('capacity',), ('deadline',), ('capability',), ('budget',)),
)  # fmt: skip
AGENT_HANDLER_DURATION = Series(
    "missionweave_agent_handler_duration", "histogram", "s",
    "Handler run time, from start under a lease to its final report, by outcome "
    "(submitted, failed, paused, blocked, lease_lost).",
    ("outcome",),
)  # fmt: skip
AGENT_BUDGET_BURNED = Series(
    "missionweave_agent_budget_burned", "counter", "1",
    "Resources charged to the Authority (accepted usage deltas), by dimension: "
    "money_minor_units, tokens, tool_calls, compute_ms, wall_clock_ms, side_effects.",
    ("dimension",),
)  # fmt: skip
AGENT_OFFLINE_BUFFER = Series(
    "missionweave_agent_offline_buffer_depth", "gauge", "{command}",
    "Signed progress Commands buffered while the Authority is unreachable (MW-11.5-e).",
)  # fmt: skip
AGENT_RECONCILIATIONS = Series(
    "missionweave_agent_reconciliations", "counter", "{command}",
    "Buffered Commands submitted on reconnection, by result (applied, already_applied, "
    "refused).",
    ("result",),
    (('applied',), ('already_applied',), ('refused',)),
)  # fmt: skip

# ----------------------------------------------------------------------------- coordinator
COORDINATOR_OFFERS = Series(
    "missionweave_coordinator_offers", "counter", "{offer}",
    "work.offer Commands the coordinator made, by the Authority's verdict and code.",
    ("status", "code"),
    (('accepted', 'none'),),
)  # fmt: skip
COORDINATOR_UNPLACED = Series(
    "missionweave_coordinator_unplaced", "counter", "{ranking}",
    "Rankings that found no agent to offer to, by reason (no_eligible_agent, saturated).",
    ("reason",),
    (('no_eligible_agent',), ('saturated',)),
)  # fmt: skip
COORDINATOR_REASSIGNMENTS = Series(
    "missionweave_coordinator_reassignments", "counter", "{offer}",
    "WorkItems offered again, by cause: offer_declined (every candidate declined), "
    "offer_expired, an owner closed (lease_expired, start_deadline_missed, …), "
    "retry_after_failure, requeued.",
    ("cause",),
    (('offer_declined',), ('offer_expired',), ('lease_expired',), ('retry_after_failure',)),
)  # fmt: skip
COORDINATOR_REVIEWS = Series(
    "missionweave_coordinator_review_outcomes", "counter", "{review}",
    "Submissions reviewed (integrity and deterministic steps), by outcome (passed, failed) "
    "and the first failed step (none when passed).",
    ("outcome", "failed_step"),
    (('passed', 'none'), ('failed', 'integrity'), ('failed', 'deterministic')),
)  # fmt: skip
COORDINATOR_MISSIONS = Series(
    "missionweave_coordinator_missions", "gauge", "{mission}",
    "Missions in Temporal's visibility store, by MissionStatus (running, completed, failed, "
    "cancelled); polled every 15 s.",
    ("status",),
)  # fmt: skip

#: Every series, by component.
AUTHORITY: tuple[Series, ...] = (
    AUTHORITY_COMMANDS, AUTHORITY_APPENDS, AUTHORITY_BATCH_SIZE, AUTHORITY_COMMIT,
    AUTHORITY_LEASES_LIVE, AUTHORITY_LEASE_EXPIRIES, AUTHORITY_LEASE_REVOCATIONS,
    AUTHORITY_DOWNTIME_CREDITS, AUTHORITY_CREDITED, AUTHORITY_STORE_ERRORS,
    AUTHORITY_STORE_RECONNECTS, AUTHORITY_SUBSCRIBERS, AUTHORITY_READS_REFUSED,
    AUTHORITY_REQUESTS, AUTHORITY_UNAUTHENTICATED, AUTHORITY_CONNECTIONS_CLOSED,
)  # fmt: skip
AGENT: tuple[Series, ...] = (
    AGENT_SLOTS, AGENT_SLOTS_BUSY, AGENT_QUEUE_DEPTH, AGENT_QUEUE_DEPTH_MAX, AGENT_DECLINES,
    AGENT_HANDLER_DURATION, AGENT_BUDGET_BURNED, AGENT_OFFLINE_BUFFER, AGENT_RECONCILIATIONS,
)  # fmt: skip
COORDINATOR: tuple[Series, ...] = (
    COORDINATOR_OFFERS, COORDINATOR_UNPLACED, COORDINATOR_REASSIGNMENTS, COORDINATOR_REVIEWS,
    COORDINATOR_MISSIONS,
)  # fmt: skip
ALL: tuple[Series, ...] = (*AUTHORITY, *AGENT, *COORDINATOR)

#: The prefix of the Temporal SDK's own series, exported beside ours (``temporal_…``).
TEMPORAL_PREFIX = "temporal_"

__all__ = [
    "AGENT",
    "ALL",
    "AUTHORITY",
    "BATCH_BUCKETS",
    "COORDINATOR",
    "EXPIRY_REASONS",
    "SECONDS_BUCKETS",
    "TEMPORAL_PREFIX",
    "Kind",
    "Series",
]
