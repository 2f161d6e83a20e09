"""Handlers for the Commands that end an execution or publish what it made (spec 11.4, 11.5,
13.1, 13.2): ``work.submit``, ``work.fail`` and ``artifact.publish``.

Each is fenced like every lease Command (:func:`._fence.fence`, MW-11.3-c). A
submission or failure from a former owner is recorded as an audit Event that changes no state,
once its content passed the same check as the owner's (MW-11.5-b).
"""

from __future__ import annotations

from collections.abc import Callable

from ...protocol import (
    CommandType,
    EventType,
    RejectionCode,
    Role,
    SignedManifest,
    digest,
    verify_manifest,
)
from ._command_scope import Ctx, Reject
from ._fence import fence
from ._handlers_context import refuse_other_missions
from ._handlers_lease import charge_usage
from ._items import contract_of, end_leases, gate, load_item, parse, withdraw_offers
from ._possession import refuse_unproven_content
from ._registry import command
from ._retries import retry_fields
from ._store import Row
from ._submission import checked_failure, checked_submission


def _fenced_or_late(ctx: Ctx, item: Row, check: Callable[[], object] | None = None) -> bool:
    """:func:`fence` the Command: ``True`` if it holds the current lease; ``False`` if it was a
    former owner's late result, now recorded (:func:`_late`) once ``check`` (the content
    check of that result, run before anything is written) passed. Any other refusal is
    raised. Implements MW-11.5-b."""
    try:
        fence(ctx, item)
    except Reject as r:
        if _held(ctx, item):
            if check is not None:
                check()
            _late(ctx, item, r)
            return False
        raise
    return True


def _held(ctx: Ctx, item: Row) -> bool:
    """The actor ever held the lease the Command names, on this WorkItem."""
    return (
        ctx.one(
            "leases.exists_by_lease_id_agent_id_group_id_work_item_id",
            ctx.body.get("lease_id"),
            ctx.command.actor,
            item["group_id"],
            item["work_item_id"],
        )
        is not None
    )


def _late(ctx: Ctx, item: Row, rejection: Reject) -> None:
    """Record a former owner's result for audit (MW-11.5-b); it changes no state."""
    ctx.status = "recorded"
    ctx.rejection = rejection.rejection
    ctx.emit(
        EventType.WORK_LATE_RESULT_RECORDED,
        {
            "lease_id": ctx.body.get("lease_id"),
            "ownership_epoch": ctx.body.get("ownership_epoch"),
            "reason": rejection.rejection.code,
            "state": item["state"],
            "result_digest": digest({k: v for k, v in ctx.body.items() if k != "usage"}),
        },
        work_item_id=item["work_item_id"],
    )


@command(CommandType.WORK_SUBMIT, needs_session=True)
def work_submit(ctx: Ctx) -> None:
    """Submit outputs with Evidence for every acceptance criterion (MW-13.2-a). What it names
    is checked by :func:`._submission.checked_submission` before anything is written — on the
    owner's submission and on a former owner's late one, recorded only if it passes: the
    Artifacts exist in this WorkItem (published in its conversation, or promoted) and Evidence
    cites them, Evidence cites only submitted Artifacts, every deliverable is present, and no
    other Mission's Artifact enters (``cross_mission_content``, MW-13.3-d)."""
    item = load_item(ctx)
    if not _fenced_or_late(ctx, item, lambda: checked_submission(ctx, item)):
        return
    gate(ctx, item)
    sub = checked_submission(ctx, item)
    charge_usage(ctx, item)
    end_leases(ctx, item, "released", "submitted")
    ctx.emit(
        EventType.WORK_SUBMITTED,
        {
            "state": "submitted",
            "ownership_epoch": item["ownership_epoch"],
            "outputs": sub.outputs,
            "artifacts": sub.artifacts,
            "evidence": [e.model_dump() for e in sub.evidence],
        },
        work_item_id=item["work_item_id"],
    )


