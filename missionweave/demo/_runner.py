"""``missionweave demo``: the embedded stack, the demo agents, the audit Mission, live progress
and the summary.

:func:`run_demo` starts an :class:`~missionweave.dev.EmbeddedStack` under the data directory
(Temporal dev server, Authority, artifact store, coordinator with the audit's schemas and
checks), the four demo agents, then the Mission; it follows the Mission until it ends, copies
the SBOM out of the store, verifies the Group log offline and prints the summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError

from ..outcome import mission_result, start_mission
from ..protocol import AgentCard, EventType, MissionWeaveError, SigningKey
from ..protocol.temporal_contract import (
    CancelInput,
    MissionResult,
)
from ..workflows import MissionWorkflow
from ._environment import default_site_packages, metadata_dirs
from ._handlers import demo_registry
from ._progress import ProgressView
from ._spec import AGENTS, OWNER_ID, audit_mission, checks, new_mission_id, sbom_id, schemas
from ._summary import Summary, log_stats, print_summary, summarize, verify_chain

if TYPE_CHECKING:
    from rich.console import Console

    from ..authority.client import AuthorityClient
    from ..dev import EmbeddedStack, StackPorts
    from ..protocol import Event


class DemoError(MissionWeaveError):
    """The demo cannot run: a bad ``--site-packages``, a port in use, a stack part that does
    not start. The message is one line for the user."""


class DemoInterrupted(DemoError):
    """Ctrl-C (or SIGTERM) during the audit: the Mission was cancelled."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """How to run the demo.

    Attributes:
        data_dir: every file of the stack, the agents' keys and the SBOM copies.
        site_packages: the directories to audit (empty: the running interpreter's).
        keep_running: keep the stack up after the summary until ``stop`` is set.
        require_approval: the SBOM needs a MissionOwner's Approval (``missionweave approve``).
        group: the Group.
        ports: where the embedded stack listens (:class:`~missionweave.dev.StackPorts`;
            a port left out keeps :class:`~missionweave.dev.EmbeddedStack`'s default).
        poll_s: how often the progress is refreshed, seconds.
    """

    data_dir: Path
    site_packages: tuple[Path, ...] = ()
    keep_running: bool = False
    require_approval: bool = False
    group: str = "demo"
    ports: StackPorts = field(default_factory=dict)  # type: ignore[assignment]
    poll_s: float = 1.0


def resolve_target(site_packages: Sequence[Path]) -> tuple[list[Path], bool]:
    """The directories to audit and whether they are the running interpreter's.

    Raises:
        DemoError: a path does not exist, is not a directory or holds no ``*.dist-info`` /
            ``*.egg-info``.
    """
    if not site_packages:
        paths = default_site_packages()
        if not paths:
            raise DemoError("the running interpreter has no site-packages directory")
        return [p.absolute() for p in paths], True
    out = []
    for p in site_packages:
        if p.exists() and not p.is_dir():
            raise DemoError(f"--site-packages {p}: not a directory")
        if not p.is_dir():
            raise DemoError(f"--site-packages {p}: no such directory")
        try:
            found = metadata_dirs(p)
        except OSError as exc:
            raise DemoError(f"--site-packages {p}: {exc.strerror or exc}") from None
        if not found:
            raise DemoError(f"--site-packages {p}: no distribution (*.dist-info) in it")
        out.append(p.absolute())
    return out, False


def check_data_dir(data_dir: Path) -> None:
    """Refuse a data directory that is a file, or lies under one.

    Raises:
        DemoError: ``--data-dir DIR is not a directory``.
    """
    existing = next((p for p in (data_dir, *data_dir.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        under = "" if existing == data_dir else f" ({existing} is a file)"
        raise DemoError(f"--data-dir {data_dir} is not a directory{under}")


class LogReports:
    """Finds the Artifacts verified WorkItems submitted, in the Group log.

    The SBOM handler reads the verify reports from its ``dependency_artifacts``; the verify
    WorkItems are joined to it by edges added at run time, and a workflow that hands over only
    the dependencies declared at authorization leaves them out: then the handler asks here.
    It reads the log from the Mission's ``mission.created`` on, then only what is new.

    Args:
        client: an Authority client.
    """

    PAGE = 1000

    def __init__(self, client: AuthorityClient) -> None:
        self.client = client
        self._after: dict[tuple[str, str], int] = {}
        self._submitted: dict[str, list[str]] = {}
        self._verified: dict[str, list[str]] = {}

    async def _start(self, group_id: str, mission_id: str) -> int:
        upper, _ = await self.client.head(group_id)
        while upper > 0:
            after = max(0, upper - self.PAGE)
            for ev in await self.client.events(group_id, after, upper - after):
                if ev.type == EventType.MISSION_CREATED and ev.body.get("mission_id") == mission_id:
                    return ev.seq - 1
            upper = after
        return 0

    def _apply(self, ev: Event) -> None:
        wid = ev.work_item_id
        if wid is None:
            return
        if ev.type == EventType.WORK_SUBMITTED:
            self._submitted[wid] = [str(a) for a in ev.body.get("artifacts", [])]
        elif ev.type == EventType.WORK_RESULT_ACCEPTED and wid in self._submitted:
            self._verified[wid] = self._submitted[wid]

    async def __call__(
        self, group_id: str, mission_id: str, wanted: Sequence[str]
    ) -> dict[str, list[str]]:
        """Verified WorkItems among ``wanted`` → the Artifacts of their accepted submission."""
        key = (group_id, mission_id)
        if key not in self._after:
            self._after[key] = await self._start(group_id, mission_id)
        while True:
            page = await self.client.events(group_id, self._after[key], self.PAGE)
            for ev in page:
                self._apply(ev)
            if page:
                self._after[key] = page[-1].seq
            if len(page) < self.PAGE:
                break
        return {w: self._verified[w] for w in wanted if w in self._verified}


def _key(path: Path) -> SigningKey:
    from ..dev import StackError, load_or_create_key

    try:
        return load_or_create_key(path)
    except StackError as exc:
        raise DemoError(str(exc)) from None


async def _start_stack(stack: EmbeddedStack) -> None:
    from ..dev import StackError

    try:
        await stack.start()
    except StackError as exc:
        raise DemoError(str(exc)) from None


async def _start_agents(stack: EmbeddedStack, keys_dir: Path) -> None:
    from ..worker import AdmissionPolicy

    lookup = LogReports(stack.authority_client)
    for a in AGENTS:
        key = _key(keys_dir / f"{a.agent_id}.pem")
        card = AgentCard(
            agent_id=a.agent_id,
            public_key=key.public_key,
            capabilities=list(a.capabilities),
            max_concurrency=a.max_concurrency,
        )
        # handlers here end within seconds: a short graceful shutdown keeps Ctrl-C quick
        await stack.start_agent(
            card,
            key,
            demo_registry(a.capabilities, lookup),
            roles=a.roles,
            admission=AdmissionPolicy(max_queue_depth=a.max_queue_depth, default_estimate_ms=2_000),
            graceful_shutdown=timedelta(seconds=3),
        )


def approve_command(stack: EmbeddedStack, mission_id: str, key_path: Path) -> str:
    """The ``missionweave approve`` command that grants the SBOM's Approval."""
    exe = Path(sys.executable).with_name("missionweave")  # the venv's, found from any shell
    return (
        f"{exe if exe.exists() else 'missionweave'} approve --mission {mission_id} "
        f"--item {sbom_id(mission_id)} "
        f"--key {key_path} --authority-url {stack.authority_url} "
        f"--temporal-address {stack.temporal_target} --namespace {stack.namespace}"
    )


async def _cancel(handle: WorkflowHandle[Any, MissionResult]) -> str:
    """Cancel the Mission on an interruption; says how that went, in one line."""
    try:
        await asyncio.wait_for(
            handle.execute_update(MissionWorkflow.cancel, CancelInput(reason="demo interrupted")),
            5,
        )
    except Exception as exc:  # the server may be gone already (Ctrl-C reaches it too)
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"interrupted; the Mission could not be cancelled ({why})"
    return "interrupted; the Mission was cancelled"


async def _follow(
    handle: WorkflowHandle[Any, MissionResult],
    view: ProgressView,
    stop: asyncio.Event,
    poll_s: float,
    approve: str | None,
) -> MissionResult:
    # a failed or cancelled Mission's result is in its failure: the summary says why
    result = asyncio.ensure_future(mission_result(handle))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while True:
            # a query may miss a busy or restarting worker: ask again next time
            with contextlib.suppress(RPCError, WorkflowQueryFailedError):
                status = await handle.query(MissionWorkflow.status)
                view.update(status)
                if approve and any(i.review_stage == "approval" for i in status.items):
                    view.note(
                        f"The SBOM awaits a MissionOwner's Approval. In another shell:\n  {approve}"
                    )
                    approve = None
            if result.done():
                return result.result()
            await asyncio.wait(
                {result, stopped}, timeout=poll_s, return_when=asyncio.FIRST_COMPLETED
            )
            if stop.is_set() and not result.done():
                raise DemoInterrupted(await _cancel(handle))
    except WorkflowFailureError as exc:
        raise DemoError(f"the Mission workflow failed: {exc.cause or exc}") from None
    finally:
        stopped.cancel()
        if not result.done():
            result.cancel()
        elif not result.cancelled():
            result.exception()  # retrieved: an interrupted wait's RPC error is not news
        view.close()


def _say(console: Console, text: str) -> None:
    """Print ``text`` as is: no markup, never wrapped (paths and links stay whole)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)


def _header(console: Console, stack: EmbeddedStack, opts: DemoOptions, paths: list[Path]) -> None:
    agents = ", ".join(
        f"{a.agent_id} ({'+'.join(c.split('@')[0] for c in a.capabilities)}, "
        f"{a.max_concurrency} slot{'s' if a.max_concurrency > 1 else ''})"
        for a in AGENTS
    )
    _say(console, f"MissionWeave demo: integrity audit of {', '.join(map(str, paths))}")
    _say(console, f"  data dir     {opts.data_dir}")
    _say(console, f"  Authority    {stack.authority_url}")
    _say(console, f"  Temporal     {stack.temporal_target}")
    _say(console, f"  agents       {agents}")


async def _mission_events(stack: EmbeddedStack, result: MissionResult) -> list[Event]:
    if result.event_range is None:
        return []
    first, last = result.event_range
    out: list[Event] = []
    after = first - 1
    while after < last:
        page = await stack.authority_client.events(stack.group, after, 1000)
        if not page:
            break
        out += [e for e in page if e.seq <= last]
        after = page[-1].seq
    return out


async def run_demo(
    opts: DemoOptions, console: Console, *, stop: asyncio.Event | None = None
) -> Summary:
    """Run the audit end to end and print its summary.

    Args:
        opts: the settings.
        console: where progress and the summary go.
        stop: set it (Ctrl-C) to cancel the Mission, or to end ``keep_running``.

    Returns:
        The summary; the Mission succeeded when ``summary.status == "completed"``.

    Raises:
        DemoError: a bad target or data directory, a stack part that does not start, a
            workflow failure.
        DemoInterrupted: ``stop`` was set before the Mission ended (it was cancelled).
    """
    from ..dev import EmbeddedStack

    paths, interpreter = resolve_target(opts.site_packages)
    check_data_dir(opts.data_dir)
    stop = stop or asyncio.Event()
    stack = EmbeddedStack(
        opts.data_dir,
        **opts.ports,
        group=opts.group,
        checks=checks(),
        schemas=schemas(),
    )
    try:
        await _start_stack(stack)
        keys = opts.data_dir / "keys"
        await _start_agents(stack, keys)
        approve = None
        if opts.require_approval:
            owner = _key(keys / f"{OWNER_ID}.pem")
            await stack.add_member(OWNER_ID, owner.public_key, ["mission_owner"])
        mission_id = new_mission_id()
        if opts.require_approval:
            approve = approve_command(stack, mission_id, keys / f"{OWNER_ID}.pem")
        spec = audit_mission(
            stack.group,
            mission_id,
            [str(p) for p in paths],
            interpreter=interpreter,
            require_approval=opts.require_approval,
        )
        _header(console, stack, opts, paths)
        handle = await start_mission(stack.client, spec)
        url = stack.mission_url(mission_id)
        if url is not None and not opts.keep_running:
            url += "  (up while the demo runs; --keep-running keeps it up after)"
        _say(console, f"  mission      {mission_id}  {url or ''}".rstrip())
        view = ProgressView(console, live=console.is_terminal)
        result = await _follow(handle, view, stop, opts.poll_s, approve)
        group_store = stack.artifacts.for_group(stack.group)  # the operator reads it whole
        summary = summarize(result, group_store)
        if summary.sbom is not None:
            dest = opts.data_dir / f"sbom-{mission_id}.cdx.json"
            await asyncio.to_thread(group_store.get_to_file, summary.sbom, dest)
            summary.sbom_path = dest
        items = {i.work_item_id for i in result.items}
        summary.stats = log_stats(await _mission_events(stack, result), items)
        summary.chain_ok, summary.chain = await asyncio.to_thread(
            verify_chain, stack.files.authority_db, stack.group
        )
        print_summary(
            console,
            summary,
            mission_url=stack.mission_url(mission_id),
            ui_stays_up=opts.keep_running and not stop.is_set(),
        )
        if opts.keep_running and not stop.is_set():
            _say(
                console,
                f"\nThe stack stays up for the web UI ({stack.ui_url or 'headless'}); "
                "Ctrl-C stops it.",
            )
            await stop.wait()
        return summary
    finally:
        await stack.stop()


__all__ = [
    "DemoError",
    "DemoInterrupted",
    "DemoOptions",
    "LogReports",
    "approve_command",
    "check_data_dir",
    "resolve_target",
    "run_demo",
]
