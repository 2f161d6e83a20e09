"""Handlers for Group, membership, Agent Card and session Commands.

``group.create`` — self-signed by the creator, who must hold an operator key
(:attr:`AuthorityConfig.operator_keys`) and becomes the Group's ``owner`` member. Agents are
registered only here and by ``member.add`` (a Group owner), so nobody squats an agent id.
``member.add`` / ``member.update`` / ``member.remove`` — by an ``owner``; every change raises the
member's Membership Epoch. ``agent.publish_card`` — by the agent itself. ``session.open`` — by the
agent; raises its Session Epoch and revokes its active execution leases, returning their
WorkItems to ``queued`` first (MW-11.3-f).
"""

from __future__ import annotations

import json
from typing import Any

from ...protocol import (
    GENESIS_HASH,
    AgentCard,
    CommandType,
    EventType,
    RejectionCode,
    Role,
    SignatureError,
    b64u_encode,
    load_public_key,
)
from ._command_scope import Ctx, Reject, dumps, member_of, need, need_id, need_label, require_role
from ._identity import IdKind, register_identity
from ._items import parse
from ._registry import command


def _roles(value: object) -> list[str]:
    if not isinstance(value, list) or not value:
        raise Reject(RejectionCode.INVALID_BODY, "roles must be a non-empty list", field="roles")
    return sorted({member_of(Role, r, field="roles", what="role").value for r in value})


def _public_key(ctx: Ctx) -> str:
    """The body's ``public_key``: an Ed25519 public key, 32 bytes in unpadded base64url (one
    spelling per key, so that the log compares keys as strings)."""
    key = need(ctx.body, "public_key")
    try:
        ok = isinstance(key, str) and b64u_encode(load_public_key(key).public_bytes_raw()) == key
    except SignatureError:
        ok = False
    if not ok:
        raise Reject(
            RejectionCode.INVALID_BODY,
            "public_key is not an Ed25519 public key (32 bytes, unpadded base64url)",
            field="public_key",
        )
    return str(key)


def _register_agent(ctx: Ctx, agent_id: str, public_key: str, field: str = "agent_id") -> None:
    row = ctx.one("agents.public_key_by_agent_id", agent_id)
    if row is None:
        register_identity(ctx, IdKind.AGENT, agent_id, field)
        ctx.run("agents.insert", agent_id, public_key)
    elif row["public_key"] != public_key:
        raise Reject(
            RejectionCode.KEY_MISMATCH,
            f"agent {agent_id!r} is registered with another public key",
            agent_id=agent_id,
        )


@command(CommandType.GROUP_CREATE, auth="self")
def group_create(ctx: Ctx) -> None:
    gid = ctx.command.group_id
    if not gid:  # its spelling is checked with the envelope (Command.group_id)
        raise Reject(RejectionCode.INVALID_COMMAND, "group.create needs a group_id")
    if ctx.one("groups.exists_by_group_id", gid):
        raise Reject(RejectionCode.GROUP_EXISTS, f"group {gid!r} already exists", group_id=gid)
    key = _public_key(ctx)  # an operator's, checked with the signature (Authority._verify_actor)
    roles = sorted(set(_roles(ctx.body.get("roles", ["owner"]))) | {"owner"})
    register_identity(ctx, IdKind.GROUP, gid, "group_id")
    _register_agent(ctx, ctx.command.actor, key, "actor")
    ctx.run(
        "groups.insert",
        gid,
        ctx.now_ms,
        GENESIS_HASH,
    )
    ctx.run(
        "members.insert",
        gid,
        ctx.command.actor,
        key,
        json.dumps(roles),
    )
    ctx.emit(EventType.GROUP_CREATED, {"group_id": gid, "owner": ctx.command.actor})
    ctx.emit(
        EventType.MEMBER_ADDED,
        {"agent_id": ctx.command.actor, "public_key": key, "roles": roles, "membership_epoch": 1},
    )


@command(CommandType.MEMBER_ADD)
def member_add(ctx: Ctx) -> None:
    require_role(ctx, Role.OWNER)
    agent_id = need_id(ctx.body, "agent_id")
    key = _public_key(ctx)
    roles = _roles(ctx.body.get("roles"))
    row = ctx.one(
        "members.membership_epoch_active_by_group_id_agent_id",
        ctx.group_id,
        agent_id,
    )
    if row is not None and row["active"]:
        raise Reject(
            RejectionCode.ALREADY_MEMBER, f"{agent_id!r} is already a member", agent_id=agent_id
        )
    _register_agent(ctx, agent_id, key)
    epoch = (row["membership_epoch"] if row else 0) + 1
    ctx.run(
        "members.upsert",
        ctx.group_id,
        agent_id,
        key,
        json.dumps(roles),
        epoch,
    )
    ctx.emit(
        EventType.MEMBER_ADDED,
        {"agent_id": agent_id, "public_key": key, "roles": roles, "membership_epoch": epoch},
    )


def _next_membership_epoch(ctx: Ctx, agent_id: str) -> int:
    """The membership epoch an active member's change gives it (its current one + 1).

    Raises:
        Reject: ``not_a_member`` — ``agent_id`` is not an active member of the Group.
    """
    row = ctx.one("members.active_epoch", ctx.group_id, agent_id)
    if row is None:
        raise Reject(RejectionCode.NOT_A_MEMBER, f"{agent_id!r} is not a member", agent_id=agent_id)
    return int(row["membership_epoch"]) + 1


