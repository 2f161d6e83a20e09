"""``missionweave mission …``: start, inspect, follow, cancel and draw Missions on Temporal."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
import yaml
from pydantic import ValidationError

from ..protocol.temporal_contract import (
    MissionResult,
    MissionSpec,
    MissionStatus,
    mission_workflow_id,
)
from ..views import console, counts_line, render_table, to_mermaid
from . import _options as opt
from ._artifacts import S3_BUCKET, S3_ENDPOINT, S3_SECURE, STORE, open_store
from ._common import CliError, connect_temporal, first_line, run_client_command, setup_cli_tracing
from ._inputs import by_reference

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle

app = typer.Typer(
    help="Start Missions and follow them: status, live watch, cancel, Mermaid graph.",
    no_args_is_help=True,
)

#: How long a query or the ``cancel`` update may wait for the coordinator.
QUERY_TIMEOUT = timedelta(seconds=10)

_ID = typer.Argument(
    ..., metavar="ID", help="The mission id (the workflow id mission-<id> is accepted too)."
)

# ------------------------------------------------------------------------ reading a spec


def load_spec(source: str) -> MissionSpec:
    """Read and validate a MissionSpec from a JSON or YAML file, or ``-`` for stdin.

    The DAG is checked too (unknown dependencies, self-loops, cycles, duplicate ids), so a
    Mission that the workflow would refuse is refused here, before anything starts.

    Raises:
        CliError: the file is missing, is neither JSON nor YAML, or is not a valid
            MissionSpec; the message is one line naming every bad field (and a close
            field name for a misspelled one).
    """
    from ..outcome import all_errors
    from ..protocol import GraphError, WorkGraph

    name = "stdin" if source == "-" else source
    if source == "-":
        text = sys.stdin.read()
    else:
        path = Path(source)
        if not path.is_file():
            raise CliError(f"no mission file at {source}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"cannot read {source}: {exc}") from None
    try:
        data: Any = json.loads(text)
    except ValueError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CliError(f"{name}: neither JSON nor YAML: {first}") from None
    if not isinstance(data, dict):
        raise CliError(f"{name}: a MissionSpec is a mapping (group_id, mission_id, items, …)")
    try:
        spec = MissionSpec.model_validate(data)
    except ValidationError as exc:  # duplicate WorkItem ids too
        raise CliError(f"{name}: invalid MissionSpec: {all_errors(exc, MissionSpec)}") from None
    if not spec.items:  # it would complete at once, before anything could be added
        raise CliError(f"{name}: invalid MissionSpec: items: a Mission needs at least one WorkItem")
    try:
        WorkGraph().add(
            {i.work_item_id: i.dependencies for i in spec.items},
            {i.work_item_id: i.contract.dependency_strategy for i in spec.items},
        )
    except GraphError as exc:
        raise CliError(f"{name}: invalid MissionSpec: items: {exc}") from None
    return spec


# ------------------------------------------------------------------------------ Temporal


async def _connect(address: str, namespace: str) -> Client:
    setup_cli_tracing("missionweave-cli")  # the client traces the calls it makes
    return await connect_temporal(address, namespace)


def _rpc_error(exc: BaseException, what: str) -> NoReturn:
    raise CliError(f"{what}: {first_line(exc)}") from None


async def _find(
    client: Client, mission: str
) -> tuple[WorkflowHandle[Any, Any], WorkflowExecutionDescription]:
    """The handle and description of the Mission ``mission`` (an id, or its workflow id).

    Raises:
        CliError: no such workflow in the namespace, or Temporal answered with an error.
    """
    from temporalio.service import RPCError, RPCStatusCode

    from ..outcome import MISSION_ID

    candidates = [mission_workflow_id(mission)]
    if mission.startswith("mission-"):
        candidates.append(mission)
    for wid in candidates:
        handle = client.get_workflow_handle(wid, result_type=MissionResult)
        try:
            desc = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
            if desc.typed_search_attributes.get(MISSION_ID):
                return handle, desc
            # a run that is not the Mission (its id started again, refused `MissionExists`):
            # the Mission is the latest run that says it is
            async for run in client.list_workflows(
                f'WorkflowId = "{wid}" AND MissionId IS NOT NULL'
            ):
                handle = client.get_workflow_handle(
                    wid, run_id=run.run_id, result_type=MissionResult
                )
                return handle, await handle.describe(rpc_timeout=QUERY_TIMEOUT)
            return handle, desc
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND and "amespace" not in exc.message:
                continue
            _rpc_error(exc, f"cannot look up mission {mission!r}")
    raise CliError(
        f"no mission {mission!r} in namespace {client.namespace!r} (no workflow {candidates[0]})"
    )


def _result_status(result: MissionResult) -> MissionStatus:
    """A status built from a closed Mission's result (when no coordinator answers queries)."""
    from ..protocol import state_counts
    from ..protocol.temporal_contract import WorkItemStatus

    counts = state_counts([*result.archived.values(), *(i.state for i in result.items)])
    return MissionStatus(
        mission_id=result.mission_id,
        group_id=result.group_id,
        status=result.status,
        counts=counts,
        event_range=result.event_range,
        reason=result.reason,
        items=[
            WorkItemStatus(
                work_item_id=i.work_item_id,
                state=i.state,
                owner=i.owner,
                ownership_epoch=i.ownership_epoch,
                attempts=i.attempts,
                dependencies=i.dependencies,
                detail=i.detail,
                outputs=i.outputs,
                error=i.error,
            )
            for i in result.items
        ],
    )


