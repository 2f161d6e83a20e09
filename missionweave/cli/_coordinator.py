"""``missionweave coordinator``: host the Mission workflow and its activities."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._artifacts import S3_BUCKET, S3_ENDPOINT, S3_SECURE, open_store
from ._common import DEFAULT_URL, CliError, run_client_command
from ._worker import load_key

if TYPE_CHECKING:
    from ..artifacts import ArtifactStore


def coordinator_command(
    key: Path = typer.Option(..., "--key", help="The coordinator's Ed25519 key (PEM)."),
    agent_id: str = typer.Option(
        "coordinator", "--agent-id", help="The coordinator's agent id in its Groups."
    ),
    authority_url: str = typer.Option(
        DEFAULT_URL,
        "--authority-url",
        envvar="MISSIONWEAVE_AUTHORITY_URL",
        help="Authority base URL.",
    ),
    temporal_address: str = typer.Option(
        "127.0.0.1:7233",
        "--temporal-address",
        envvar="TEMPORAL_ADDRESS",
        help="Temporal frontend host:port.",
    ),
    namespace: str = typer.Option(
        "default", "--namespace", envvar="TEMPORAL_NAMESPACE", help="Temporal namespace."
    ),
    artifacts: Path | None = typer.Option(
        None,
        "--artifacts",
        metavar="DIR",
        help="Filesystem artifact store where submitted Artifacts are verified (the agents' "
        "store). Default: $MISSIONWEAVE_DATA_DIR/artifacts, else ./data/artifacts.",
    ),
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
) -> None:
    """Run the coordinator: the ``Mission`` workflow and its activities on the
    ``missionweave-coordinator`` task queue, signing with --key. Reviews verify submitted
    Artifacts in --artifacts (or the S3 bucket). Stops cleanly on Ctrl-C."""
    signing_key = load_key(key)
    store = open_store(artifacts, s3_endpoint, s3_bucket, s3_secure, create=True)
    run_client_command(
        _run(signing_key, agent_id, authority_url, temporal_address, namespace, store)
    )


async def _run(key: object, agent_id: str, authority_url: str, temporal_address: str,
               namespace: str, store: ArtifactStore) -> None:  # fmt: skip
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from ..authority.client import AuthorityClient, AuthorityUnavailable
    from ..coordinator import run_coordinator
    from ..protocol import Actor, SigningKey
    from ..telemetry import setup_tracing, temporal_interceptors

    setup_tracing("missionweave-coordinator")  # from OTEL_*; off unless configured
    assert isinstance(key, SigningKey)
    try:
        async with AuthorityClient(authority_url, timeout=5.0) as probe:
            await probe.info()
    except AuthorityUnavailable:
        raise CliError(f"cannot reach the Authority at {authority_url}") from None
    try:
        client = await Client.connect(temporal_address, namespace=namespace,
                                      data_converter=pydantic_data_converter,
                                      interceptors=temporal_interceptors())  # fmt: skip
    except Exception as exc:  # the SDK raises RuntimeError/RPCError variants
        raise CliError(f"cannot reach Temporal at {temporal_address}: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    typer.echo(
        f"coordinator {agent_id} on missionweave-coordinator "
        f"(Temporal {temporal_address}, Authority {authority_url})",
        err=True,
    )
    await run_coordinator(client, authority_url, Actor(agent_id, key), stop=stop,
                          artifact_store=store)  # fmt: skip
