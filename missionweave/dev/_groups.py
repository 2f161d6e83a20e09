"""Idempotent Group setup over the Authority's HTTP API: create a Group, add members.

The bootstrap and enrolment steps of every stack builder (:mod:`missionweave.dev._build`): used
by the embedded stack (``missionweave dev up``), by ``missionweave group …``, by deployments
(the compose file's bootstrap service) and by the test suite's stacks. Every function may run
again on a set-up Group and then changes nothing::

    async with AuthorityClient(url, signing_key=coordinator.key) as authority:
        await ensure_group(authority, coordinator, "demo")   # owner, coordinator, mission_owner
        await ensure_member(authority, coordinator, "demo", "ada", ada_public_key)
        await enroll(authority, coordinator, "demo", ada)    # ada: an Actor held here

``clock`` (epoch milliseconds, the wall clock by default) stamps the Commands signed here: a
test whose Authority runs on a virtual clock passes that clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from ..authority.client import (
    AgentInfo,
    AuthorityClient,
    AuthorityRequestError,
    CursorTooOldError,
    UnknownGroupError,
)
from ..protocol import Actor, CommandType, EventType, MissionWeaveError, RejectionCode

#: The roles of the Group's creator in the embedded stack: it administers the Group, acts as
#: its Coordinator (the Mission workflow signs with its key) and may own Missions.
OWNER_ROLES: tuple[str, ...] = ("owner", "coordinator", "mission_owner")

MemberChange = Literal["added", "updated", "present"]


class GroupSetupError(MissionWeaveError):
    """The Group cannot be set up as asked: the key is not the recorded owner's, the actor
    lacks the ``owner`` role, or the Authority refused a Command (the message quotes its
    rejection)."""


async def _member_epoch(client: AuthorityClient, member: Actor, group_id: str) -> set[str]:
    """Set ``member``'s Membership Epoch in ``group_id`` from the Authority; its roles."""
    return _epoch_from(await client.agents(group_id), member, group_id)


def _epoch_from(agents: Sequence[AgentInfo], member: Actor, group_id: str) -> set[str]:
    """Set ``member``'s Membership Epoch in ``group_id`` from ``agents`` (the Group's
    members, as read); its roles."""
    for info in agents:
        if info.agent_id == member.agent_id:
            member.membership_epochs[group_id] = info.membership_epoch
            return set(info.roles)
    raise GroupSetupError(f"{member.agent_id!r} is not a member of group {group_id!r}")


async def _recorded_key(client: AuthorityClient, group_id: str, agent_id: str) -> str | None:
    """The public key the Group's first Events record for ``agent_id`` (its creator is added
    at sequence 2), or ``None`` when they do not name it or are archived."""
    try:
        events = await client.events(group_id, after_sequence=0, limit=20)
    except CursorTooOldError:
        return None
    for ev in events:
        if ev.type == EventType.MEMBER_ADDED and ev.body.get("agent_id") == agent_id:
            key = ev.body.get("public_key")
            return str(key) if key is not None else None
    return None


async def _exists(client: AuthorityClient, group_id: str) -> bool:
    """Whether ``group_id`` exists (a refused read of it says so as well as an answer)."""
    try:
        await client.head(group_id)
    except UnknownGroupError:
        return False
    except AuthorityRequestError as exc:
        if exc.code != RejectionCode.NOT_A_MEMBER:
            raise
    return True


async def ensure_group(
    client: AuthorityClient,
    owner: Actor,
    group_id: str,
    roles: Sequence[str] = OWNER_ROLES,
    *,
    clock: Callable[[], int] | None = None,
) -> bool:
    """Create ``group_id`` with ``owner`` as its first member, unless it exists.

    On return ``owner.membership_epochs[group_id]`` is current, so ``owner`` can sign.

    Args:
        client: the Authority, signing its reads with ``owner``'s key.
        owner: the creator (self-signed ``group.create``), an operator of the Authority.
        group_id: the Group.
        roles: the creator's roles (default ``owner``, ``coordinator``, ``mission_owner``).
        clock: stamps ``group.create`` (epoch milliseconds); the wall clock by default.

    Returns:
        ``True`` when the Group was created now, ``False`` when it existed.

    Raises:
        GroupSetupError: the Group exists and ``owner``'s key is no member's there, or its
            recorded key is another key; or the Authority refused ``group.create`` (an
            ``operator_required`` refusal names the flag to start the Authority with).
        AuthorityUnavailable: the Authority cannot be reached.
    """
    # group.create answers group_exists for a Group that exists (operator_required first
    # for a key that is no operator's), and writes nothing then
    body = {"public_key": owner.public_key, "roles": list(roles)}
    result = await client.submit(
        owner.command(CommandType.GROUP_CREATE, group_id, body, issued_at_ms=_at(clock))
    )
    if result.accepted:
        for ev in result.events:
            if ev.type == EventType.MEMBER_ADDED:
                owner.membership_epochs[group_id] = int(ev.body["membership_epoch"])
        return True
    assert result.rejection is not None
    code = result.rejection.code
    # made by an operator already, the Group may still be this (non-operator) key's to own
    exists = code == RejectionCode.GROUP_EXISTS or (
        code == RejectionCode.OPERATOR_REQUIRED and await _exists(client, group_id)
    )
    if not exists:
        hint = (
            f" (start the Authority with --operator-key {owner.public_key})"
            if result.rejection.code == RejectionCode.OPERATOR_REQUIRED
            else ""
        )
        raise GroupSetupError(
            f"cannot create group {group_id!r}: {result.rejection.code}: "
            f"{result.rejection.reason}{hint}"
        )
    try:
        recorded = await _recorded_key(client, group_id, owner.agent_id)
    except AuthorityRequestError as exc:
        if exc.code != RejectionCode.NOT_A_MEMBER:
            raise
        raise GroupSetupError(
            f"group {group_id!r} exists and this key ({owner.public_key}) is not one of its "
            f"members: it cannot act as {owner.agent_id!r} there"
        ) from None
    if recorded is not None and recorded != owner.public_key:
        raise GroupSetupError(
            f"group {group_id!r} records another public key for {owner.agent_id!r} "
            f"({recorded}); this key is {owner.public_key}"
        )
    await _member_epoch(client, owner, group_id)
    return False