@command(CommandType.WORK_FAIL)
def work_fail(ctx: Ctx) -> None:
    """Fail with Evidence (MW-11.4-f). A Worker must name its current lease; a Coordinator may
    fail any unfinished item. Control returns to the Coordinator (MW-10.2-b). The Event says
    whether an automatic retry is left (``retryable``; ``retry_exhausted`` names the bound
    reached, MW-11.4-d). Its Evidence is checked by :func:`._submission.checked_failure` before
    anything is written — on the owner's failure and on a former owner's late one, recorded
    only if it passes (MW-11.5-b)."""
    item = load_item(ctx)
    by_worker = "lease_id" in ctx.body or Role.COORDINATOR not in ctx.roles
    if by_worker and not _fenced_or_late(ctx, item, lambda: checked_failure(ctx, item)):
        return
    gate(ctx, item)
    evidence = checked_failure(ctx, item)
    retry = retry_fields(ctx, item, charge_usage(ctx, item))  # MW-11.4-d
    end_leases(ctx, item, "released" if by_worker else "revoked", "failed")
    withdraw_offers(ctx, item, "failed")
    ctx.emit(
        EventType.WORK_FAILED,
        {
            "state": "failed",
            "owner": item["owner"],
            "ownership_epoch": item["ownership_epoch"],
            "capabilities": contract_of(item).required_capabilities,
            "attempts": item["attempts"] + 1,
            **retry,
            "evidence": [e.model_dump() for e in evidence],
        },
        work_item_id=item["work_item_id"],
    )


@command(CommandType.ARTIFACT_PUBLISH, needs_session=True)
def artifact_publish(ctx: Ctx) -> None:
    """Register an Artifact's signed manifest under the current lease (MW-11.3-c, MW-13.1-b).

    The lease check comes first. Then ``manifest`` must be a valid signed manifest
    (``invalid_manifest``) whose producer is the actor, whose Group, Mission and WorkItem are
    this WorkItem's and whose Agent Card version the actor has published (``invalid_manifest``),
    signed with the actor's member key (``manifest_signature``). Its sources, when published in
    another Mission, must have been promoted (``cross_mission_content`` with the
    ``artifact_hash``, MW-13.3-d). Its content hash must be content this WorkItem holds
    (:func:`._possession.possession`: uploaded under one of its leases' write grants, or already
    its Mission's, promoted, or an input it was given), else ``content_not_uploaded`` — one
    answer whether or not another Mission holds such bytes: publishing may not make another
    Mission's content this one's. Publishing again in the same Mission is accepted; two
    Missions that each uploaded identical bytes both publish them.
    """
    item = load_item(ctx)
    fence(ctx, item)
    gate(ctx, item, CommandType.PROGRESS_REPORT)
    signed = parse(
        SignedManifest,
        ctx.body.get("manifest"),
        "manifest",
        code=RejectionCode.INVALID_MANIFEST,
        reason="manifest is not a valid signed manifest",
    )
    m = signed.manifest
    want = {
        "producer": ctx.command.actor,
        "group_id": item["group_id"],
        "mission_id": item["mission_id"],
        "work_item_id": item["work_item_id"],
    }
    wrong = {
        k: {"expected": v, "actual": getattr(m, k)} for k, v in want.items() if getattr(m, k) != v
    }
    if wrong:
        raise Reject(
            RejectionCode.INVALID_MANIFEST,
            "the manifest must describe this WorkItem's output, produced by the actor",
            mismatch=wrong,
        )
    agent = ctx.one("agents.card_version_by_agent_id", ctx.command.actor)
    if agent is None or m.agent_card_version > agent["card_version"]:
        raise Reject(
            RejectionCode.INVALID_MANIFEST,
            "the actor has published no such Agent Card version",
            agent_card_version=m.agent_card_version,
        )
    key = ctx.one("members.key", ctx.group_id, ctx.command.actor)
    if key is None or not verify_manifest(signed, key["public_key"]):
        raise Reject(
            RejectionCode.MANIFEST_SIGNATURE,
            "the manifest's signature does not verify under the actor's key",
            manifest_id=signed.manifest_id,
        )
    refuse_other_missions(ctx, m.mission_id, m.sources)
    # the content itself: a hash is no proof (every member reads every hash in the log); the
    # bytes reaching the store under this WorkItem's own write grant are (MW-13.3-d)
    refuse_unproven_content(ctx, item, m.content_hash)
    ctx.run(
        "artifacts.insert_ignore",
        m.group_id,
        m.content_hash,
        signed.manifest_id,
        m.mission_id,
        m.work_item_id,
        m.producer,
        m.classification.value,
        ctx.now_ms,
    )
    ctx.emit(
        EventType.ARTIFACT_PUBLISHED,
        {
            "lease_id": ctx.body["lease_id"],
            "artifact_hash": m.content_hash,
            "manifest_id": signed.manifest_id,
            "manifest": signed.wire(),
        },
        work_item_id=item["work_item_id"],
    )
