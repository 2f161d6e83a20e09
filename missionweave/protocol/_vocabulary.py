"""The protocol's vocabulary of actions and facts: every Command type and every Event type.

Both are ``StrEnum`` classes whose values are the wire strings, so a member *is* its
string (``CommandType.WORK_START == "work.start"``, ``json.dumps`` writes the value) and the
wire format does not change. Inside Python the members are used, never the literals, so mypy
and a reader can follow every place that issues a Command or reads an Event
(``tests/protocol/test_vocabulary.py`` checks that no literal is left outside ``protocol/``).
The rejection codes live beside them in :mod:`._rejection_codes`.
"""

from __future__ import annotations

from enum import StrEnum


class CommandType(StrEnum):
    """What an actor asks of its Group Authority: ``Command.type`` (docs/authority.md).

    Every member has exactly one handler in the Authority (registered with
    ``authority.core._registry.command``); a type outside this enum is rejected
    ``unknown_command``.
    """

    AGENT_PUBLISH_CARD = "agent.publish_card"

    APPROVAL_DENY_RESULT = "approval.deny_result"
    APPROVAL_GRANT_EXECUTION = "approval.grant_execution"
    APPROVAL_GRANT_RESULT = "approval.grant_result"

    ARTIFACT_PROMOTE = "artifact.promote"
    ARTIFACT_PUBLISH = "artifact.publish"

    CAPABILITY_TOKEN_ROTATE = "capability_token.rotate"

    CONTEXT_PUBLISH = "context.publish"

    GROUP_CREATE = "group.create"
    GROUP_SET_PRIORITY = "group.set_priority"

    LEASE_RENEW = "lease.renew"

    MEMBER_ADD = "member.add"
    MEMBER_REMOVE = "member.remove"
    MEMBER_UPDATE = "member.update"

    MISSION_CANCEL = "mission.cancel"
    MISSION_CHARGE_CHILD_USAGE = "mission.charge_child_usage"
    MISSION_CHILD_APPROVED = "mission.child_approved"
    MISSION_CHILD_FAILED = "mission.child_failed"
    MISSION_COMPLETE = "mission.complete"
    MISSION_CREATE = "mission.create"
    MISSION_CREATE_CHILD = "mission.create_child"
    MISSION_FAIL = "mission.fail"

    PROGRESS_REPORT = "progress.report"

    SESSION_OPEN = "session.open"

    WORK_ACCEPT_OFFER = "work.accept_offer"
    WORK_ACCEPT_RESULT = "work.accept_result"
    WORK_ADD_DEPENDENCIES = "work.add_dependencies"
    WORK_AUTHORIZE = "work.authorize"
    WORK_BLOCK = "work.block"
    WORK_CANCEL = "work.cancel"
    WORK_CHECKPOINT = "work.checkpoint"
    WORK_DECLINE_OFFER = "work.decline_offer"
    WORK_DISCLOSE_SCHEDULE = "work.disclose_schedule"
    WORK_FAIL = "work.fail"
    WORK_OFFER = "work.offer"
    WORK_PROPOSE = "work.propose"
    WORK_START = "work.start"
    WORK_SUBMIT = "work.submit"
    WORK_UNBLOCK = "work.unblock"


class EventType(StrEnum):
    """What the Authority accepted and logged: ``Event.type`` (docs/design.md §6).

    Readers (the WorkItem reducer, the Mission workflow, the Worker's projection) match on
    these members. ``RESOURCE_USAGE_RECORDED`` is an extension Event (MW-11.5-i), named by
    its URN-like type.
    """

    AGENT_CARD_PUBLISHED = "agent.card_published"
    AGENT_SESSION_OPENED = "agent.session_opened"

    APPROVAL_EXECUTION_GRANTED = "approval.execution_granted"
    APPROVAL_RESULT_DENIED = "approval.result_denied"
    APPROVAL_RESULT_GRANTED = "approval.result_granted"

    ARTIFACT_PROMOTED = "artifact.promoted"
    ARTIFACT_PUBLISHED = "artifact.published"

    CAPABILITY_TOKEN_ROTATED = "capability_token.rotated"

    CONTEXT_PUBLISHED = "context.published"

    GROUP_CREATED = "group.created"
    GROUP_PRIORITY_SET = "group.priority_set"

    LEASE_EXPIRED = "lease.expired"
    LEASE_RELEASED = "lease.released"
    LEASE_RENEWED = "lease.renewed"
    LEASE_REVOKED = "lease.revoked"

    MEMBER_ADDED = "member.added"
    MEMBER_REMOVED = "member.removed"
    MEMBER_UPDATED = "member.updated"

    MISSION_CANCELLED = "mission.cancelled"
    MISSION_CHILD_APPROVED = "mission.child_approved"
    MISSION_CHILD_CREATED = "mission.child_created"
    MISSION_CHILD_FAILED = "mission.child_failed"
    MISSION_CHILD_USAGE_CHARGED = "mission.child_usage_charged"
    MISSION_COMPLETED = "mission.completed"
    MISSION_CREATED = "mission.created"
    MISSION_FAILED = "mission.failed"
    MISSION_USAGE_FORWARDED = "mission.usage_forwarded"

    OFFER_WITHDRAWN = "offer.withdrawn"

    OWNERSHIP_CLOSED = "ownership.closed"

    WORK_AUTHORIZED = "work.authorized"
    WORK_BLOCKED = "work.blocked"
    WORK_CANCELLED = "work.cancelled"
    WORK_CHECKPOINTED = "work.checkpointed"
    WORK_CONTRACT_REVISED = "work.contract_revised"
    WORK_DEPENDENCIES_ADDED = "work.dependencies_added"
    WORK_FAILED = "work.failed"
    WORK_LATE_RESULT_RECORDED = "work.late_result_recorded"
    WORK_OFFER_ACCEPTED = "work.offer_accepted"
    WORK_OFFER_DECLINED = "work.offer_declined"
    WORK_OFFERED = "work.offered"
    WORK_PROGRESS_REPORTED = "work.progress_reported"
    WORK_PROPOSED = "work.proposed"
    WORK_RESULT_ACCEPTED = "work.result_accepted"
    WORK_SCHEDULE_DISCLOSED = "work.schedule_disclosed"
    WORK_STARTED = "work.started"
    WORK_SUBMITTED = "work.submitted"
    WORK_UNBLOCKED = "work.unblocked"

    RESOURCE_USAGE_RECORDED = "ext.missionweaveprotocol.core.resource_usage_recorded"


__all__ = ["CommandType", "EventType"]
