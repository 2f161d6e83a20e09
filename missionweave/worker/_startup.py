"""The agent's start-up Commands: ``session.open`` and ``agent.publish_card``."""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime
from typing import Any

from ..authority.client import AuthorityClient
from ..protocol import Actor, AgentCard, CommandType, Event, RejectionCode
from ._errors import SessionError, WorkerError
from ._state import LocalState

log = logging.getLogger(__name__)


def this_process() -> dict[str, Any]:
    """``{"host": <hostname>, "pid": <pid>}``: this process, as ``session.open`` names it."""
    return {"host": socket.gethostname()[:200], "pid": os.getpid()}


def replaced_message(agent_id: str, own_epoch: int, event: Event) -> str:
    """What a process whose session was replaced says: which session took over, when, and —
    when its ``session.open`` named it — which process (``agent.session_opened``)."""
    body = event.body
    at = datetime.fromtimestamp(event.recorded_at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    who = ""
    proc = body.get("process")
    if isinstance(proc, dict) and "pid" in proc:
        who = f" by pid {proc['pid']} on host {proc.get('host') or '?'}"
    return (
        f"agent {agent_id} was replaced: session {body.get('session_epoch')} was opened at "
        f"{at}{who} (this process had session {own_epoch}); stopping"
    )


async def open_session(
    client: AuthorityClient, actor: Actor, process: dict[str, Any] | None = None
) -> int:
    """Submit ``session.open`` (agent-level, no Group) and set ``actor.session_epoch``.

    The Authority raises the Session Epoch and first revokes the agent's active leases,
    returning their WorkItems to ``queued`` (MW-11.3-f). ``process`` (:func:`this_process`)
    goes into each ``agent.session_opened``, so that a process this one replaces can name it.

    Returns:
        The new Session Epoch.

    Raises:
        SessionError: the Authority refused (unknown agent, member of no Group, bad signature).
        AuthorityUnavailable: the Authority cannot be reached.
    """
    body = {} if process is None else {"process": process}
    result = await client.submit(actor.command(CommandType.SESSION_OPEN, None, body))
    if not result.accepted:
        rej = result.rejection
        code, reason = (rej.code, rej.reason) if rej else (result.status, "")
        if code in (RejectionCode.UNKNOWN_ACTOR, RejectionCode.NOT_A_MEMBER):
            reason += (
                f"; an owner of its Group adds it: missionweave group add --key OWNER.pem "
                f"--group GROUP --agent-id {actor.agent_id} --public-key {actor.public_key}"
            )
        elif code == RejectionCode.BAD_SIGNATURE:
            reason += f"; agent {actor.agent_id!r} is registered with another key than this one"
        raise SessionError(code, reason)
    actor.session_epoch = int(result.reply["session_epoch"])
    log.info("agent %s opened session %s", actor.agent_id, actor.session_epoch)
    return actor.session_epoch


async def publish_card(
    client: AuthorityClient, actor: Actor, card: AgentCard, state: LocalState, groups: list[str]
) -> bool:
    """Publish ``card`` unless the log already holds this version or a later one.

    A ``stale_card`` answer (another process of the agent published it first) counts as
    published.

    Returns:
        Whether a ``agent.publish_card`` Command was sent.

    Raises:
        WorkerError: the agent is an active member of none of ``groups``, or the Authority
            refuses the card itself (``key_mismatch``, ``invalid_body``).
    """
    group = next((g for g in groups if state.membership(g).active), None)
    if state.meta("card_version") >= card.version:
        if group is not None and state.meta("card_version") == card.version:
            await _check_unchanged(client, card, group)
        return False
    if group is None:
        raise WorkerError(f"agent {card.agent_id} is an active member of no Group")
    wire = card.model_dump(mode="json")
    result = await client.submit(
        actor.command(CommandType.AGENT_PUBLISH_CARD, group, {"card": wire})
    )
    rej = result.rejection
    if result.accepted or (rej is not None and rej.code == RejectionCode.STALE_CARD):
        log.info("card version %s published", card.version)
    elif rej is not None and rej.code in (RejectionCode.KEY_MISMATCH, RejectionCode.INVALID_BODY):
        raise WorkerError(f"agent.publish_card rejected: {rej.code}: {rej.reason}")
    else:
        log.warning("agent.publish_card not applied: %s", rej.code if rej else result.status)
    return True


async def _check_unchanged(client: AuthorityClient, card: AgentCard, group: str) -> None:
    """Refuse to start when the card file differs from the card the Group's log holds at the
    same version: the change would never be published (a card is published once per version)
    and agents are ranked by the published one, so work needing what was added would wait for
    an eligible agent for ever (issue 29 item 2). The author raises the version; the worker
    does not, so that the file stays the one record of what was published.

    Raises:
        WorkerError: the cards differ; says which fields and the version to give.
    """
    try:
        agents = await client.agents(group)
    except Exception as exc:  # the check is a courtesy: the start goes on without it
        log.info("published card not checked: %r", exc)
        return
    mine = next((a.card for a in agents if a.agent_id == card.agent_id), None)
    if mine is None or mine.version != card.version:
        return
    given, published = card.model_dump(mode="json"), mine.model_dump(mode="json")
    changed = sorted(k for k in given.keys() | published.keys() if given.get(k) != published.get(k))
    if changed:
        raise WorkerError(
            f"the card file of agent {card.agent_id} differs from its published card version "
            f"{card.version} ({', '.join(changed)}): a card is published once per version — "
            f'raise "version" in the card file to {card.version + 1} and start again'
        )


__all__ = ["open_session", "publish_card", "replaced_message", "this_process"]