async def _status(
    handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription, mission: str
) -> MissionStatus:
    """The ``status`` query's answer; for a closed Mission whose query nobody answers, the
    status built from its result (a failed or cancelled Mission's is in its failure).

    Raises:
        CliError: the query failed (no coordinator running, or an error) and there is no
            result to fall back on.
    """
    from temporalio.client import WorkflowExecutionStatus

    from ..outcome import mission_result
    from ..workflows import MissionWorkflow

    try:
        answer: MissionStatus = await handle.query(
            MissionWorkflow.status, rpc_timeout=QUERY_TIMEOUT
        )
        return answer
    except Exception as exc:
        if desc.status != WorkflowExecutionStatus.RUNNING:
            try:
                return _result_status(await mission_result(handle, rpc_timeout=QUERY_TIMEOUT))
            except Exception:
                pass
        hint = ""
        if desc.status == WorkflowExecutionStatus.RUNNING:
            hint = " (is a coordinator running on task queue missionweave-coordinator?)"
        raise CliError(
            f"the status query of mission {mission!r} failed: {first_line(exc)}{hint}"
        ) from None


# ------------------------------------------------------------------------------ commands


@app.command("start")
def start(
    file: str = typer.Argument(
        ..., metavar="FILE", help="MissionSpec as JSON or YAML; - reads stdin."
    ),
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
    ui_url: str = opt.UI_URL,
    store: Path | None = STORE,
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
) -> None:
    """Validate a MissionSpec and start its Mission workflow.

    The workflow id is mission-<mission_id> on task queue missionweave-coordinator, its
    summary the spec's title. Prints the workflow id and its Temporal web UI link. Exits 2
    with one line naming the first bad field when the spec is invalid.

    A WorkItem input over 64 KiB (of its JSON) is stored in the Group's namespace of the
    artifact store (--store, or --s3-endpoint/--s3-bucket: the operator's store, which the
    Authority serves to the Group's agents) and passed by reference
    ({"$input_artifact": hash}): a Mission carries larger inputs only so. Exits 2 when the
    inline inputs are still more than a Mission carries (512 KiB together).

    Example: missionweave mission start examples/missions/hello.yaml
    """
    given = load_spec(file)
    spec = by_reference(  # into the Group's namespace: its agents' reads are granted there
        given,
        lambda: open_store(store, s3_endpoint, s3_bucket, s3_secure, create=True).for_group(
            given.group_id
        ),
    )
    run_client_command(_start(spec, temporal_address, namespace, ui_url))


