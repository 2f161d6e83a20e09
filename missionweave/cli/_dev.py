"""``missionweave dev …``: the embedded stack of one machine."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..metrics import COORDINATOR_METRICS_PORT
from ._common import CliError, setup_cli_tracing, start_metrics
from ._options import (
    AUTHORITY_PORT,
    HEADLESS,
    NO_METRICS,
    TEMPORAL_PORT,
    UI_PORT,
    metrics_port_option,
    stack_ports,
)

if TYPE_CHECKING:
    from ..dev import EmbeddedStack

app = typer.Typer(help="Run everything MissionWeave needs on this machine.", no_args_is_help=True)


#: The example Mission the "Next" hint starts, and the agents it needs: ``(agent_id, card)``
#: per capability of the Mission's WorkItems (``text.stats``, ``text.checksum``); the hint
#: enrolls and runs each.
EXAMPLE_MISSION = "examples/missions/hello.yaml"
EXAMPLE_AGENTS = (
    ("counter-1", "examples/agents/counter.yaml"),
    ("checker-1", "examples/agents/checker.yaml"),
)


def _default_data_dir() -> Path:
    return Path(os.environ.get("MISSIONWEAVE_DATA_DIR") or "data")


@app.command("up")
def up(
    data_dir: Path = typer.Option(
        _default_data_dir,
        "--data-dir",
        show_default="$MISSIONWEAVE_DATA_DIR or ./data",
        help="Directory for every file of the stack (databases, keys, artifacts, logs).",
    ),
    temporal_port: int = TEMPORAL_PORT,
    ui_port: int = UI_PORT,
    authority_port: int = AUTHORITY_PORT,
    headless: bool = HEADLESS,
    group: str = typer.Option("demo", "--group", "-g", help="The Group to create (or find)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface every server binds."),
    metrics_port: int | None = metrics_port_option(
        COORDINATOR_METRICS_PORT, "the Authority's, the coordinator's and in-process agents'"
    ),
    no_metrics: bool = NO_METRICS,
) -> None:
    """Start the embedded stack and keep it up until Ctrl-C (or SIGTERM).

    It runs the Temporal dev server (state in DATA_DIR/temporal.db, our search attributes
    registered, web UI), the Group Authority on SQLite (DATA_DIR/authority.db) over HTTP, the
    filesystem artifact store (DATA_DIR/artifacts) and the coordinator (key
    DATA_DIR/keys/coordinator.pem), which creates the Group on the first start with itself
    as owner, coordinator and mission owner. Agents run separately: missionweave worker.
    GET /metrics on --metrics-port (default 9465, on --host; 0: any free port, as for every
    port here; --no-metrics: none) serves the stack's series.

    When the Temporal dev server dies (it runs as a child process), it is started again on the
    same port and state, and a line on stderr says so. At a fourth death within a minute, or
    when it cannot start again, the command stops the stack and exits with status 1 naming it.

    Example: missionweave dev up --data-dir data --group demo
    """
    from ..dev import EmbeddedStack

    if data_dir.exists() and not data_dir.is_dir():
        raise CliError(f"--data-dir {data_dir} is not a directory")
    stack = EmbeddedStack(
        data_dir,
        host=host,
        group=group,
        **stack_ports(temporal_port, ui_port, authority_port, headless),
    )
    asyncio.run(_up(stack, metrics_port, no_metrics=no_metrics))


def _describe(stack: EmbeddedStack, metrics_url: str | None = None) -> str:
    key = stack.coordinator_key_path
    ui = stack.ui_url or "(headless)"
    ui_env = f" MISSIONWEAVE_UI_URL={stack.ui_url}" if stack.ui_url else ""
    agents = []
    for agent_id, card in EXAMPLE_AGENTS:
        agent_key = key.parent / f"{agent_id}.pem"  # private keys stay under the data dir
        agents += [
            f"  .venv/bin/missionweave group add --key {key} --group {stack.group} "
            f"--agent-id {agent_id} --agent-key {agent_key} --create-key",
            f"  .venv/bin/missionweave worker --card {card} --key {agent_key} "
            f"--handlers examples.agents.handlers --group {stack.group} "
            f"--authority-url {stack.authority_url} --temporal-address {stack.temporal_target} &",
        ]
    return "\n".join(
        [
            "MissionWeave dev stack is up; Ctrl-C stops it.",
            f"  Temporal      {stack.temporal_target} (namespace {stack.namespace})",
            f"  Temporal UI   {ui}",
            f"  Authority     {stack.authority_url}",
            f"  Metrics       {metrics_url or '(none)'}",
            f"  Artifacts     {stack.files.artifacts}",
            f"  Data dir      {stack.data_dir}",
            f"  Coordinator   {stack.coordinator.agent_id}, key {key}",
            f"  Group         {stack.group}",
            "Next, in another shell at the repository's root (examples/ holds the example agents'"
            " cards and handlers, and a Mission for them):",
            f"  export TEMPORAL_ADDRESS={stack.temporal_target} "
            f"MISSIONWEAVE_AUTHORITY_URL={stack.authority_url}{ui_env}",
            *agents,
            f"  .venv/bin/missionweave mission start {EXAMPLE_MISSION}",
        ]
    )


async def _up(
    stack: EmbeddedStack, metrics_port: int | None = None, *, no_metrics: bool = False
) -> None:
    from ..dev import StackError

    setup_cli_tracing("missionweave-dev")  # from OTEL_*; off unless configured
    # before the stack's Temporal client: the SDK's metrics are served too
    metrics_url = start_metrics(
        metrics_port, stack.host, COORDINATOR_METRICS_PORT, off=no_metrics, announce=False
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            await stack.start()
        except StackError as exc:
            raise CliError(str(exc)) from None
        typer.echo(_describe(stack, metrics_url))
        # Temporal runs as a child process: when it dies it is started again, and when it
        # cannot be, the command exits naming it instead of saying "up" over a dead server.
        watch = asyncio.create_task(stack.supervise(lambda m: typer.echo(m, err=True)))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({watch, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if watch.done():
            died = watch.exception()
            raise CliError(str(died) if died else "the stack stopped watching its parts", 1)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
        # A second Ctrl-C while stopping interrupts the orderly shutdown.
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        typer.echo("stopping: agents and the coordinator, the Authority, then Temporal", err=True)
    finally:
        await stack.stop()
    typer.echo("stopped", err=True)


__all__ = ["app"]