@command(CommandType.MEMBER_UPDATE)
def member_update(ctx: Ctx) -> None:
    require_role(ctx, Role.OWNER)
    agent_id = need(ctx.body, "agent_id")
    roles = _roles(ctx.body.get("roles"))
    epoch = _next_membership_epoch(ctx, agent_id)
    ctx.run(
        "members.set_roles_membership_epoch",
        json.dumps(roles),
        epoch,
        ctx.group_id,
        agent_id,
    )
    ctx.emit(
        EventType.MEMBER_UPDATED, {"agent_id": agent_id, "roles": roles, "membership_epoch": epoch}
    )


@command(CommandType.MEMBER_REMOVE)
def member_remove(ctx: Ctx) -> None:
    require_role(ctx, Role.OWNER)
    agent_id = need(ctx.body, "agent_id")
    if agent_id == ctx.command.actor:
        raise Reject(RejectionCode.INVALID_BODY, "an owner cannot remove itself")
    epoch = _next_membership_epoch(ctx, agent_id)
    ctx.run(
        "members.deactivate",
        epoch,
        ctx.group_id,
        agent_id,
    )
    ctx.emit(EventType.MEMBER_REMOVED, {"agent_id": agent_id, "membership_epoch": epoch})


@command(CommandType.AGENT_PUBLISH_CARD)
def agent_publish_card(ctx: Ctx) -> None:
    card = parse(AgentCard, ctx.body.get("card"), "card")
    if card.agent_id != ctx.command.actor:
        raise Reject(RejectionCode.INVALID_BODY, "an agent publishes only its own card")
    row = ctx.one("agents.public_key_card_version_by_agent_id", card.agent_id)
    assert row is not None  # members are always registered agents
    if card.public_key != row["public_key"]:
        raise Reject(RejectionCode.KEY_MISMATCH, "the card's public key is not the agent's key")
    if card.version <= row["card_version"]:
        raise Reject(
            RejectionCode.STALE_CARD,
            f"card version {card.version} is not above {row['card_version']}",
            version=card.version,
            current=row["card_version"],
        )
    wire = card.model_dump(mode="json")
    ctx.run(
        "agents.set_card_card_version",
        dumps(wire),
        card.version,
        card.agent_id,
    )
    ctx.emit(EventType.AGENT_CARD_PUBLISHED, {"card": wire})


def _process(body: dict[str, Any]) -> dict[str, Any] | None:
    """The optional ``process`` of a ``session.open`` body: ``{"host": label, "pid": int}``,
    the process that opens the session (a replaced one names it); raises ``invalid_body``."""
    raw = body.get("process")
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"host", "pid"}:
        raise Reject(RejectionCode.INVALID_BODY, "process is {host, pid}", field="process")
    pid = raw["pid"]
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < 2**31:
        raise Reject(
            RejectionCode.INVALID_BODY, "process.pid is not a process id", field="process.pid"
        )
    return {"host": need_label(raw, "host"), "pid": pid}


@command(CommandType.SESSION_OPEN, auth="agent")
def session_open(ctx: Ctx) -> None:
    """Raise the Session Epoch and revoke the agent's active leases first (MW-11.3-f). An
    optional ``process`` (``{host, pid}``) names the process opening it; each
    ``agent.session_opened`` carries it, so the process it replaces can say who took over.
    An agent in more Groups than :attr:`AuthorityConfig.max_session_groups` is refused
    ``too_many_groups`` (``groups``, ``max_groups``): the Command writes one Event per Group
    and answers all of them. Implements MW-11.3-f."""
    agent = ctx.command.actor
    process = _process(ctx.body)
    groups = [r["group_id"] for r in ctx.all("members.group_id_by_agent_id", agent)]
    cap = ctx.config.max_session_groups
    if len(groups) > cap:  # one Event per Group, every one in the reply: bounded like a request
        raise Reject(
            RejectionCode.TOO_MANY_GROUPS,
            f"session.open opens at most {cap} Groups in one Command; this agent is a member "
            f"of {len(groups)}",
            groups=len(groups),
            max_groups=cap,
        )
    row = ctx.one("agents.session_epoch_by_agent_id", agent)
    assert row is not None
    epoch = row["session_epoch"] + 1
    ctx.run("agents.set_session_epoch", epoch, agent)
    for lease in ctx.all(
        "leases.active_execution_of_agent",
        agent,
    ):
        ctx.run("leases.revoke", lease["lease_id"])
        deadline = ctx.now_ms + _start_ms(ctx, lease["group_id"], lease["work_item_id"])
        ctx.emit(
            EventType.LEASE_REVOKED,
            {
                "lease_id": lease["lease_id"],
                "reason": "session_replaced",
                "state": "queued",
                "new_session_epoch": epoch,
                "start_deadline_ms": deadline,
            },
            work_item_id=lease["work_item_id"],
            group_id=lease["group_id"],
        )
    opened: dict[str, Any] = {"agent_id": agent, "session_epoch": epoch}
    if process is not None:
        opened["process"] = process
    for gid in groups:
        ctx.emit(EventType.AGENT_SESSION_OPENED, opened, group_id=gid)
    if not groups:
        raise Reject(RejectionCode.NOT_A_MEMBER, "the agent is a member of no group")
    ctx.reply["session_epoch"] = epoch


def _start_ms(ctx: Ctx, group_id: str, work_item_id: str) -> int:
    row = ctx.one(
        "work_items.contract_by_group_id_work_item_id",
        group_id,
        work_item_id,
    )
    assert row is not None
    return int(json.loads(row["contract"])["timeouts"]["start_deadline_ms"])
