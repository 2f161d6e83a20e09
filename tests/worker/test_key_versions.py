"""MW-16-f across Groups and upgrades: the idempotency key version is fixed when an ownership
epoch begins (``work.offer_accepted``'s ``key_version``, folded by the one reducer), so every
execution of the epoch — the first, a retry, a resume — derives the same keys; ``mwk2_`` keys
fold in the Group. A real Authority on loopback, the activity in ``ActivityEnvironment``."""

from __future__ import annotations

from typing import Any

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor, reduce_events
from missionweave.protocol.temporal_contract import (
    ExecuteWorkItemInput,
    LeaseGrant,
    OutcomeKind,
)
from missionweave.worker import Submission, WorkContext
from tests.support.contracts import contract
from tests.support.executor_harness import VerifyInput, run
from tests.support.world import World, another_group

REPORT = {"report": {"files": 1}}


def _begin(w: World, worker: Actor, wid: str, key_version: int | None) -> None:
    """Authorize, offer and accept ``wid``: the acceptance names ``key_version`` as the agent
    sends it (``None``: as agents did before mwk2_ keys, naming none)."""
    w.authorize(wid)
    offer_id = w.offer(wid, worker)
    body: dict[str, Any] = {"work_item_id": wid, "offer_id": offer_id, "revision": 1}
    if key_version is not None:
        body["key_version"] = key_version
    w.ok(worker, "work.accept_offer", body)


def _execution(w: World, worker: Actor, wid: str) -> ExecuteWorkItemInput:
    """Start ``wid`` under its current epoch: the input the Mission workflow builds for a resume,
    its epoch and key version folded from the log (the one reducer)."""
    facts = reduce_events(w.authority.all_events(w.group))[wid]
    r = w.ok(worker, "work.start", {"work_item_id": wid, "ownership_epoch": facts.ownership_epoch})
    lease = {k: v for k, v in r.reply["lease"].items() if k != "renewals"}
    return ExecuteWorkItemInput(
        group_id=w.group,
        mission_id=w.mission,
        work_item_id=wid,
        contract=contract(),
        input={"files": ["a.tar"]},
        ownership_epoch=facts.ownership_epoch,
        key_version=facts.key_version,
        lease=LeaseGrant(**lease, capability_token=r.reply["capability_token"]),
        checkpoint=r.reply.get("checkpoint"),
    )


async def _keys_of_two_executions(
    w: World, client: AuthorityClient, worker: Actor, wid: str
) -> list[str]:
    """Run ``wid`` twice under one epoch — paused at a checkpoint, then resumed — and return
    the key of operation ``charge`` each execution derived."""
    keys: list[str] = []

    async def charge(ctx: WorkContext, inp: VerifyInput) -> Any:
        keys.append(ctx.idempotency_key("charge"))
        if len(keys) == 1:
            return ctx.pause({"charged": True})
        return Submission(
            outputs=REPORT,
            evidence=[ctx.evidence("hashes", method="m"), ctx.evidence("schema", method="m")],
        )

    first = await run(client, worker, _execution(w, worker, wid), charge)
    assert first.kind is OutcomeKind.PAUSED, first
    second = await run(client, worker, _execution(w, worker, wid), charge)
    assert second.kind is OutcomeKind.SUBMITTED, second
    return keys


async def test_an_epoch_begun_under_mwk1_keeps_mwk1_on_every_retry__MW_16_f(
    world: World, client: AuthorityClient
) -> None:
    """An acceptance that names no key version — made before the upgrade — leaves its epoch on
    mwk1_: the resumed execution derives the first one's key, so no external effect repeats."""
    worker = world.workers[0]
    _begin(world, worker, "a", None)
    (accepted,) = [e for e in world.authority.all_events(world.group)
                   if e.type == "work.offer_accepted"]  # fmt: skip
    assert "key_version" not in accepted.body
    k1, k2 = await _keys_of_two_executions(world, client, worker, "a")
    assert k1 == k2 and k1.startswith("mwk1_")


async def test_an_epoch_begun_under_mwk2_keeps_it_and_the_groups_differ__MW_16_f(
    world: World, client: AuthorityClient
) -> None:
    """Two Groups with the same Mission and WorkItem ids, each epoch begun under mwk2_: each
    keeps its key across the resume, and the two Groups' keys differ."""
    worker = world.workers[0]
    other = another_group(world, "g2", mission=world.mission)  # Mission m1 in g2 too
    keys = []
    for w in (world, other):
        _begin(w, worker, "a", 2)
        accepted = [e for e in w.authority.all_events(w.group) if e.type == "work.offer_accepted"]
        assert accepted[-1].body["key_version"] == 2
        k1, k2 = await _keys_of_two_executions(w, client, worker, "a")
        assert k1 == k2 and k1.startswith("mwk2_")
        keys.append(k1)
    assert keys[0] != keys[1]


def test_an_unknown_key_version_is_refused_and_writes_nothing__MW_16_f(world: World) -> None:
    worker = world.workers[0]
    world.authorize("a")
    offer_id = world.offer("a", worker)
    before = len(world.authority.all_events(world.group))
    for bad in (3, 0, "2", True):
        body = {"work_item_id": "a", "offer_id": offer_id, "revision": 1, "key_version": bad}
        world.judged("invalid_body", worker, "work.accept_offer", body)
    assert len(world.authority.all_events(world.group)) == before
