"""``missionweave group …``: create a Group and add its members, idempotently."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from ..protocol import Actor, MissionWeaveError, SigningKey
from . import _options as opt
from ._common import CliError, load_key, load_or_create_key

if TYPE_CHECKING:
    from ..authority.client import AuthorityClient

T = TypeVar("T")

app = typer.Typer(
    help="Create a Group and add members (safe to run again: nothing changes twice).",
    no_args_is_help=True,
)

_GROUP = typer.Option(..., "--group", "-g", help="The Group id.")


def _key(path: Path, create: bool) -> SigningKey:
    return load_or_create_key(path, create=create, missing_hint=" (--create-key generates one)")


async def _run_create(url: str, owner: Actor, group: str) -> bool:
    from ..dev import ensure_group

    async with _authority(url, owner) as client:
        return await ensure_group(client, owner, group)


async def _run_add(
    url: str, owner: Actor, group: str, agent_id: str, public_key: str, roles: list[str]
) -> str:
    from ..dev import ensure_member

    async with _authority(url, owner) as client:
        return await ensure_member(client, owner, group, agent_id, public_key, roles)


def _authority(url: str, owner: Actor) -> AuthorityClient:
    from ..authority.client import AuthorityClient

    return AuthorityClient(url, timeout=10.0, signing_key=owner.key)


def _call(run: Callable[[], Coroutine[Any, Any, T]], url: str) -> T:
    """Run ``run()``; an unreachable Authority or a refusal becomes one line."""
    from ..authority.client import AuthorityUnavailable

    try:
        return asyncio.run(run())
    except AuthorityUnavailable as exc:
        raise CliError(f"cannot reach the Authority at {url}: {exc}") from None
    except MissionWeaveError as exc:
        raise CliError(str(exc)) from None


@app.command("create")
def create(
    key: Path = typer.Option(
        ...,
        "--key",
        help="The creator's Ed25519 key (PEM): one of the Authority's operator keys "
        "(`authority serve --operator-key`). It also signs the reads.",
    ),
    group: str = _GROUP,
    agent_id: str = typer.Option("coordinator", "--agent-id", help="The creator's agent id."),
    create_key: bool = typer.Option(False, "--create-key", help="Generate --key if missing."),
    authority_url: str = opt.AUTHORITY_URL,
) -> None:
    """Create a Group whose first member (the key's holder) is its owner, coordinator and
    mission owner. Does nothing when the Group exists with that member.

    Example: missionweave group create --key data/keys/coordinator.pem --group demo
    """
    owner = Actor(agent_id, _key(key, create_key))
    created = _call(lambda: _run_create(authority_url, owner, group), authority_url)
    typer.echo(f"group {group} {'created' if created else 'exists'} (owner {agent_id})")


@app.command("add")
def add(
    key: Path = typer.Option(..., "--key", help="An owner's Ed25519 key (PEM)."),
    group: str = _GROUP,
    agent_id: str = typer.Option(..., "--agent-id", help="The member to add."),
    agent_key: Path | None = typer.Option(
        None, "--agent-key", help="The member's key file (PEM); its public key is used."
    ),
    public_key: str | None = typer.Option(
        None, "--public-key", help="The member's public key (base64url), instead of --agent-key."
    ),
    create_key: bool = typer.Option(
        False, "--create-key", help="Generate --agent-key if missing (for a new agent)."
    ),
    role: list[str] = typer.Option(
        ["worker"],
        "--role",
        help="A role: worker, reviewer, coordinator, mission_owner, owner, member (repeatable).",
    ),
    owner_id: str = typer.Option("coordinator", "--owner-id", help="The owner's agent id."),
    authority_url: str = opt.AUTHORITY_URL,
) -> None:
    """Add an agent to a Group with the given roles (or add missing roles to a member).

    Example: missionweave group add --key data/keys/coordinator.pem --group demo
    --agent-id ada --agent-key ada.pem --create-key
    """
    if agent_key is not None and public_key is None:
        member_key = _key(agent_key, create_key).public_key
    elif public_key is not None and agent_key is None:
        member_key = public_key
    else:
        raise CliError("give exactly one of --agent-key and --public-key")
    owner = Actor(owner_id, load_key(key))
    change = _call(
        lambda: _run_add(authority_url, owner, group, agent_id, member_key, list(role)),
        authority_url,
    )
    typer.echo(f"{agent_id} {change} in group {group} ({', '.join(role)})")


__all__ = ["app"]
