"""``missionweave coordinator``: host the Mission workflow and its activities."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..metrics import COORDINATOR_METRICS_PORT
from . import _options as opt
from ._artifacts import S3_BUCKET, S3_ENDPOINT, S3_SECURE, artifacts_option, open_store
from ._common import (
    load_key,
    run_client_command,
    serve_until_signalled,
    start_metrics,
    start_service,
)

if TYPE_CHECKING:
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
) -> None:
    """Run the coordinator: the Mission workflow and its activities on the
    missionweave-coordinator task queue, signing with --key. Reviews verify submitted
    Artifacts in --artifacts (or the S3 bucket). Stops cleanly on Ctrl-C; --stop-timeout
    bounds the wait for the Worker to drain. Operators scrape GET /metrics on --metrics-port
    (default 9465).
    """
    signing_key = load_key(key)
    store = open_store(artifacts, s3_endpoint, s3_bucket, s3_secure, create=True)
    start_metrics(
        metrics_port, metrics_host, COORDINATOR_METRICS_PORT
    )  # before Temporal: its SDK's metrics too
    run_client_command(
        _run(signing_key, agent_id, authority_url, temporal_address, namespace, store, stop_timeout)
    )


async def _run(
    key: SigningKey,
    agent_id: str,
    authority_url: str,
    temporal_address: str,
    namespace: str,
    store: ArtifactStore,
    stop_timeout: float,
) -> None:
    from ..coordinator import run_coordinator
    from ..protocol import Actor

    client = await start_service(
        "missionweave-coordinator", authority_url, temporal_address, namespace
    )
    stop = asyncio.Event()
    typer.echo(
        f"coordinator {agent_id} on missionweave-coordinator "
        f"(Temporal {temporal_address}, Authority {authority_url})",
        err=True,
    )
    await serve_until_signalled(
        run_coordinator(
            client, authority_url, Actor(agent_id, key), stop=stop, artifact_store=store
        ),
        stop.set,
        what=f"coordinator {agent_id}",
        stop_timeout=stop_timeout,
    )