async def _start(spec: MissionSpec, address: str, namespace: str, ui_url: str) -> None:
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from ..dev import workflow_ui_url
    from ..outcome import start_mission

    client = await _connect(address, namespace)
    wid = mission_workflow_id(spec.mission_id)
    try:
        await start_mission(
            client,
            spec,
            # A mission id is unique within its Group: never start a second run of it.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            rpc_timeout=QUERY_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        raise CliError(await _exists_message(client, spec.mission_id, wid)) from None
    except Exception as exc:
        _rpc_error(exc, f"cannot start mission {spec.mission_id!r}")
    typer.echo(f"started mission {spec.mission_id} in group {spec.group_id}: workflow {wid}")
    typer.echo(workflow_ui_url(ui_url, namespace, wid))


async def _exists_message(client: Client, mission_id: str, wid: str) -> str:
    """What to do when ``mission_id`` was started before: a Mission's id is never started
    again (its Group's log holds it), so start it under a new id, or look at the one there is
    (issue 29 item 7)."""
    try:
        desc = await client.get_workflow_handle(wid).describe(rpc_timeout=QUERY_TIMEOUT)
        state = f", {desc.status.name.lower()}" if desc.status is not None else ""
    except Exception:  # the message stands without it
        state = ""
    return (
        f"mission {mission_id!r} already exists (workflow {wid}{state}): a Mission id is never "
        "started again. Give this Mission a new mission_id in its file, or see the existing "
        f"one with: missionweave mission status {mission_id}"
    )


@app.command("status")
def status(
    mission: str = _ID,
    as_json: bool = typer.Option(False, "--json", help="Print the status query's JSON."),
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
) -> None:
    """Show a Mission's WorkItems: state, owner, epoch, lease, attempts, detail.

    The table comes from the workflow's status query; --json prints the query's answer.

    Example: missionweave mission status hello-1 --json
    """
    run_client_command(_show_status(mission, as_json, temporal_address, namespace))


async def _show_status(mission: str, as_json: bool, address: str, namespace: str) -> None:
    client = await _connect(address, namespace)
    handle, desc = await _find(client, mission)
    answer = await _status(handle, desc, mission)
    if as_json:
        typer.echo(answer.model_dump_json(indent=2))
    else:
        console().print(render_table(answer))


@app.command("watch")
def watch(
    mission: str = _ID,
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Refresh every N seconds."),
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
) -> None:
    """Show a live table of a Mission's WorkItems until the Mission ends.

    Exits 0 when the Mission completed, 1 when it failed or was cancelled.

    Example: missionweave mission watch hello-1
    """
    run_client_command(_watch(mission, interval, temporal_address, namespace))


async def _watch(mission: str, interval: float, address: str, namespace: str) -> int:
    from rich.live import Live
    from temporalio.client import WorkflowExecutionStatus

    client = await _connect(address, namespace)
    handle, desc = await _find(client, mission)
    screen = console()
    answer = await _status(handle, desc, mission)

    async def follow(show: Callable[[MissionStatus], None]) -> None:
        nonlocal desc, answer
        show(answer)
        while desc.status == WorkflowExecutionStatus.RUNNING:
            await asyncio.sleep(interval)
            try:
                desc = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
            except Exception as exc:
                _rpc_error(exc, f"lost mission {mission!r}")
            answer = await _status(handle, desc, mission)
            show(answer)

    if screen.is_terminal:
        with Live(render_table(answer), console=screen, auto_refresh=False) as live:
            await follow(lambda st: live.update(render_table(st), refresh=True))
    else:  # a log, not a screen: one line whenever the counts change, then the final table
        seen: list[str] = []

        def line(st: MissionStatus) -> None:
            text = f"{st.mission_id} {st.status}: " + counts_line(st)
            if not seen or seen[-1] != text:
                seen.append(text)
                typer.echo(text)

        await follow(line)
        screen.print(render_table(answer))
    return await _ending(mission, handle, desc, answer)


async def _ending(
    mission: str,
    handle: WorkflowHandle[Any, Any],
    desc: WorkflowExecutionDescription,
    answer: MissionStatus,
) -> int:
    """Print how the Mission ended; the exit code (0 only when it completed)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    from ..outcome import mission_result

    final = answer.status
    try:  # a failed or cancelled Mission's result is in its failure's details
        final = (await mission_result(handle, rpc_timeout=QUERY_TIMEOUT)).status
    except WorkflowFailureError as exc:  # no result: invalid input, an existing Mission …
        if not isinstance(exc.cause, CancelledError):  # Canceled: the query's answer stands
            typer.echo(f"mission {mission} failed: {first_line(exc.cause or exc)}")
            return 1
    except Exception:  # the query's answer stands
        pass
    if final in ("completed", "failed", "cancelled"):
        typer.echo(f"mission {mission} {final}")
        return 0 if final == "completed" else 1
    name = desc.status.name.lower() if desc.status is not None else "closed"
    typer.echo(f"mission {mission}: workflow {name}")
    return 1


@app.command("cancel")
def cancel(
    mission: str = _ID,
    reason: str = typer.Option("cancelled by request", "--reason", help="Why (recorded)."),
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
) -> None:
    """Cancel a running Mission and every unfinished WorkItem.

    Sends the workflow's cancel update and prints the Mission's final status.

    Example: missionweave mission cancel hello-1 --reason "wrong input"
    """
    run_client_command(_cancel(mission, reason, temporal_address, namespace))


async def _ended_as(handle: WorkflowHandle[Any, Any], desc: WorkflowExecutionDescription) -> str:
    """How a closed Mission ended, in the Mission's words (``mission cancelled``) when its
    workflow returned a :class:`MissionResult`, else in Temporal's (``workflow terminated``)."""
    from temporalio.client import WorkflowFailureError

    from ..outcome import mission_result

    try:
        result = await mission_result(handle, rpc_timeout=QUERY_TIMEOUT)
    except WorkflowFailureError:
        name = desc.status.name.lower() if desc.status is not None else "closed"
        return f"workflow {name}"
    return f"mission {result.status}"


async def _cancel(mission: str, reason: str, address: str, namespace: str) -> None:
    from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError

    from ..protocol.temporal_contract import CancelInput
    from ..workflows import MissionWorkflow

    client = await _connect(address, namespace)
    handle, desc = await _find(client, mission)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise CliError(f"mission {mission!r} is not running ({await _ended_as(handle, desc)})")
    try:
        async with asyncio.timeout(QUERY_TIMEOUT.total_seconds() * 3):
            final: str = await handle.execute_update(
                MissionWorkflow.cancel, CancelInput(reason=reason)
            )
    except TimeoutError:
        raise CliError(
            f"mission {mission!r} did not answer the cancel update "
            "(is a coordinator running on task queue missionweave-coordinator?)"
        ) from None
    except WorkflowUpdateFailedError as exc:
        _rpc_error(exc.cause or exc, f"cannot cancel mission {mission!r}")
    except Exception as exc:
        _rpc_error(exc, f"cannot cancel mission {mission!r}")
    typer.echo(f"mission {mission} {final}")


@app.command("graph")
def graph(
    mission: str = _ID,
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
) -> None:
    """Print a Mermaid flowchart of a Mission's DAG, each WorkItem coloured by its state.

    Example: missionweave mission graph hello-1 > hello-1.mmd
    """
    run_client_command(_graph(mission, temporal_address, namespace))


async def _graph(mission: str, address: str, namespace: str) -> None:
    client = await _connect(address, namespace)
    handle, desc = await _find(client, mission)
    typer.echo(to_mermaid(await _status(handle, desc, mission)), nl=False)


__all__ = ["app", "load_spec"]
