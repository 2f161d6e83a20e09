"""A small Group on a real Authority (SQLite file, or PostgreSQL under the ``postgres`` backend
of ``tests/support/pg.py``) with a controllable clock, for tests.

``World`` creates a Group whose owner is also coordinator and mission owner, adds workers and a
reviewer, opens the workers' sessions and offers helpers that walk a WorkItem through its life.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from missionweave.authority import Authority, AuthorityConfig, SubmitResult
from missionweave.authority.core import record_upload
from missionweave.protocol import Actor, SigningKey

from .contracts import contract
from .pg import db_for

T0 = 1_800_000_000_000
#: The fields of a lease that bind a Command to it (besides the WorkItem's id).
LEASE_BINDING = ("lease_id", "ownership_epoch")


@dataclass
class Clock:
    """Epoch-millisecond clock that only moves when told."""

    now: int = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def evidence(
    producer: str,
    subject: str,
    criteria: tuple[str, ...] = ("hashes", "schema"),
    result: str = "pass",
) -> list[dict[str, Any]]:
    return [
        {
            "subject": subject,
            "criterion": c,
            "method": "test",
            "result": result,
            "producer": producer,
            "timestamp_ms": T0,
        }
        for c in criteria
    ]


def basis(caps: list[str], *, rank: int = 1) -> dict[str, Any]:
    """A complete selection basis (MW-10.3-f) for an agent matching ``caps`` exactly."""
    return {
        "capability_matches": list(caps),
        "authorization_eligible": True,
        "availability_estimate_ms": 0,
        "expected_cost_minor_units": 0,
        "reliability": {f"{c}:{k}": 0 for c in caps for k in ("ok", "fail")},
        "policy_rules": ["test-world"],
        "rank": rank,
    }


@dataclass
class World:
    authority: Authority
    clock: Clock
    group: str
    coordinator: Actor
    workers: list[Actor]
    reviewer: Actor
    mission: str = "m1"
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    _reports: int = 0  # report Artifacts published so far (each a distinct hash)
    #: the Authority's database: its SQLite path or PostgreSQL URL (``tests.support.pg.db_for``)
    db: str | Path = ""

    def submit(
        self, actor: Actor, type: str, body: dict[str, Any] | None = None, **kw: Any
    ) -> SubmitResult:
        cmd = actor.command(type, self.group, body, issued_at_ms=self.clock.now, **kw)
        return self.authority.submit(cmd)

    def ok(self, actor: Actor, type: str, body: dict[str, Any] | None = None) -> SubmitResult:
        r = self.submit(actor, type, body)
        assert r.status == "accepted", r.rejection
        return r

    def judged(
        self, code: str | None, actor: Actor, type: str, body: dict[str, Any] | None = None
    ) -> SubmitResult:
        """Submit; the Command is accepted when ``code`` is ``None``, else refused with
        ``code`` and nothing written (the Group's head unchanged). The result."""
        head = self.authority.head(self.group)
        r = self.submit(actor, type, body)
        if code is None:
            assert r.accepted, r.rejection
        else:
            assert r.rejection is not None and r.rejection.code == code, r.rejection
            assert self.authority.head(self.group) == head
        return r

    def authorization(
        self, wid: str, deps: list[str] | None = None, *, mission: str | None = None, **over: Any
    ) -> dict[str, Any]:
        """A ``work.authorize`` body: ``wid`` in ``mission`` (default: the current one) on
        :func:`~tests.support.contracts.contract` ``(**over)``, depending on ``deps``."""
        return {
            "work_item_id": wid,
            "mission_id": mission or self.mission,
            "contract": contract(**over).wire(),
            "dependencies": deps or [],
        }

    def authorize(self, wid: str, deps: list[str] | None = None, **over: Any) -> SubmitResult:
        return self.ok(self.coordinator, "work.authorize", self.authorization(wid, deps, **over))

    def offer_body(
        self, wid: str, *agent_ids: str, expires_in_ms: int = 5_000, **fields: Any
    ) -> dict[str, Any]:
        """A ``work.offer`` body: ``wid`` to ``agent_ids``, expiring ``expires_in_ms`` from now,
        a complete selection basis each (:func:`basis`, for the WorkItem's required
        capabilities); ``fields`` add or replace fields (a revised ``contract``, a
        ``selection_basis`` …)."""
        row = self.authority.work_item(self.group, wid)
        caps = json.loads(row["contract"])["required_capabilities"] if row else ["dist.verify@1.0"]
        return {
            "work_item_id": wid,
            "candidates": list(agent_ids),
            "expires_at_ms": self.clock.now + expires_in_ms,
            "selection_basis": {a: basis(caps) for a in agent_ids},
            **fields,
        }

    def offer(self, wid: str, *candidates: Actor, expires_in_ms: int = 30_000) -> str:
        ids = [c.agent_id for c in candidates]
        body = self.offer_body(wid, *ids, expires_in_ms=expires_in_ms)
        return str(self.ok(self.coordinator, "work.offer", body).reply["offer_id"])

    def item(self, wid: str) -> dict[str, Any]:
        """The WorkItem ``wid`` as the Authority holds it (it must exist)."""
        item = self.authority.work_item(self.group, wid)
        assert item is not None, f"no WorkItem {wid}"
        return item

    def accept(self, worker: Actor, wid: str, offer_id: str) -> SubmitResult:
        body = {"work_item_id": wid, "offer_id": offer_id, "revision": self.item(wid)["revision"]}
        return self.submit(worker, "work.accept_offer", body)

    def start(self, worker: Actor, wid: str) -> dict[str, Any]:
        epoch = self.item(wid)["ownership_epoch"]
        r = self.ok(worker, "work.start", {"work_item_id": wid, "ownership_epoch": epoch})
        lease: dict[str, Any] = r.reply["lease"]
        self.leases[wid] = lease
        return lease

    def lease(self, wid: str, worker: Actor) -> dict[str, Any]:
        """Offer ``wid`` to ``worker``, who accepts and starts it: the execution lease."""
        assert self.accept(worker, wid, self.offer(wid, worker)).accepted
        return self.start(worker, wid)

    def leased(self, wid: str, **body: Any) -> dict[str, Any]:
        """``body`` bound to ``wid``'s current lease (its id and ownership epoch)."""
        lease = self.leases[wid]
        return {"work_item_id": wid, **{k: lease[k] for k in LEASE_BINDING}, **body}

    def uploaded(self, wid: str, *hashes: str) -> None:
        """Record ``hashes`` as uploaded under ``wid``'s current lease's write grant — what the
        Authority's blob route (or an S3 confirmation) records once the bytes hashed right:
        the proof of possession ``artifact.publish`` asks for (MW-13.3-d). For tests of
        Commands with no artifact store; the served tests upload for real."""
        lease = self.authority.lease(str(self.leases[wid]["lease_id"]))
        assert lease is not None, f"no lease of {wid}"
        for h in hashes:
            record_upload(self.authority, lease, h)

    def report(self, wid: str, worker: Actor, result: str = "pass") -> dict[str, Any]:
        """Publish a report Artifact of ``wid`` under its current lease (``artifact.publish``,
        a manifest signed by ``worker``); the submission's fields that name it: ``outputs``
        (the deliverable ``report``: its hash), ``artifacts`` and Evidence with ``result``
        for every acceptance criterion of the contract, each citing it."""
        from .artifact_servers import signed  # it imports this module

        row = self.item(wid)
        self._reports += 1
        h = hashlib.sha256(f"{self.group}/{wid}/{self._reports}".encode()).hexdigest()
        m = signed(worker, h, group_id=self.group, mission_id=row["mission_id"], work_item_id=wid)
        self.uploaded(wid, h)
        self.ok(worker, "artifact.publish", self.leased(wid, manifest=m.wire()))
        criteria = tuple(c["id"] for c in json.loads(row["contract"])["acceptance_criteria"])
        ev = evidence(worker.agent_id, wid, criteria, result)
        return {
            "outputs": {"report": h},
            "artifacts": [h],
            "evidence": [{**e, "artifacts": [h]} for e in ev],
        }

    def run_to_verified(self, wid: str, worker: Actor) -> None:
        self.lease(wid, worker)
        self.ok(worker, "work.submit", self.leased(wid, **self.report(wid, worker)))
        self.ok(self.coordinator, "work.accept_result", {"work_item_id": wid})


def _create_group(auth: Authority, coord: Actor, group: str, clock: Clock) -> None:
    """``group.create`` of ``group`` by ``coord``: its owner, coordinator and mission owner."""
    roles = ["owner", "coordinator", "mission_owner"]
    r = auth.submit(
        coord.command(
            "group.create",
            group,
            {"public_key": coord.public_key, "roles": roles},
            issued_at_ms=clock.now,
        )
    )
    assert r.accepted, r.rejection
    coord.membership_epochs[group] = 1


def another_group(
    w: World, group: str = "g2", *, worker: Actor | None = None, mission: str | None = "m2"
) -> World:
    """Group ``group`` on ``w``'s Authority, created by ``w.coordinator`` like ``w``'s, with
    ``worker`` (``w``'s first) a worker in it and the Mission ``mission`` (``None``: none).

    Returns:
        A World of that Group: ``w``'s Authority, clock and actors, no leases.
    """
    _create_group(w.authority, w.coordinator, group, w.clock)
    other = replace(w, group=group, mission=mission or w.mission, leases={})
    member = worker or w.workers[0]
    body = {"agent_id": member.agent_id, "public_key": member.public_key, "roles": ["worker"]}
    other.ok(w.coordinator, "member.add", body)
    member.membership_epochs[group] = 1
    if mission is not None:
        other.ok(w.coordinator, "mission.create", {"mission_id": mission, "title": "another"})
    return other


def make_world(
    path: Path, n_workers: int = 2, config: AuthorityConfig | None = None, clock: Any = None
) -> World:
    """A fresh Authority at ``path`` with one Group, a Mission ``m1`` and open worker sessions;
    on ``clock`` (a :class:`Clock` by default; anything callable with ``now`` and
    ``advance``, e.g. ``tests.authority.test_service_time.SteppedClock``)."""
    clock = clock if clock is not None else Clock()
    coord = Actor.generate("coordinator")
    # the coordinator is the Authority's operator (it may create Groups and read them all)
    config = replace(config or AuthorityConfig(), operator_keys=frozenset({coord.public_key}))
    db = db_for(path)
    auth = Authority(db, SigningKey.generate(), config, clock=clock)
    group = "g1"
    _create_group(auth, coord, group, clock)
    workers = [Actor.generate(f"worker-{i}") for i in range(n_workers)]
    reviewer = Actor.generate("reviewer")
    w = World(auth, clock, group, coord, workers, reviewer, db=db)
    for a, roles in [*[(x, ["worker"]) for x in workers], (reviewer, ["reviewer"])]:
        w.ok(
            coord,
            "member.add",
            {"agent_id": a.agent_id, "public_key": a.public_key, "roles": roles},
        )
        a.membership_epochs[group] = 1
    for a in workers:
        r = auth.submit(a.command("session.open", None, {}, issued_at_ms=clock.now))
        assert r.accepted, r.rejection
        a.session_epoch = r.reply["session_epoch"]
    w.ok(coord, "mission.create", {"mission_id": "m1", "title": "test mission"})
    return w


def make_leased_world(path: Path, **over: Any) -> World:
    """:func:`make_world` with WorkItem ``a`` (its contract: ``contract(**over)``) leased to
    ``worker-0``."""
    w = make_world(path)
    w.authorize("a", **over)
    w.lease("a", w.workers[0])
    return w
