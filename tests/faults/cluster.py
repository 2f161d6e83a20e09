"""A deployment under test: the parts (:mod:`tests.faults.parts`) with a proxy
(:mod:`tests.faults.proxy`) between every client part and each server, a Group, and the
Mission of ledger handlers (:mod:`tests.faults.handlers`).

``separate`` runs the docker-compose layout: Temporal dev server, Authority, coordinator and
agents, each its own process. ``dev`` runs ``missionweave dev up`` (Temporal as its child,
Authority and coordinator inside it) with the agents beside it.

The parts are processes of their own, but the steps that build the deployment are the embedded
stack's (:mod:`missionweave.dev`): the data directory's layout (``StackFiles``), key files, the
Temporal command line (``TemporalDevServer.command()``), the Group's bootstrap and members, and
waiting until a part answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from missionweave.authority.client import AuthorityClient
from missionweave.dev import (
    OWNER_ROLES,
    StackFiles,
    TemporalDevServer,
    authority_answers,
    connect_client,
    ensure_group,
    ensure_member,
    free_port,
    load_or_create_key,
    temporal_answers,
    wait_until,
)
from missionweave.protocol import Actor, Event, SigningKey
from missionweave.protocol.temporal_contract import (
    COORDINATOR_TASK_QUEUE,
    MISSION_WORKFLOW_TYPE,
    MissionSpec,
    mission_workflow_id,
)

from ..support.serving import authority_serve_command
from .handlers import LEDGER_ENV
from .parts import MW, Part
from .proxy import Proxy
from .surroundings import Layout, Surroundings

GROUP = "faults"
#: A member that runs no agent: the loads' reader and flooder (:mod:`tests.faults.loads`).
VISITOR = "visitor"


@dataclass(frozen=True)
class Config:
    """The size and timing of a trial's Mission.

    Attributes:
        items: WorkItems (independent of each other).
        workers: agents, each ``concurrency`` slots.
        before_ms: handler work before its effect; after_ms: after it, before submitting.
        lease_ms: the contract's lease (the activity's heartbeat timeout).
        bound_s: how long the Mission may take, faults included, before it counts as stuck.
    """

    items: int = 12
    workers: int = 2
    concurrency: int = 3
    before_ms: int = 400
    after_ms: int = 400
    lease_ms: int = 2_000
    heartbeat_ms: int = 500
    bound_s: float = 90.0


async def until(
    probe: Callable[[], Awaitable[Any]],
    what: str,
    timeout_s: float,
    gone: Callable[[], str | None] | None = None,
) -> Any:
    """:func:`missionweave.dev.wait_until` polling every 0.2 s (errors count as no).

    Raises:
        TimeoutError: not within ``timeout_s``.
        StackError: ``gone()`` named a reason (a part exited).
    """
    return await wait_until(probe, what, timeout_s, interval_s=0.2, gone=gone)


class Cluster:
    """Start, fault and stop one deployment under ``run_dir``."""

    def __init__(self, run_dir: Path, cfg: Config, layout: Layout) -> None:
        self.run_dir = run_dir
        self.cfg = cfg
        self.layout = layout
        self.ledger = run_dir / "ledger.txt"
        self.temporal_port = free_port()
        self.surroundings = Surroundings(run_dir, layout, self.files.authority_db)
        #: one port per ``authority serve`` replica (parts ``authority``, ``authority-2``)
        self.authority_ports = [free_port() for _ in range(self.surroundings.replicas)]
        self.authority_port = self.authority_ports[0]
        self.parts: dict[str, Part] = {}
        self.loads: dict[str, Part] = {}  # the incidents' load processes (they end by themselves)
        self.proxies: dict[str, Proxy] = {}  # "<client>→authority" / "<client>→temporal"
        self.client: Client | None = None
        self.handle: WorkflowHandle[Any, Any] | None = None
        self.mission_id = ""
        self.missions = 0
        self._seen: list[Event] = []  # the Group's log as far as queued_at read it

    # ----------------------------------------------------------------------- where

    @property
    def data_dir(self) -> Path:
        """Where the servers keep their state (``dev up``'s data dir in the dev layout)."""
        return self.run_dir / "stack" if self.layout == "dev" else self.run_dir

    @property
    def files(self) -> StackFiles:
        """The layout of :attr:`data_dir`: the Authority's database, every key, artifacts."""
        return StackFiles(self.data_dir)

    @property
    def authority_db(self) -> Path | str:
        """The Authority's database: its SQLite file, or its ``postgresql://`` URL."""
        return self.surroundings.db

    @property
    def authorities(self) -> list[str]:
        """The parts that run ``authority serve`` (two replicas over PostgreSQL)."""
        return ["authority", *(f"authority-{n}" for n in range(2, len(self.authority_ports) + 1))]

    @property
    def coordinator_key(self) -> Path:
        return self.files.key("coordinator")

    @property
    def workers(self) -> list[str]:
        return [f"worker-{i}" for i in range(1, self.cfg.workers + 1)]

    def _log(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    # ---------------------------------------------------------------------- start

    async def start(self) -> None:
        """Start every part, make the Group and its members, wait until the agents are
        present.

        Raises:
            TimeoutError: a part did not come up (its log names why).
        """
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.ledger.touch()
        if self.layout != "dev":
            await self._start_servers()
        else:
            await self._start_dev()
        clients = self.workers + (["coordinator"] if self.layout != "dev" else [])
        for i, c in enumerate(clients):  # the clients spread across the replicas
            for server, port in (
                ("authority", self.authority_ports[i % len(self.authority_ports)]),
                ("temporal", self.temporal_port),
            ):
                proxy = Proxy(f"{c}→{server}", port)
                await proxy.start()
                self.proxies[proxy.name] = proxy
        coordinator = Actor("coordinator", SigningKey.from_file(self.coordinator_key))
        async with AuthorityClient(self.authority_url(), signing_key=coordinator.key) as a:
            await ensure_group(a, coordinator, GROUP, OWNER_ROLES)
            for w in self.workers:
                key = load_or_create_key(self.files.key(w))
                await ensure_member(a, coordinator, GROUP, w, key.public_key, ["worker"])
            key = load_or_create_key(self.files.key(VISITOR))
            await ensure_member(a, coordinator, GROUP, VISITOR, key.public_key, ["worker"])
            if self.layout != "dev":
                self._start_coordinator()
            for w in self.workers:
                self._start_worker(w)

        await until(self._present, "Presence of every agent", 60)
        self.client = await connect_client(f"127.0.0.1:{self.temporal_port}", tracing=False)

    def _operator(self) -> AuthorityClient:
        key = SigningKey.from_file(self.coordinator_key)
        return AuthorityClient(self.authority_url(), signing_key=key)

    async def healthy(self, timeout_s: float = 60) -> None:
        """Wait until every part runs again (none frozen, every agent present): a trial
        leaves the deployment as it found it for the next one.

        Raises:
            TimeoutError: it did not recover within ``timeout_s``.
            RuntimeError: a part exited.
        """
        for part in self.parts.values():
            if not part.alive():
                raise RuntimeError(f"{part.name} exited: {part.tail(5)}")
            part.signal(signal.SIGCONT)
        for proxy in self.proxies.values():
            proxy.set_mode("pass")
        await until(self._temporal_answers, "answer from Temporal", timeout_s)
        await until(self._present, "Presence of every agent", timeout_s)

    async def _present(self) -> bool:
        """Whether every agent is present, each read on the replica it reports to (a
        replica knows the presence reported to it only)."""
        key = SigningKey.from_file(self.coordinator_key)
        seen: set[str] = set()
        for port in self.authority_ports:
            async with AuthorityClient(f"http://127.0.0.1:{port}", signing_key=key) as a:
                seen |= set(await a.presence(GROUP))
        return set(self.workers) <= seen

    async def events(self) -> list[Event]:
        """Every Event of the Group so far (read from the Authority as its operator)."""
        out: list[Event] = []
        async with self._operator() as a:
            while page := await a.events(GROUP, out[-1].seq if out else 0, 1000):
                out += page
        return out

    async def queued_at(self, agent: str) -> list[str]:
        """The current Mission's WorkItems ``agent`` accepted that wait in its queue (accepted,
        not started), read from the Authority's log as its operator (incrementally)."""
        async with self._operator() as a:
            while page := await a.events(GROUP, self._seen[-1].seq if self._seen else 0, 1000):
                self._seen += page
        queued: dict[str, bool] = {}
        for e in self._seen:
            if e.work_item_id in self.items:
                if e.type == "work.offer_accepted":
                    queued[e.work_item_id] = e.actor == agent
                elif e.type in ("work.started", "ownership.closed", "work.failed"):
                    queued[e.work_item_id] = False
        return sorted(w for w, q in queued.items() if q)

    def authority_url(self, client: str | None = None) -> str:
        """The Authority's URL, through ``client``'s proxy when given."""
        port = self.proxies[f"{client}→authority"].port if client else self.authority_port
        return f"http://127.0.0.1:{port}"

    def temporal_address(self, client: str | None = None) -> str:
        """Temporal's ``host:port``, through ``client``'s proxy when given."""
        port = self.proxies[f"{client}→temporal"].port if client else self.temporal_port
        return f"127.0.0.1:{port}"

    def _add(self, part: Part) -> Part:
        self.parts[part.name] = part
        part.start()
        return part

    async def _temporal_answers(self) -> bool:
        return await temporal_answers(self.temporal_address())

    def _gone(self, name: str) -> Callable[[], str | None]:
        """For :func:`until`: the reason part ``name`` is gone (it exited), else ``None``."""
        part = self.parts[name]
        return lambda: None if part.alive() else f"{name} exited: {part.tail()}"

    async def _start_servers(self) -> None:
        load_or_create_key(self.coordinator_key)
        # the command line `temporal server start-dev` of the embedded stack, as a Part
        temporal = TemporalDevServer(self.data_dir, port=self.temporal_port, ui=False)
        self._add(Part("temporal", temporal.command(), self._log("temporal")))
        self.surroundings.start()
        key = self.surroundings.key(self.files.authority_key)
        if key is not None:
            load_or_create_key(key)
        for name, port in zip(self.authorities, self.authority_ports, strict=True):
            serve = authority_serve_command(
                self.authority_db, port, key=key, operator_keys=[str(self.coordinator_key)]
            )
            self._add(Part(name, serve, self._log(name), env=self.surroundings.env()))
        await until(self._temporal_answers, "answer from Temporal", 60, self._gone("temporal"))
        for name, port in zip(self.authorities, self.authority_ports, strict=True):
            url = f"http://127.0.0.1:{port}"
            await until(
                lambda u=url: authority_answers(u),  # type: ignore[misc]
                f"answer from {name}",
                60,
                self._gone(name),
            )

    async def _start_dev(self) -> None:
        dev = self._add(
            Part(
                "dev",
                [
                    MW,
                    "dev",
                    "up",
                    "--data-dir",
                    str(self.data_dir),
                    "--headless",
                    "--group",
                    GROUP,
                    "--temporal-port",
                    str(self.temporal_port),
                    "--authority-port",
                    str(self.authority_port),
                    "--metrics-port",  # any free one: not 9465, which a `make dev` may hold
                    "0",
                ],
                self._log("dev"),
            )
        )

        async def up() -> bool:
            return "dev stack is up" in dev.log.read_text(errors="replace")

        await until(up, "`dev up` saying it is up", 90, self._gone("dev"))

    def _start_coordinator(self) -> None:
        self._add(
            Part(
                "coordinator",
                [
                    MW,
                    "coordinator",
                    "--key",
                    str(self.coordinator_key),
                    "--authority-url",
                    self.authority_url("coordinator"),
                    "--temporal-address",
                    self.temporal_address("coordinator"),
                    "--artifacts",
                    str(self.files.artifacts),
                    "--stop-timeout",
                    "5",
                    "--metrics-port",  # none: its default is one fixed port of the machine
                    "0",
                ],
                self._log("coordinator"),
            )
        )

    def _start_worker(self, name: str) -> None:
        card = self.files.keys / f"{name}.yaml"
        card.write_text(
            yaml.safe_dump(
                {
                    "agent_id": name,
                    "capabilities": ["fault.effect@1.0"],
                    "max_concurrency": self.cfg.concurrency,
                }
            )
        )
        self._add(
            Part(
                name,
                [
                    MW,
                    "worker",
                    "--card",
                    str(card),
                    "--key",
                    str(self.files.key(name)),
                    "--handlers",
                    "tests.faults.handlers",
                    "--group",
                    GROUP,
                    "--authority-url",
                    self.authority_url(name),
                    "--temporal-address",
                    self.temporal_address(name),
                    "--state-dir",
                    str(self.run_dir / "agents"),
                    "--stop-timeout",
                    "6",
                ],
                self._log(name),
                env={LEDGER_ENV: str(self.ledger)},
            )
        )

    # -------------------------------------------------------------------- mission

    @property
    def items(self) -> set[str]:
        """The WorkItem ids of the current Mission."""
        return {f"{self.mission_id}:{n:03d}" for n in range(1, self.cfg.items + 1)}

    def spec(self) -> MissionSpec:
        """``cfg.items`` independent WorkItems of ``fault.effect@1.0``."""
        c = self.cfg
        contract = {
            "objective": "perform one external effect",
            "deliverables": [{"name": "result"}],
            "acceptance_criteria": [
                {
                    "id": "done",
                    "description": "the effect is performed",
                    "evidence_required": "its ledger key",
                }
            ],
            "required_capabilities": ["fault.effect@1.0"],
            "timeouts": {
                "start_deadline_ms": 60_000,
                "lease_ms": c.lease_ms,
                "heartbeat_ms": c.heartbeat_ms,
            },
            "retry": {"max_attempts": 5, "initial_backoff_ms": 200},
        }
        items = [
            {
                "work_item_id": f"{self.mission_id}:{n:03d}",
                "contract": contract,
                "input": {"before_ms": c.before_ms, "after_ms": c.after_ms},
            }
            for n in range(1, c.items + 1)
        ]
        return MissionSpec.model_validate(
            {
                "group_id": GROUP,
                "mission_id": self.mission_id,
                "title": "fault suite",
                "items": items,
                "offer_policy": {"offer_ttl_ms": 3_000, "reoffer_backoff_ms": 300},
            }
        )

    async def start_mission(self) -> None:
        """Start the next Mission (``faults-<n>``: the Missions of one deployment are told
        apart by their WorkItem ids)."""
        assert self.client is not None
        self.missions += 1
        self.mission_id = f"faults-{self.missions}"
        self.handle = await self.client.start_workflow(
            MISSION_WORKFLOW_TYPE,
            args=[self.spec(), None],
            id=mission_workflow_id(self.mission_id),
            task_queue=COORDINATOR_TASK_QUEUE,
        )

    async def mission_status(self) -> str:
        """``running``, ``completed``, ``failed`` … (Temporal's workflow status, lower case)."""
        assert self.handle is not None
        desc = await self.handle.describe(rpc_timeout=timedelta(seconds=3))
        status = desc.status or WorkflowExecutionStatus.RUNNING
        return status.name.lower()

    async def wait_mission(self, timeout_s: float) -> str:
        """The Mission's final status, or ``stuck`` when still running after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                status = await asyncio.wait_for(self.mission_status(), 5)
                if status != "running":
                    return status
            await asyncio.sleep(0.3)
        return "stuck"

    def ledger_lines(self) -> list[list[str]]:
        """The current Mission's ledger lines, split (key, WorkItem, epoch, agent, pid)."""
        prefix = f"{self.mission_id}:".encode()
        return [
            ln.decode().split()
            for ln in self.ledger.read_bytes().splitlines()
            if ln.split(b" ")[1:2] and ln.split(b" ")[1].startswith(prefix)
        ]

    def effects(self) -> int:
        """The current Mission's effects so far."""
        return len(self.ledger_lines())

    # ----------------------------------------------------------------------- stop

    async def stop(self) -> None:
        """Ctrl-C every part, agents first and Temporal last; close the proxies."""
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in self.loads.values()))
        for names in (self.workers, ["coordinator"], ["dev", *self.authorities], ["temporal"]):
            parts = [self.parts[n] for n in names if n in self.parts]
            await asyncio.gather(*(asyncio.to_thread(p.stop) for p in parts))
        for proxy in self.proxies.values():
            await proxy.close()
        await asyncio.to_thread(self.surroundings.close)
