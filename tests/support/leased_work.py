"""One WorkItem run through the real executor against a served Authority, to publish or
fetch an Artifact with ``ctx.publish`` / ``ctx.fetch`` (MW-13.3-d tests)."""

from __future__ import annotations

from dataclasses import replace

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor
from missionweave.worker import Submission, WorkContext

from .executor_harness import VerifyInput, grant, run
from .world import World


def client(url: str, actor: Actor, w: World) -> AuthorityClient:
    """An Authority client signing as ``actor`` on ``w``'s clock."""
    return AuthorityClient(url, signing_key=actor.key, clock=w.clock)


def done(ctx: WorkContext, *hashes: str) -> Submission:
    """A submission of the test contract citing ``hashes``."""
    return Submission(
        outputs={"report": {"artifacts": len(hashes)}},  # the contract's deliverable, inline
        evidence=[ctx.evidence(c, method="test", artifacts=hashes) for c in ("hashes", "schema")],
    )


async def publish(url: str, w: World, wid: str, worker: Actor, data: bytes) -> str:
    """``worker`` runs ``wid`` of ``w``'s Group and publishes ``data`` with ``ctx.publish``."""
    published: list[str] = []

    async def handler(ctx: WorkContext, _: VerifyInput) -> Submission:
        ref = await ctx.publish(data, "text/plain", classification="confidential")
        published.append(ref.hash)
        return done(ctx, ref.hash)

    async with client(url, worker, w) as c:
        outcome = await run(c, worker, grant(w, wid, worker), handler)
    assert outcome.kind == "submitted", outcome
    return published[0]


async def fetch(url: str, w: World, wid: str, worker: Actor, h: str) -> bytes | Exception:
    """``worker`` runs ``wid`` of ``w``'s Group and tries ``ctx.fetch(h)``: what it got."""
    got: list[bytes | Exception] = []

    async def handler(ctx: WorkContext, _: VerifyInput) -> Submission:
        try:
            got.append(await ctx.fetch(h))
        except Exception as exc:
            got.append(exc)
        return done(ctx)

    async with client(url, worker, w) as c:
        await run(c, worker, grant(w, wid, worker), handler)
    return got[0]


def other_group(w: World) -> World:
    """Group ``g2`` (the operator creates it) with one worker, the stranger, and Mission m2."""
    stranger = Actor.generate("stranger")
    coord = w.coordinator
    roles = ["owner", "coordinator", "mission_owner"]
    body = {"public_key": coord.public_key, "roles": roles}
    r = w.authority.submit(coord.command("group.create", "g2", body, issued_at_ms=w.clock.now))
    assert r.accepted, r.rejection
    coord.membership_epochs["g2"] = 1
    g2 = replace(w, group="g2", workers=[stranger], mission="m2", leases={})
    g2.ok(coord, "member.add", {"agent_id": "stranger", "public_key": stranger.public_key,
                                "roles": ["worker"]})  # fmt: skip
    stranger.membership_epochs["g2"] = 1
    r = w.authority.submit(stranger.command("session.open", None, {}, issued_at_ms=w.clock.now))
    assert r.accepted, r.rejection
    stranger.session_epoch = r.reply["session_epoch"]
    g2.ok(coord, "mission.create", {"mission_id": "m2", "title": "another Group's"})
    return g2
