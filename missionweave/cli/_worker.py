"""``missionweave worker …``: run an agent runtime with the user's handlers."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import yaml
from pydantic import ValidationError

from ..protocol import AgentCard, MissionWeaveError, SigningKey
from . import _options as opt
from ._common import CliError, first_line, load_key, run_client_command, start_metrics
from ._service import Servers, Serving, serve_service
from ._worker_log import PROBE_TIMEOUT_S, ConnectionWatch, LogLevel, setup_worker_logging
from ._worker_sched import APPROVAL_RISK, GROUP_QUOTA, RESOURCE, RISK_BUDGET, scheduler_options

if TYPE_CHECKING:
    from ..worker import AgentRuntime

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


async def _run(
    runtime_for: functools.partial[AgentRuntime],
    agent_id: str,
    servers: Servers,
    stop_timeout: float,
) -> None:
    from ..authority.client import SubscriptionRefused

    runtime: AgentRuntime | None = None

    def start(client: Any) -> Serving:
        nonlocal runtime
        runtime = runtime_for(temporal_client=client)
        return _serve(runtime, client, agent_id, servers), runtime.stop

    def clean() -> None:
        if runtime is not None and runtime.interrupted:
            grace = runtime.graceful_shutdown.total_seconds()
            raise CliError(
                f"agent {agent_id} stopped without a clean stop: the handler of "
                f"{', '.join(runtime.interrupted)} did not pause within {grace:g} s; "
                "interrupted and reported failed (retryable) to the Authority, which offers "
                "it again",
                exit_code=1,
            )

    try:
        await serve_service(
            f"missionweave-agent-{agent_id}",
            servers,
            start,
            what=f"agent {agent_id}",
            stop_timeout=stop_timeout,
            after=clean,
        )
    except SubscriptionRefused as exc:
        raise CliError(f"subscription refused: {exc}") from None
    except MissionWeaveError as exc:  # the Authority went away or refused the session
        raise CliError(f"agent {agent_id} stopped: {exc}") from None
    except RuntimeError as exc:  # the Temporal Worker failed
        raise CliError(f"agent {agent_id} stopped: {first_line(exc)}") from None


async def _serve(runtime: AgentRuntime, client: Any, agent_id: str, servers: Servers) -> None:
    """Run the agent, saying once it works, and watch both servers while it runs."""
    watching = await _watch_servers(client, servers.authority_url, servers.temporal_address)

    async def announce() -> None:  # once the session is open and the log caught up
        await runtime.ready.wait()
        typer.echo(
            f"agent {agent_id} working in {', '.join(runtime.groups)} "
            f"(Authority {servers.authority_url}, "
            f"Temporal {servers.temporal_address}/{servers.namespace}); Ctrl-C stops",
            err=True,
        )

    announcing = asyncio.create_task(announce())
    try:
        await runtime.run()
    finally:
        announcing.cancel()
        for task in watching:
            task.cancel()
        await asyncio.gather(*watching, return_exceptions=True)


async def _watch_servers(
    client: Any, authority_url: str, temporal_address: str
) -> list[asyncio.Task[None]]:
    """One :class:`ConnectionWatch` task each for Temporal and the Authority."""
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

    from ..authority.client import AuthorityClient

    def temporal() -> Any:
        return client.workflow_service.get_system_info(
            GetSystemInfoRequest(), retry=False, timeout=timedelta(seconds=PROBE_TIMEOUT_S)
        )

    probe = AuthorityClient(authority_url, timeout=PROBE_TIMEOUT_S)

    async def authority() -> None:
        await probe.info()

    async def closing(watch: ConnectionWatch) -> None:
        try:
            await watch.run()
        finally:
            if watch.name == "the Authority":
                await probe.aclose()

    watches = [
        ConnectionWatch("Temporal", temporal_address, temporal),
        ConnectionWatch("the Authority", authority_url, authority),
    ]
    return [asyncio.create_task(closing(w), name=f"watch {w.name}") for w in watches]


#: Seconds of ``--stop-timeout`` kept for reporting interrupted work after handlers' grace.
REPORT_MARGIN_S = 5.0


def pause_grace_s(stop_timeout: float) -> float:
    """How long running handlers get to pause after Ctrl-C: ``--stop-timeout`` less
    :data:`REPORT_MARGIN_S` to report those that did not (at least half of it)."""
    return max(stop_timeout / 2, stop_timeout - REPORT_MARGIN_S)


def worker_command(
    card: Path = typer.Option(..., "--card", help="Agent Card YAML (AgentCard fields)."),
    key: Path = typer.Option(..., "--key", help="The agent's Ed25519 key (PEM)."),
    handlers: list[str] = typer.Option(
        ..., "--handlers", help="Module with @handler functions (repeatable)."
    ),
    group: list[str] = typer.Option(..., "--group", help="A Group to work in (repeatable)."),
    authority_url: str = opt.AUTHORITY_URL,
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
    state_dir: Path = typer.Option(
        Path(".missionweave"),
        "--state-dir",
        help="Local state directory: <agent_id>.db (cursors, its own WorkItems), "
        "rebuilt from the log if deleted.",
    ),
    stop_timeout: float = opt.STOP_TIMEOUT,
    group_weight: list[str] = typer.Option(
        [],
        "--group-weight",
        metavar="GROUP=WEIGHT",
        help="A Group's weight in the scheduler's fair shares of slot time (repeatable; "
        "default 1 each): with ops=3 and research=1, ops gets three quarters of the slots "
        "while both have work waiting. A weight set in the Group's log (group.set_priority, "
        "by its owner or a MissionOwner) wins.",
    ),
    group_quota: list[str] = GROUP_QUOTA,
    resource: list[str] = RESOURCE,
    approval_risk: str | None = APPROVAL_RISK,
    risk_budget: list[str] = RISK_BUDGET,
    log_level: LogLevel = typer.Option(
        LogLevel.INFO,
        "--log-level",
        case_sensitive=False,
        help="MissionWeave's and your handlers' (ctx.logger) log lines from this level on; "
        "other libraries log warnings and errors only.",
    ),
    metrics_port: int | None = opt.metrics_port_option(
        None, "slots, queue, declines, handler durations, budget burned, offline buffer"
    ),
    metrics_host: str = opt.METRICS_HOST,
) -> None:
    """Run an agent: answer offers, schedule and execute WorkItems with your handlers.

    The agent opens a session, follows each Group's log into local state
    (<state-dir>/<agent_id>.db, rebuilt from the log if deleted), and runs the
    execute_work_item activity on one task queue per Group,
    missionweave-agent-<agent_id>/<group_id>. The agent holds no artifact store:
    ctx.publish and ctx.fetch go through the Authority, which grants one object at a time
    after its membership and context checks.

    Ctrl-C asks running handlers to pause (ctx.should_pause()) and drains the Worker. A
    handler still running 5 s before --stop-timeout ends (at half of it, for one under 10 s) is
    cancelled and its WorkItem reported failed, retryable, to the Authority, which offers it
    again at once; the worker then exits with status 1 and names it.

    Another worker started with the same agent id opens a newer session and replaces this one:
    this one stops, logs which session took over, when, and which process (pid and host), and
    exits with status 0 (a supervisor that restarts failed workers does not start a fight).

    While Temporal or the Authority is unreachable the worker says so once, goes on retrying
    quietly, and says when it answers again. --metrics-port (none by default: several agents
    share a machine; 9466 and up by convention) serves GET /metrics.
    """
    from ..metrics import process_runtime
    from ..worker import AgentRuntime, HandlerLoadError, load_handlers

    setup_worker_logging(log_level.value)
    signing_key = load_key(key)
    agent_card = load_card(card, signing_key)
    if os.getcwd() not in sys.path:  # `my_package.handlers` relative to where the user runs
        sys.path.insert(0, os.getcwd())
    try:
        registry = load_handlers(*handlers)
    except HandlerLoadError as exc:
        raise CliError(str(exc)) from None
    weights = parse_group_weights(group_weight, list(group))
    scheduling = scheduler_options(resource, approval_risk, risk_budget, list(group), group_quota)
    # metrics first (the Temporal runtime then exports the SDK's too); the runtime forwards
    # the SDK core's log records to Python logging, where QuietRetries shapes them
    start_metrics(metrics_port, metrics_host)
    process_runtime()
    runtime_for = functools.partial(
        AgentRuntime,
        agent_card,
        signing_key,
        groups=list(group),
        authority_url=authority_url,
        handlers=registry,
        state_path=state_dir / f"{agent_card.agent_id}.db",
        graceful_shutdown=timedelta(seconds=pause_grace_s(stop_timeout)),
        group_weights=weights,
        **scheduling,
    )
    servers = Servers(authority_url, temporal_address, namespace)
    run_client_command(_run(runtime_for, agent_card.agent_id, servers, stop_timeout))


def parse_group_weights(values: list[str], groups: list[str]) -> dict[str, float]:
    """``["ops=3", "research=0.5"]`` → ``{"ops": 3.0, "research": 0.5}``.

    Raises:
        CliError: not ``GROUP=WEIGHT``, a weight that is not a number > 0, a Group the worker
            does not work in (``--group``), or a Group given twice.
    """
    out: dict[str, float] = {}
    for v in values:
        name, sep, raw = v.partition("=")
        try:
            weight = float(raw)
        except ValueError:
            weight = 0.0
        if not sep or not name or not weight > 0 or weight == float("inf"):
            raise CliError(f"--group-weight {v!r}: expected GROUP=WEIGHT with a number > 0")
        if name not in groups:
            raise CliError(f"--group-weight {v!r}: {name} is not a --group of this worker")
        if name in out:
            raise CliError(f"--group-weight {v!r}: {name} has a weight already")
        out[name] = weight
    return out


__all__ = ["load_card", "parse_group_weights", "worker_command"]
