"""``missionweave worker …``: run an agent runtime with the user's handlers."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml
from pydantic import ValidationError

from ..protocol import AgentCard, SignatureError, SigningKey
from ._common import DEFAULT_URL, CliError

if TYPE_CHECKING:
    from ..worker import HandlerRegistry

log = logging.getLogger(__name__)


def load_card(path: Path, key: SigningKey) -> AgentCard:
    """Read an Agent Card YAML file (every AgentCard field but ``public_key``, which is the
    key's).

    Raises:
        CliError: the file is missing, is not YAML, or is not a valid card.
    """
    if not path.is_file():
        raise CliError(f"no card file at {path}")
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise CliError(f"{path}: a card is a mapping of AgentCard fields")
    if data.get("public_key", key.public_key) != key.public_key:
        raise CliError(f"{path}: public_key is not the key file's public key")
    data["public_key"] = key.public_key
    try:
        return AgentCard.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "card"
        raise CliError(f"{path}: invalid card: {where}: {err['msg']}") from None


def load_key(path: Path) -> SigningKey:
    """Load the agent's Ed25519 PEM key.

    Raises:
        CliError: missing or not an Ed25519 key.
    """
    if not path.is_file():
        raise CliError(f"no key file at {path}")
    try:
        return SigningKey.from_file(path)
    except SignatureError as exc:
        raise CliError(str(exc)) from None


async def _run(
    card: AgentCard,
    key: SigningKey,
    handlers: HandlerRegistry,
    groups: list[str],
    authority_url: str,
    temporal_address: str,
    namespace: str,
    state_path: Path,
) -> None:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from ..authority.client import AuthorityClient, AuthorityUnavailable, SubscriptionRefused
    from ..worker import AgentRuntime

    try:
        async with AuthorityClient(authority_url, timeout=5.0) as probe:
            await probe.info()
    except AuthorityUnavailable:
        raise CliError(f"cannot reach the Authority at {authority_url}") from None
    try:
        client = await Client.connect(
            temporal_address, namespace=namespace, data_converter=pydantic_data_converter
        )
    except Exception as exc:
        first = str(exc).splitlines()[0].split(": tonic::")[0] if str(exc) else repr(exc)
        raise CliError(f"cannot reach Temporal at {temporal_address}: {first}") from None
    runtime = AgentRuntime(
        card, key, groups=groups, authority_url=authority_url, temporal_client=client,
        handlers=handlers, state_path=state_path,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    stopping: set[asyncio.Task[None]] = set()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: stopping.add(loop.create_task(runtime.stop())))
    typer.echo(
        f"agent {card.agent_id} working in {', '.join(groups)} "
        f"(Authority {authority_url}, Temporal {temporal_address}/{namespace}); Ctrl-C stops",
        err=True,
    )
    try:
        await runtime.run()
    except SubscriptionRefused as exc:
        raise CliError(f"subscription refused: {exc}") from None


def worker_command(
    card: Path = typer.Option(..., "--card", help="Agent Card YAML (AgentCard fields)."),
    key: Path = typer.Option(..., "--key", help="The agent's Ed25519 key (PEM)."),
    handlers: list[str] = typer.Option(
        ..., "--handlers", help="Module with @handler functions (repeatable)."
    ),
    group: list[str] = typer.Option(..., "--group", help="A Group to work in (repeatable)."),
    authority_url: str = typer.Option(DEFAULT_URL, "--authority-url", help="Authority URL."),
    temporal_address: str = typer.Option(
        "127.0.0.1:7233", "--temporal-address", help="Temporal frontend host:port."
    ),
    namespace: str = typer.Option("default", "--namespace", help="Temporal namespace."),
    state_dir: Path = typer.Option(
        Path(".missionweave"), "--state-dir", help="Local state directory (per-Group queues)."
    ),
) -> None:
    """Run an agent: answer offers, schedule and execute WorkItems with your handlers.

    The agent opens a session, follows each Group's log into local state
    (<state-dir>/<agent_id>.db, rebuilt from the log if deleted), and runs the
    execute_work_item activity on task queue missionweave-agent-<agent_id>.
    """
    from ..worker import HandlerLoadError, load_handlers

    signing_key = load_key(key)
    agent_card = load_card(card, signing_key)
    if os.getcwd() not in sys.path:  # `my_package.handlers` relative to where the user runs
        sys.path.insert(0, os.getcwd())
    try:
        registry = load_handlers(*handlers)
    except HandlerLoadError as exc:
        raise CliError(str(exc)) from None
    state_path = state_dir / f"{agent_card.agent_id}.db"
    asyncio.run(
        _run(agent_card, signing_key, registry, list(group), authority_url, temporal_address,
             namespace, state_path)
    )  # fmt: skip


__all__ = ["load_card", "load_key", "worker_command"]
