"""A walk through the Group Authority over real HTTP, as cooperating agents use it.

Run: ``python examples/authority_walkthrough.py [--data-dir DIR]`` (or ``make demo``).

It starts ``missionweave authority serve`` as a separate process on a free loopback port, then
plays a coordinator and three workers, each with its own Ed25519 key, through the life of a small
Mission: an offer declined with a structured reason, an urgent candidate-set offer that two
workers accept at the same moment (exactly one wins), leases with renewals and progress, a
checkpoint and resume, a stale lease id refused, a frozen worker whose lease expires and whose
late result is only recorded for audit, submissions with Evidence, and review. It ends by
verifying the whole log offline with ``missionweave events verify``. Exit status 0 on success.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from missionweave.authority import SubmitResult
from missionweave.authority.client import AuthorityClient
from missionweave.dev import free_port
from missionweave.protocol import Actor, WorkContract
from missionweave.protocol.temporal_contract import LeaseGrant

console = Console()
GROUP = "walkthrough"
EXE = str(Path(sys.executable).with_name("missionweave"))


def contract(objective: str, *, urgent: bool = False, lease_ms: int = 10_000) -> dict[str, Any]:
    return WorkContract.model_validate(
        {
            "objective": objective,
            "deliverables": [{"name": "report", "media_type": "application/json"}],
            "acceptance_criteria": [
                {
                    "id": "done",
                    "description": "the objective is met",
                    "evidence_required": "a check that passes",
                }
            ],
            "required_capabilities": ["demo.step@1.0"],
            "urgency": "urgent" if urgent else "normal",
            "budget": {"tool_calls": 50, "wall_clock_ms": 60_000},
            "timeouts": {"start_deadline_ms": 30_000, "lease_ms": lease_ms, "heartbeat_ms": 500},
        }
    ).wire()


def evidence(agent: Actor, wid: str, result: str = "pass") -> list[dict[str, Any]]:
    return [
        {
            "subject": wid,
            "criterion": "done",
            "method": "walkthrough check",
            "result": result,
            "producer": agent.agent_id,
            "timestamp_ms": time.time_ns() // 1_000_000,
        }
    ]


def submission(agent: Actor, wid: str) -> dict[str, Any]:
    """A ``work.submit``'s content: the deliverable ``report`` (inline) and its Evidence."""
    return {"outputs": {"report": {"item": wid, "ok": True}}, "evidence": evidence(agent, wid)}