def _at(clock: Callable[[], int] | None) -> int | None:
    """``issued_at_ms`` for :meth:`Actor.command` from ``clock`` (``None``: its wall clock)."""
    return None if clock is None else clock()


async def ensure_member(
    client: AuthorityClient,
    owner: Actor,
    group_id: str,
    agent_id: str,
    public_key: str,
    roles: Sequence[str] = ("worker",),
    *,
    clock: Callable[[], int] | None = None,
) -> MemberChange:
    """Make ``agent_id`` a member of ``group_id`` with at least ``roles``.

    A member that lacks some of ``roles`` gets them added (``member.update``; its other roles
    stay). A member is never re-keyed here: remove it first to change its key.

    Args:
        client: the Authority.
        owner: a member with the ``owner`` role who signs ``member.add`` / ``member.update``.
        group_id: the Group.
        agent_id: the agent to add.
        public_key: its Ed25519 public key (base64url).
        roles: the roles it must have.
        clock: stamps ``member.add`` / ``member.update``; the wall clock by default.

    Returns:
        ``"added"``, ``"updated"`` (roles added) or ``"present"`` (nothing to do).

    Raises:
        GroupSetupError: ``owner`` is not an owner of the Group, ``agent_id`` is a member
            with another public key, or the Authority refused.
        UnknownGroupError: no such Group.
        AuthorityUnavailable: the Authority cannot be reached.
    """
    agents = await client.agents(group_id)  # one read: the owner's epoch and the members
    if "owner" not in _epoch_from(agents, owner, group_id):
        raise GroupSetupError(f"{owner.agent_id!r} is not an owner of group {group_id!r}")
    members = {a.agent_id: a for a in agents}
    current = {a: set(m.roles) for a, m in members.items()}
    if agent_id in members and members[agent_id].public_key not in ("", public_key):
        raise GroupSetupError(
            f"{agent_id!r} is already a member of group {group_id!r} with another public key; "
            "a member is never re-keyed here: remove it first (member.remove), then add it"
        )
    change: MemberChange
    if agent_id not in current:
        body = {"agent_id": agent_id, "public_key": public_key, "roles": list(roles)}
        cmd = owner.command(CommandType.MEMBER_ADD, group_id, body, issued_at_ms=_at(clock))
        change = "added"
    elif set(roles) <= current[agent_id]:
        return "present"
    else:
        body = {"agent_id": agent_id, "roles": sorted(current[agent_id] | set(roles))}
        cmd = owner.command(CommandType.MEMBER_UPDATE, group_id, body, issued_at_ms=_at(clock))
        change = "updated"
    result = await client.submit(cmd)
    if not result.accepted:
        assert result.rejection is not None
        raise GroupSetupError(
            f"cannot add {agent_id!r} to group {group_id!r}: {result.rejection.code}: "
            f"{result.rejection.reason}"
        )
    return change


async def enroll(
    client: AuthorityClient,
    owner: Actor,
    group_id: str,
    agent: Actor,
    roles: Sequence[str] = ("worker",),
    *,
    clock: Callable[[], int] | None = None,
) -> MemberChange:
    """:func:`ensure_member` for an agent whose :class:`Actor` is held here: on return
    ``agent.membership_epochs[group_id]`` is its current Membership Epoch, so it can sign
    Commands in the Group. Its session and Agent Card are its own to open and publish (an
    :class:`~missionweave.worker.AgentRuntime` does both when it starts).

    Raises:
        GroupSetupError, UnknownGroupError, AuthorityUnavailable: as :func:`ensure_member`.
    """
    change = await ensure_member(
        client, owner, group_id, agent.agent_id, agent.public_key, roles, clock=clock
    )
    await _member_epoch(client, agent, group_id)
    return change
