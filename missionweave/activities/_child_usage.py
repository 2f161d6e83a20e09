"""A child Mission's usage charged to its parent in another Group (MW-11.5-i, MW-10.4-d).

Inside one Group the Authority charges a WorkItem's whole budget ancestry in the Command's
transaction. Where the ancestry leaves the Group it stops with a ``mission.usage_forwarded``
Event naming the parent and the delta (no cross-Group transaction, spec 10.4); the parent's
Group is charged by the coordinator's ``mission.charge_child_usage`` citing that Event by Group,
sequence and hash, which the Authority verifies against the child Group's log and applies once.
:func:`charge_parent_usage` finds the child's forwarded Events and submits those Commands.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from ..authority.client import AuthorityClient, CursorTooOldError
from ..protocol import CommandType, EventType, RejectionCode, new_id
from ..protocol.temporal_contract import (
    BatchEntry,
    ChargeParentUsageInput,
    ChargeParentUsageResult,
    CoordinatorIntent,
    SubmitCommandsInput,
    SubmitCommandsResult,
)

log = logging.getLogger(__name__)

#: Events read per request of the child's Group log.
PAGE = 1000

#: Signs and submits one Group's batch (the coordinator's ``submit_commands``).
Submit = Callable[[SubmitCommandsInput], Awaitable[SubmitCommandsResult]]


async def forwarded_usage(
    authority: AuthorityClient, inp: ChargeParentUsageInput
) -> list[dict[str, object]]:
    """The ``source`` (``{group_id, seq, hash}``) of every ``mission.usage_forwarded`` Event of
    the child Mission to its parent, read from the child's Group log after
    ``inp.after_sequence`` up to its head, oldest first. A log archived past
    ``after_sequence`` is read from the first Event still online (logged)."""
    head, _ = await authority.head(inp.group_id)
    after, found = inp.after_sequence, []
    while after < head:
        try:
            events = await authority.events(inp.group_id, after, PAGE)
        except CursorTooOldError as exc:
            if exc.first_online_seq - 1 <= after:
                raise
            log.warning(
                "child usage before seq %d of %s is archived", exc.first_online_seq, inp.group_id
            )
            after = exc.first_online_seq - 1
            continue
        if not events:
            break
        for ev in events:
            parent = ev.body.get("parent") or {}
            if (
                ev.type == EventType.MISSION_USAGE_FORWARDED
                and ev.body.get("child_mission_id") == inp.mission_id
                and parent.get("group_id") == inp.parent.group_id
                and parent.get("mission_id") == inp.parent.mission_id
            ):
                found.append({"group_id": ev.group_id, "seq": ev.seq, "hash": ev.hash})
        after = events[-1].seq
    return found


async def charge_parent_usage(
    authority: AuthorityClient, submit: Submit, inp: ChargeParentUsageInput
) -> ChargeParentUsageResult:
    """Charge every forwarded usage of child Mission ``inp`` to its parent Mission with one
    ``mission.charge_child_usage`` each, in the parent's Group. Safe to repeat: an Event charged
    before answers ``already_charged``. A refusal (``budget_exceeded``: the parent's budget
    cannot take it) writes nothing and is logged and returned, not raised. Implements MW-11.5-i
    and MW-10.4-d across Groups.

    Raises:
        AuthorityUnavailable: the Authority cannot be reached (the activity is retried).
    """
    sources = await forwarded_usage(authority, inp)
    if not sources:
        return ChargeParentUsageResult()
    now = time.time_ns() // 1_000_000
    intents = [
        CoordinatorIntent(
            command_id=new_id("cmd"),
            type=CommandType.MISSION_CHARGE_CHILD_USAGE,
            issued_at_ms=now,
            body={"source": src},
        )
        for src in sources
    ]
    done = await submit(
        SubmitCommandsInput(
            group_id=inp.parent.group_id, entries=[BatchEntry(intent=i) for i in intents]
        )
    )
    outcomes: dict[int, str] = {}
    for src, v in zip(sources, done.verdicts, strict=True):
        code = "charged" if v.rejection is None else str(v.rejection.code)
        outcomes[int(str(src["seq"]))] = code
        if code not in ("charged", RejectionCode.ALREADY_CHARGED):
            log.warning(
                "child %s's usage (seq %s) not charged to %s/%s: %s",
                inp.mission_id, src["seq"], inp.parent.group_id, inp.parent.mission_id, code,
            )  # fmt: skip
    return ChargeParentUsageResult(outcomes=outcomes)


__all__ = ["charge_parent_usage", "forwarded_usage"]
