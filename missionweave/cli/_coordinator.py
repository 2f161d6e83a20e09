"""``missionweave coordinator``: host the Mission workflow and its activities."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..metrics import COORDINATOR_METRICS_PORT
from . import _options as opt
from ._artifacts import S3_BUCKET, S3_ENDPOINT, S3_SECURE, artifacts_option, open_store
from ._common import load_key, run_client_command, start_metrics
from ._service import Servers, Serving, serve_service

if TYPE_CHECKING:
    from temporalio.client import Client

    from ..artifacts import ArtifactStore
    from ..protocol import SigningKey


def coordinator_command(
    key: Path = typer.Option(..., "--key", help="The coordinator's Ed25519 key (PEM)."),
    agent_id: str = typer.Option(
        "coordinator", "--agent-id", help="The coordinator's agent id in its Groups."
    ),
    authority_url: str = opt.AUTHORITY_URL,
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
    artifacts: Path | None = artifacts_option(
        "where submitted Artifacts are verified (the agents' store)",
        "$MISSIONWEAVE_DATA_DIR/artifacts, else ./data/artifacts",
    ),
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
    stop_timeout: float = opt.STOP_TIMEOUT,
    metrics_port: int | None = opt.metrics_port_option(
        COORDINATOR_METRICS_PORT, "offers, reassignments, reviews, Missions by status"
    ),
    metrics_host: str = opt.METRICS_HOST,
    no_metrics: bool = opt.NO_METRICS,
) -> None:
    """Run the coordinator: the Mission workflow and its activities on the
    missionweave-coordinator task queue, signing with --key. Reviews verify submitted
    Artifacts in --artifacts (or the S3 bucket). Stops cleanly on Ctrl-C; --stop-timeout
    bounds the wait for the Worker to drain. Operators scrape GET /metrics on --metrics-port
    (default 9465).
    """
    signing_key = load_key(key)
    store = open_store(artifacts, s3_endpoint, s3_bucket, s3_secure, create=True)
    # before Temporal: its SDK's metrics too
    start_metrics(metrics_port, metrics_host, COORDINATOR_METRICS_PORT, off=no_metrics)
    servers = Servers(authority_url, temporal_address, namespace)
    run_client_command(_run(signing_key, agent_id, servers, store, stop_timeout))


async def _run(
    key: SigningKey, agent_id: str, servers: Servers, store: ArtifactStore, stop_timeout: float
) -> None:
    from ..coordinator import run_coordinator
    from ..protocol import Actor

    def start(client: Client) -> Serving:
        stop = asyncio.Event()
        typer.echo(
            f"coordinator {agent_id} on missionweave-coordinator "
            f"(Temporal {servers.temporal_address}, Authority {servers.authority_url})",
            err=True,
        )
        serving = run_coordinator(
            client, servers.authority_url, Actor(agent_id, key), stop=stop, artifact_store=store
        )
        return serving, stop.set

    await serve_service(
        "missionweave-coordinator",
        servers,
        start,
        what=f"coordinator {agent_id}",
        stop_timeout=stop_timeout,
    )
