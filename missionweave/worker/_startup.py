"""The agent's start-up Commands: ``session.open`` and ``agent.publish_card``."""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime
from typing import Any

from ..authority.client import AuthorityClient
from ..protocol import Actor, AgentCard, Event
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
    result = await client.submit(actor.command("session.open", None, body))
    if not result.accepted:
        rej = result.rejection
        code, reason = (rej.code, rej.reason) if rej else (result.status, "")
        if code in ("unknown_actor", "not_a_member"):
            reason += (
                f"; an owner of its Group adds it: missionweave group add --key OWNER.pem "
                f"--group GROUP --agent-id {actor.agent_id} --public-key {actor.public_key}"
            )
        elif code == "bad_signature":
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
    if state.meta("card_version") >= card.version:
        return False
    group = next((g for g in groups if state.membership(g).active), None)
    if group is None:
        raise WorkerError(f"agent {card.agent_id} is an active member of no Group")
    wire = card.model_dump(mode="json")
    result = await client.submit(actor.command("agent.publish_card", group, {"card": wire}))
    rej = result.rejection
    if result.accepted or (rej is not None and rej.code == "stale_card"):
        log.info("card version %s published", card.version)
    elif rej is not None and rej.code in ("key_mismatch", "invalid_body"):
        raise WorkerError(f"agent.publish_card rejected: {rej.code}: {rej.reason}")
    else:
        log.warning("agent.publish_card not applied: %s", rej.code if rej else result.status)
    return True


__all__ = ["open_session", "publish_card", "replaced_message", "this_process"]
