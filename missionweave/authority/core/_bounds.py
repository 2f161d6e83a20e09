"""The Authority's bounds on what one Command may add, checked when it is admitted
(:func:`within_bounds`), and the one list of Commands they spare (:data:`KEEPS_OR_ENDS_WORK`).

A member's Command budget (:mod:`._rates`) does not count them and the disk reserve
(:mod:`._reserve`) does not refuse them: an owner must be able to renew its lease, hand in or
give up its work, and reconcile what it did offline, whatever else it (or anybody) sent, and
however full the disk — else the Authority's own bounds would cost a healthy owner its lease
and get its WorkItem done twice (issue 37, item 5). Their bytes past
:data:`UPKEEP_FREE_BYTES` are charged to a byte bucket of their own, so padding them cannot
grow the log past the member's byte budget; an honest renewal never reaches it.

Each is bounded otherwise: a renewal or an ending needs a live ownership of the WorkItem, and
a reconciliation (the bounded-offline binding) is checked against the historical
lease it names, so a member cannot send more of them than it holds work.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...protocol import BOUNDED_OFFLINE_EXECUTION, Command, CommandType, RejectionCode, Role
from ._command_scope import Reject
from ._rates import Meter
from ._reserve import Shortfall
from ._store import Store

#: Bytes of a Command that keeps or ends work never charged (a renewal is about 1 KiB).
UPKEEP_FREE_BYTES = 16 * 1024
#: The bucket key's "Mission" of those Commands' byte bucket (no Mission id can be empty).
UPKEEP = ""
#: A count no Command bucket reaches: those Commands are metered by bytes only.
UNCOUNTED = 1_000_000_000

#: The Commands that keep a lease or end work under way (the owner's and the Coordinator's).
KEEPS_OR_ENDS_WORK = frozenset(
    {
        CommandType.LEASE_RENEW,
        CommandType.WORK_SUBMIT,
        CommandType.WORK_FAIL,
        CommandType.WORK_CHECKPOINT,
        CommandType.WORK_BLOCK,
        CommandType.WORK_DECLINE_OFFER,
        CommandType.WORK_CANCEL,
        CommandType.WORK_ACCEPT_RESULT,
        CommandType.APPROVAL_GRANT_RESULT,
        CommandType.APPROVAL_DENY_RESULT,
        CommandType.MISSION_COMPLETE,
        CommandType.MISSION_FAIL,
        CommandType.MISSION_CANCEL,
        CommandType.MISSION_CHILD_APPROVED,
        CommandType.MISSION_CHILD_FAILED,
        CommandType.MISSION_CHARGE_CHILD_USAGE,
    }
)


def keeps_or_ends_work(cmd: Command) -> bool:
    """Whether ``cmd`` renews a lease, ends work (:data:`KEEPS_OR_ENDS_WORK`) or reconciles an
    agent's offline progress after an outage (it carries the bounded-offline binding)."""
    return cmd.type in KEEPS_OR_ENDS_WORK or BOUNDED_OFFLINE_EXECUTION in cmd.extensions


def within_bounds(
    store: Store,
    meter: Meter,
    short: Shortfall | None,
    cmd: Command,
    roles: frozenset[Role] | None,
) -> None:
    """Refuse a Command whose new content or new work would take the Authority below its disk
    reserve or its actor past its budget; the Commands that keep or end work always pass.
    The engine calls it after the signature (nobody spends another's budget) and after the
    Command id (a repeat is answered, never charged), before the epochs and the handler.

    Args:
        store: the Store, inside the write transaction (a coordinator's WorkItem is read).
        meter: the process's buckets.
        short: the disk reserve's shortfall when the transaction began (``None``: enough).
        cmd: the verified Command.
        roles: the actor's roles in the Command's Group; ``None``: not a member Command
            (an operator's ``group.create``, an agent's ``session.open``).

    Raises:
        Reject: ``insufficient_storage`` (507: ``path``, ``free_bytes``, ``reserve_bytes``);
            ``rate_limited`` (429: ``retry_after_ms``, ``limit``, the limits and
            ``mission_id``, see :meth:`._rates.Meter.charge`).
    """
    if keeps_or_ends_work(cmd):
        _within_upkeep_bytes(meter, cmd)
        return
    agent_level = cmd.type == CommandType.SESSION_OPEN
    if short is not None and not agent_level:  # a restarted owner must come back to end work
        refused = short.rejection()
        raise Reject(RejectionCode.INSUFFICIENT_STORAGE, refused.reason, **refused.detail)
    if roles is None and not agent_level:  # an operator's group.create
        return
    group = cmd.group_id or ""
    mission = _mission_of(store, cmd) if roles and Role.COORDINATOR in roles else None
    limits = meter.limits(group, coordinator=mission is not None)
    if limits is None:
        return
    detail: dict[str, Any] | None = meter.charge(
        (group, cmd.actor, mission), limits, len(cmd.model_dump_json())
    )
    if detail is not None:
        per = "member" if mission is None else f"Mission {mission!r}"
        raise Reject(
            RejectionCode.RATE_LIMITED,
            f"the {per} Command budget of {cmd.actor!r} in this Group is spent "
            f"({detail['limit']}): retry after {detail['retry_after_ms']} ms",
            **detail,
            mission_id=mission,
        )


def _within_upkeep_bytes(meter: Meter, cmd: Command) -> None:
    """A Command that keeps or ends work is never counted, and its first
    :data:`UPKEEP_FREE_BYTES` are free — an honest renewal always passes — but the bytes past
    them are charged to a byte bucket of their own (the member's byte limits), so a lease
    holder cannot pad renewals or checkpoints past its byte budget (issue 37, item 5).

    Raises:
        Reject: ``rate_limited`` (``limit``: ``bytes``) — that bucket is spent.
    """
    group = cmd.group_id or ""
    limits = meter.limits(group)
    size = len(cmd.model_dump_json())
    if limits is None or size <= UPKEEP_FREE_BYTES:
        return
    upkeep = replace(limits, commands_per_s=float(UNCOUNTED), burst=UNCOUNTED)
    detail = meter.charge((group, cmd.actor, UPKEEP), upkeep, size - UPKEEP_FREE_BYTES)
    if detail is not None:
        raise Reject(
            RejectionCode.RATE_LIMITED,
            f"{cmd.actor!r} sent more bytes in Commands that keep or end work than its byte "
            f"budget allows: retry after {detail['retry_after_ms']} ms",
            **detail,
            mission_id=None,
        )


def _mission_of(store: Store, cmd: Command) -> str | None:
    """The Mission a coordinator's Command concerns: its body's ``mission_id`` when that
    Mission exists (a new or unknown id gets no budget of its own: naming fresh Missions must
    not mint fresh buckets), else its WorkItem's; ``None`` when it names neither (it is then
    metered as a member's)."""
    mission = cmd.body.get("mission_id")
    if isinstance(mission, str):
        known = store.one("missions.exists_by_group_id_mission_id", cmd.group_id, mission)
        return mission if known is not None else None
    wid = cmd.body.get("work_item_id")
    if not isinstance(wid, str):
        return None
    row = store.one("work_items.row", cmd.group_id, wid)
    return None if row is None else str(row["mission_id"])


__all__ = ["KEEPS_OR_ENDS_WORK", "UPKEEP_FREE_BYTES", "keeps_or_ends_work", "within_bounds"]
