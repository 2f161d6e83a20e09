"""Running the ``execute_work_item`` activity for real in ``ActivityEnvironment`` against a
:class:`~tests.support.world.World`'s Authority served on loopback.

:func:`grant` offers, accepts and starts a WorkItem and returns the activity input the workflow
would build; :func:`run` executes it with one handler of ``dist.verify@1.0`` (input
:class:`VerifyInput`) and returns the activity's outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from temporalio.testing import ActivityEnvironment

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput, LeaseGrant
from missionweave.worker import HandlerRegistry, WorkContext
from missionweave.worker._execute import WorkItemExecutor

from .contracts import contract
from .world import World


class VerifyInput(BaseModel):
    """The input :func:`grant` hands the handler."""

    files: list[str]


Handler = Callable[[WorkContext, VerifyInput], Awaitable[Any]]


def grant(w: World, wid: str, worker: Actor, **over: Any) -> ExecuteWorkItemInput:
    """Offer, accept and start ``wid`` (authorized first on ``contract(**over)`` if it is not
    yet) for ``worker``; the activity input the workflow builds."""
    if w.authority.work_item(w.group, wid) is None:
        w.authorize(wid, **over)
    assert w.accept(worker, wid, w.offer(wid, worker)).accepted
    start = {"work_item_id": wid, "ownership_epoch": w.item(wid)["ownership_epoch"]}
    r = w.ok(worker, "work.start", start)
    lease = {k: v for k, v in r.reply["lease"].items() if k != "renewals"}
    w.leases[wid] = r.reply["lease"]
    return ExecuteWorkItemInput(
        group_id=w.group,
        mission_id=w.mission,
        work_item_id=wid,
        contract=contract(**over),
        input={"files": ["a.tar", "b.tar"]},
        lease=LeaseGrant(**lease, capability_token=r.reply["capability_token"]),
        checkpoint=r.reply.get("checkpoint"),
    )


def registry_of(fn: Handler) -> HandlerRegistry:
    """``fn`` as the handler of ``dist.verify@1.0``."""
    registry = HandlerRegistry()
    registry.handler("dist.verify", version="1.0")(fn)
    return registry


async def run(
    client: AuthorityClient,
    actor: Actor,
    work: ExecuteWorkItemInput,
    fn: Handler,
    beats: list[Any] | None = None,
) -> Any:
    """Execute ``work`` as ``actor`` with handler ``fn``; the activity's outcome. ``beats``
    collects the heartbeat details it sends."""
    env = ActivityEnvironment()
    if beats is not None:
        env.on_heartbeat = lambda *details: beats.append(details[0])
    executor = WorkItemExecutor(actor, client, registry_of(fn))
    return await env.run(executor.execute_work_item, work)
