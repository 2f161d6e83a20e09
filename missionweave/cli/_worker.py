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
from ._artifacts import S3_BUCKET, S3_ENDPOINT, S3_SECURE, open_store
from ._common import DEFAULT_URL, CliError, run_client_command

if TYPE_CHECKING:
    from ..artifacts import ArtifactStore
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
    artifact_store: ArtifactStore,
) -> None:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from ..authority.client import AuthorityClient, AuthorityUnavailable, SubscriptionRefused
    from ..telemetry import setup_tracing, temporal_interceptors
    from ..worker import AgentRuntime

    setup_tracing(f"missionweave-agent-{card.agent_id}")  # from OTEL_*; off unless configured

    try:
        async with AuthorityClient(authority_url, timeout=5.0) as probe:
            await probe.info()
    except AuthorityUnavailable:
        raise CliError(f"cannot reach the Authority at {authority_url}") from None
    try:
        client = await Client.connect(
            temporal_address, namespace=namespace, data_converter=pydantic_data_converter,
            interceptors=temporal_interceptors(),
        )  # fmt: skip
    except Exception as exc:
        first = str(exc).splitlines()[0].split(": tonic::")[0] if str(exc) else repr(exc)
        raise CliError(f"cannot reach Temporal at {temporal_address}: {first}") from None
    runtime = AgentRuntime(
        card, key, groups=groups, authority_url=authority_url, temporal_client=client,
        handlers=handlers, state_path=state_path, artifact_store=artifact_store,
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
    artifacts: Path | None = typer.Option(
        None,
        "--artifacts",
        metavar="DIR",
        help="Filesystem artifact store that handlers publish to (ctx.publish) and read from "
        "(ctx.fetch); share it with the coordinator. Default: <state-dir>/artifacts.",
    ),
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
) -> None:
    """Run an agent: answer offers, schedule and execute WorkItems with your handlers.

    The agent opens a session, follows each Group's log into local state
    (<state-dir>/<agent_id>.db, rebuilt from the log if deleted), and runs the
    execute_work_item activity on task queue missionweave-agent-<agent_id>. Artifacts go to
    --artifacts (or the S3 bucket), which the coordinator must see too.
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
    store = open_store(artifacts or state_dir / "artifacts", s3_endpoint, s3_bucket, s3_secure,
                       create=True)  # fmt: skip
    run_client_command(
        _run(agent_card, signing_key, registry, list(group), authority_url, temporal_address,
             namespace, state_path, store)
    )  # fmt: skip


__all__ = ["load_card", "load_key", "worker_command"]
