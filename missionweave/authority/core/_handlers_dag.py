"""Handler of ``work.add_dependencies``: edges added to the WorkItem DAG while a Mission runs.

``work.authorize`` gives a new WorkItem its dependencies; a Mission that grows (MW-10.4-a) also
needs edges *into* a WorkItem it authorized earlier — an SBOM that must wait for every
per-distribution check discovered at run time. The edge is recorded here, so that the
Authority's own dependency check on offers (MW-10.4-b) and the log both know it.

Rules: the Coordinator only; the WorkItem is ``open`` (never offered yet, so no agent holds
work it now may not start); every dependency is a WorkItem of the same Mission; no self-loop
and no cycle (MW-10.4-c, checked by :class:`~missionweave.protocol.WorkGraph` over the Mission's
whole DAG, as the workflow checks it).

The dependency references are part of the WorkItem's versioned contract (MW-10.1-a): every
Command that adds an edge increments the contract's revision, and the Event names the new
revision with the whole dependency list, so each revision of the contract has exactly one
dependency list in the log (``work.authorized`` binds the first list to the first revision) and
an acceptance made against an earlier revision is refused ``stale_revision``.
"""

from __future__ import annotations

import json

from ...protocol import CommandType, EventType, GraphError, RejectionCode, WorkContract, WorkGraph
from ._command_scope import Ctx, Reject, need
from ._items import running_mission, set_item
from ._registry import command

#: Most dependencies one Command adds.
MAX_ADDED = 1_000


@command(CommandType.WORK_ADD_DEPENDENCIES)
def work_add_dependencies(ctx: Ctx) -> None:
    """Body: ``{"work_item_id": str, "dependencies": [str, ...]}``. Emits
    ``work.dependencies_added`` with the ids added, the WorkItem's whole dependency list and its
    contract ``revision`` — one more than before when an edge was added, unchanged when every
    id was already a dependency. Implements MW-10.4-a, MW-10.4-c and MW-10.1-a (the
    dependencies are bound to the contract's revision).

    Raises:
        Reject: ``role_not_allowed``, ``invalid_body``, ``unknown_id``, ``not_open``,
            ``self_loop``, ``cycle`` (nothing written)."""
    if "coordinator" not in ctx.roles:
        raise Reject(
            RejectionCode.ROLE_NOT_ALLOWED, "work.add_dependencies needs the coordinator role"
        )
    wid = need(ctx.body, "work_item_id")
    deps = ctx.body.get("dependencies")
    if (
        not isinstance(deps, list)
        or not deps
        or len(deps) > MAX_ADDED
        or not all(isinstance(d, str) for d in deps)
    ):
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"dependencies must be a list of 1 to {MAX_ADDED} ids",
            field="dependencies",
        )
    item = ctx.one("work_items.row", ctx.group_id, wid)
    if item is None:
        raise Reject(RejectionCode.UNKNOWN_ID, f"no WorkItem {wid!r}", work_item_id=wid)
    mid = item["mission_id"]
    running_mission(ctx, mid)
    if item["state"] != "open":
        raise Reject.wrong_state(
            RejectionCode.NOT_OPEN,
            f"WorkItem {wid!r}",
            item["state"],
            "edges only go into an open WorkItem",
            work_item_id=wid,
        )
    rows = ctx.all("work_items.admitted_dependencies", ctx.group_id, mid)
    graph = {r["work_item_id"]: list(json.loads(r["dependencies"])) for r in rows}
    dag = WorkGraph()
    dag.add({k: [d for d in v if d in graph] for k, v in graph.items()})
    try:  # the same checks as the workflow's: unknown ids, self-loops, cycles (MW-10.4-c)
        dag.add({}, edges=[(d, wid) for d in deps])
    except GraphError as exc:
        raise Reject(
            exc.rejection.code, exc.rejection.reason, mission_id=mid, **exc.rejection.detail
        ) from None
    current = graph[wid]
    added = [d for d in dict.fromkeys(deps) if d not in current]
    graph[wid] = [*current, *added]
    revision = int(item["revision"])
    if added:
        revision += 1  # a new dependency list is a new contract revision (MW-10.1-a)
        contract = WorkContract.model_validate_json(item["contract"])
        ctx.run("work_items.set_dependencies", json.dumps(graph[wid]), ctx.group_id, wid)
        set_item(
            ctx,
            item,
            contract=contract.model_copy(update={"revision": revision}).model_dump_json(),
        )
    ctx.emit(
        EventType.WORK_DEPENDENCIES_ADDED,
        {"mission_id": mid, "added": added, "dependencies": graph[wid], "revision": revision},
        work_item_id=wid,
    )