class Walk:
    def __init__(self, client: AuthorityClient, coordinator: Actor) -> None:
        self.client = client
        self.coord = coordinator  # the Authority's operator: it may create the Group
        self.workers = [Actor.generate(n) for n in ("ada", "brook", "cyd")]
        self.leases: dict[str, LeaseGrant] = {}

    async def send(
        self, actor: Actor, type: str, body: dict[str, Any], expect: str = "accepted"
    ) -> SubmitResult:
        r = await self.client.submit(actor.command(type, GROUP, body))
        mark = {"accepted": "[green]✓[/]", "rejected": "[red]✗[/]", "recorded": "[yellow]≡[/]"}
        why = f" — {r.rejection.code}" if r.rejection else ""
        if r.status != "accepted" and r.status == expect:
            why += " (as it should be)"
        console.print(f"  {mark[r.status]} {actor.agent_id:<11} {type:<20}{why}")
        if r.status != expect:
            raise SystemExit(f"expected {expect} for {type}, got {r.status}{why}")
        return r

    async def setup(self) -> None:
        console.rule("Group, members, sessions, Mission")
        c = self.coord
        await self.send(
            c,
            "group.create",
            {"public_key": c.public_key, "roles": ["coordinator", "mission_owner"]},
        )
        c.membership_epochs[GROUP] = 1
        for w in self.workers:
            await self.send(
                c,
                "member.add",
                {"agent_id": w.agent_id, "public_key": w.public_key, "roles": ["worker"]},
            )
            w.membership_epochs[GROUP] = 1
            r = await self.client.submit(w.command("session.open", None, {}))
            w.session_epoch = int(r.reply["session_epoch"])
        await self.send(c, "mission.create", {"mission_id": "m1", "title": "walkthrough"})
        for wid, deps, urgent, lease_ms in (
            ("fetch", [], False, 10_000),
            ("hash", ["fetch"], True, 1_500),
            ("report", ["hash"], False, 10_000),
        ):
            await self.send(
                c,
                "work.authorize",
                {
                    "work_item_id": wid,
                    "mission_id": "m1",
                    "dependencies": deps,
                    "contract": contract(f"step {wid}", urgent=urgent, lease_ms=lease_ms),
                },
            )

    async def offer(self, wid: str, *agents: Actor) -> str:
        r = await self.send(
            self.coord,
            "work.offer",
            {
                "work_item_id": wid,
                "candidates": [a.agent_id for a in agents],
                "expires_at_ms": time.time_ns() // 1_000_000 + 20_000,
                # every fact of MW-10.3-f, stated: the Authority refuses an incomplete basis
                "selection_basis": {
                    a.agent_id: {
                        "capability_matches": ["demo.step@1.0"],
                        "authorization_eligible": True,
                        "availability_estimate_ms": 0,
                        "expected_cost_minor_units": 0,
                        "reliability": {"demo.step@1.0:ok": 0, "demo.step@1.0:fail": 0},
                        "policy_rules": ["walkthrough-order"],
                        "rank": i + 1,
                    }
                    for i, a in enumerate(agents)
                },
            },
        )
        return str(r.reply["offer_id"])

    def leased(self, wid: str, **body: Any) -> dict[str, Any]:
        return self.leases[wid].fenced(**body)

    async def start(self, w: Actor, wid: str, epoch: int) -> None:
        r = await self.send(w, "work.start", {"work_item_id": wid, "ownership_epoch": epoch})
        self.leases[wid] = LeaseGrant.model_validate(r.reply["lease"])

    async def run(self) -> None:
        a, b, c = self.workers
        await self.setup()
        console.rule("Sequential offer, a structured decline, then acceptance")
        off = await self.offer("fetch", a)
        await self.send(
            a,
            "work.decline_offer",
            {"work_item_id": "fetch", "offer_id": off, "reason": "capacity"},
        )
        off = await self.offer("fetch", b)
        await self.send(
            b, "work.accept_offer", {"work_item_id": "fetch", "offer_id": off, "revision": 1}
        )
        await self.start(b, "fetch", 1)
        await self.send(
            b,
            "progress.report",
            self.leased(
                "fetch",
                report={
                    "phase": "downloading",
                    "milestones_completed": ["resolved"],
                    "next_checkpoint": "half",
                    "estimate_remaining_ms": 1000,
                },
            ),
        )
        await self.send(b, "work.checkpoint", self.leased("fetch", checkpoint={"ref": "half"}))
        stale = self.leased("fetch")
        await self.start(b, "fetch", 1)  # resume: same epoch, new lease id
        await self.send(b, "lease.renew", stale, expect="rejected")
        await self.send(b, "work.submit", self.leased("fetch", **submission(b, "fetch")))
        await self.send(self.coord, "work.accept_result", {"work_item_id": "fetch"})

        console.rule("Urgent: one offer to a candidate set, two accept at once")
        off = await self.offer("hash", a, c)
        race = await asyncio.gather(
            *(
                self.client.submit(
                    w.command(
                        "work.accept_offer",
                        GROUP,
                        {"work_item_id": "hash", "offer_id": off, "revision": 1},
                    )
                )
                for w in (a, c)
            )
        )
        winner, loser = (a, c) if race[0].accepted else (c, a)
        console.print(
            f"  [green]✓[/] {winner.agent_id} won ownership epoch "
            f"{race[0 if winner is a else 1].events[0].body['ownership_epoch']}; "
            f"{loser.agent_id}: {race[1 if winner is a else 0].rejection}"
        )
        assert sorted(r.status for r in race) == ["accepted", "rejected"]
        await self.start(winner, "hash", 1)
        frozen = self.leased("hash")
        console.print(f"  … {winner.agent_id} freezes; its 1.5 s lease runs out")
        # The coordinator keeps reading the log meanwhile: an Authority that hears from
        # nobody credits the silence to live leases as its own outage (MW-11.5-c), so a frozen
        # owner is told apart only while the rest of the Group is heard.
        for _ in range(9):
            await asyncio.sleep(0.2)
            await self.client.head(GROUP)
        off = await self.offer("hash", loser)  # closes the expired owner first
        await self.send(
            loser, "work.accept_offer", {"work_item_id": "hash", "offer_id": off, "revision": 1}
        )
        await self.start(loser, "hash", 2)
        await self.send(
            winner,
            "work.submit",
            {**frozen, **submission(winner, "hash")},
            expect="recorded",
        )
        await self.send(loser, "work.submit", self.leased("hash", **submission(loser, "hash")))
        await self.send(self.coord, "work.accept_result", {"work_item_id": "hash"})

        console.rule("Last step and the Mission's end")
        off = await self.offer("report", c)
        await self.send(
            c, "work.accept_offer", {"work_item_id": "report", "offer_id": off, "revision": 1}
        )
        await self.start(c, "report", 1)
        await self.send(c, "work.submit", self.leased("report", **submission(c, "report")))
        await self.send(self.coord, "work.accept_result", {"work_item_id": "report"})
        await self.send(self.coord, "mission.complete", {"mission_id": "m1"})


async def walk_and_summarize(url: str, coordinator: Actor) -> None:
    # reads are signed: the coordinator, a member of the Group, reads its log
    async with AuthorityClient(url, signing_key=coordinator.key) as client:
        await Walk(client, coordinator).run()
        events = await client.events(GROUP, limit=10_000)
    table = Table(title=f"{len(events)} Events in group {GROUP!r}")
    table.add_column("type")
    table.add_column("count", justify="right")
    counts: dict[str, int] = {}
    for e in events:
        counts[e.type] = counts.get(e.type, 0) + 1
    for t, n in sorted(counts.items()):
        table.add_row(t, str(n))
    console.print(table)


def run(data_dir: Path) -> int:
    """Start the Authority process, walk, stop it, verify the log offline; the exit status."""
    db = data_dir / "authority.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    coordinator = Actor.generate("coordinator")
    server = subprocess.Popen(
        [
            EXE,
            "authority",
            "serve",
            "--db",
            str(db),
            "--port",
            str(port),
            "--operator-key",
            coordinator.public_key,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                console.print("[red]the Authority did not start[/]")
                return 1
            time.sleep(0.1)
        console.print(f"Authority at {url}, database {db}")
        asyncio.run(walk_and_summarize(url, coordinator))
    finally:
        server.terminate()
        server.wait(timeout=15)
    console.rule("Offline verification")
    return subprocess.run([EXE, "events", "verify", "--db", str(db)], check=False).returncode


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where to keep the database (default: a new temporary directory)",
    )
    args = p.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="missionweave-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    sys.exit(run(data_dir))


if __name__ == "__main__":
    main()
