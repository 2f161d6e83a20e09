"""Handlers for Context Packages and Organization Artifacts (spec 13.3), and the read helpers
that keep one Mission's content out of another Mission's context (MW-13.3-d).

``context.publish`` — by a ``coordinator``: a signed Context Package whose version links the
latest stored version for its Mission and scope (MW-13.3-a, MW-13.3-c); Event
``context.published``. ``artifact.promote`` — by a ``mission_owner``: an Artifact published in the
Group becomes an approved, classified Organization Artifact that any Mission may use; Event
``artifact.promoted``, which carries the Artifact's provenance (MW-13.3-d).

The Authority's Groups form one Organization: a promotion is visible to every Group it holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from ...protocol import (
    Classification,
    CommandType,
    EventType,
    Rejection,
    RejectionCode,
    Role,
    SignedContextPackage,
    is_hash,
    verify_context_package,
)
from ._command_scope import Ctx, Reject, dumps, member_of, need, require_role
from ._items import parse
from ._reads import LogReader
from ._registry import command
from ._store import Store


def may_use_in_mission(
    store: Store, group_id: str, artifact_hash: str, mission_id: str
) -> Literal[True] | Rejection:
    """May ``artifact_hash`` enter the context of Mission ``mission_id`` of ``group_id``?

    Yes when it was published (``artifact.published``) in that same Mission, or when it was
    promoted to an Organization Artifact (``artifact.promoted``) in any Group. Everything else
    is refused: a Group's content does not enter another Mission's context by default
    (MW-13.3-d). The refusal does not name the other Missions (MW-13.3-e).

    Args:
        store: the Authority's Store (read only; the caller holds the Authority's lock or
            runs inside a handler's transaction).
        group_id: the Group of the Mission that wants to use the Artifact.
        artifact_hash: the Artifact's SHA-256 hex.
        mission_id: the Mission that wants to use it.

    Returns:
        ``True``, or a :class:`Rejection`: ``unknown_mission``, ``unknown_artifact`` (never
        published in this Group: another Group's content answers so too) or
        ``cross_mission_content``.
    """
    if store.one("missions.exists_by_group_id_mission_id", group_id, mission_id) is None:
        return Rejection(
            code=RejectionCode.UNKNOWN_MISSION,
            reason=f"no Mission {mission_id!r}",
            detail={"group_id": group_id, "mission_id": mission_id},
        )
    homes = {(str(r[0]), str(r[1])) for r in store.all("artifacts.homes", artifact_hash)}
    if (group_id, mission_id) in homes:
        return True
    if store.one("promoted_artifacts.any", artifact_hash) is not None:
        return True
    detail = {"artifact_hash": artifact_hash, "group_id": group_id, "mission_id": mission_id}
    # another Group's content answers as unknown: a refusal must not tell this Group that
    # another holds given bytes (issue 38, "existence oracles"); it is not in this Group's
    # namespace, so no read reaches it either
    if not any(g == group_id for g, _ in homes):
        return Rejection(
            code=RejectionCode.UNKNOWN_ARTIFACT,
            detail=detail,
            reason="the artifact was never published on this Authority",
        )
    return Rejection(
        code=RejectionCode.CROSS_MISSION_CONTENT,
        detail=detail,
        reason="the artifact belongs to another Mission and is not a promoted Organization "
        "artifact",
    )


def context_use(
    authority: LogReader, group_id: str, mission_id: str, artifact_hash: str
) -> Rejection | None:
    """:func:`may_use_in_mission` on a live Authority, under its lock; ``None`` when allowed."""
    with authority._lock:
        verdict = may_use_in_mission(authority.store, group_id, artifact_hash, mission_id)
    return None if verdict is True else verdict


def _head_seq(ctx: Ctx) -> int:
    # the head with the Events appended earlier in the same batch (not yet in the database)
    return ctx.head_seq(ctx.group_id)


def refuse_other_missions(ctx: Ctx, mission_id: str, hashes: Iterable[str]) -> None:
    """Refuse Artifacts published in another Mission and not promoted (MW-13.3-d).
    Implements MW-13.3-d.

    Every place an Artifact hash enters a Mission calls this: a manifest's content hash and
    sources (``artifact.publish``), Context Packages (``context.publish``), a contract's
    ``inputs`` (``work.propose``, ``work.authorize``, a revised contract in ``work.offer``), a
    submission's ``artifacts``, the outputs that name an Artifact and the ``artifacts`` and hash
    ``subject`` of its Evidence (``work.submit``, ``work.fail``), and the ``artifacts`` the
    Evidence of ``work.accept_result`` cites. Entries that are not SHA-256 hex (a contract input
    may name a file) and hashes the Authority never saw (external inputs: no Mission's content)
    pass.

    Raises:
        Reject: ``cross_mission_content`` (the other Mission is not named, MW-13.3-e).
    """
    for h in dict.fromkeys(hashes):
        if not is_hash(h):
            continue
        verdict = may_use_in_mission(ctx.store, ctx.group_id, h, mission_id)
        if verdict is not True and verdict.code != RejectionCode.UNKNOWN_ARTIFACT:
            raise Reject(verdict.code, verdict.reason, **verdict.detail)


def _signed_package(ctx: Ctx) -> SignedContextPackage:
    return parse(
        SignedContextPackage,
        ctx.body.get("package"),
        "package",
        code=RejectionCode.INVALID_CONTEXT_PACKAGE,
        reason="package is not a valid signed Context Package",
    )


@command(CommandType.CONTEXT_PUBLISH)
def context_publish(ctx: Ctx) -> None:
    """Store a new version of a Context Package (MW-13.3-a, MW-13.3-c). Implements MW-13.3-a.

    Checks, in order: the ``coordinator`` role; a valid signed package
    (``invalid_context_package``); a known Mission (``unknown_mission``) and WorkItem scope
    (``unknown_work_item``); a source range in this Group and within its head
    (``invalid_event_range``); a generator that is an active member whose key verifies the
    signature (``context_signature``); version = latest + 1 and ``previous`` = the latest stored
    version's hash for the Mission and scope (``context_chain``); cited Artifacts usable in the
    Mission (``cross_mission_content``).
    """
    require_role(ctx, Role.COORDINATOR)
    signed = _signed_package(ctx)
    p = signed.package
    if ctx.one("missions.exists_by_group_id_mission_id", ctx.group_id, p.mission_id) is None:
        raise Reject(
            RejectionCode.UNKNOWN_MISSION, f"no Mission {p.mission_id!r}", mission_id=p.mission_id
        )
    for wid in p.scope:
        if ctx.one("work_items.exists_in_mission", ctx.group_id, wid, p.mission_id) is None:
            raise Reject(
                RejectionCode.UNKNOWN_WORK_ITEM,
                f"no WorkItem {wid!r} in the Mission",
                work_item_id=wid,
                mission_id=p.mission_id,
            )
    head = _head_seq(ctx)
    if p.source.group_id != ctx.group_id or p.source.to_seq > head:
        raise Reject(
            RejectionCode.INVALID_EVENT_RANGE,
            "the source range must lie in this Group's log",
            source=p.source.model_dump(),
            group_id=ctx.group_id,
            head_seq=head,
        )
    member = ctx.one("members.active_key", ctx.group_id, p.generator)
    if member is None or not verify_context_package(signed, member["public_key"]):
        raise Reject(
            RejectionCode.CONTEXT_SIGNATURE,
            "the package is not signed by its generator, an active Group member",
            generator=p.generator,
        )
    latest = ctx.one(
        "context_packages.latest",
        ctx.group_id,
        p.mission_id,
        p.scope_key,
    )
    want = (latest["version"] + 1, latest["package_hash"]) if latest else (1, None)
    if (p.version, p.previous) != want:
        raise Reject(
            RejectionCode.CONTEXT_CHAIN,
            "a new version must link the latest stored version",
            version=p.version,
            previous=p.previous,
            expected_version=want[0],
            expected_previous=want[1],
        )
    refuse_other_missions(ctx, p.mission_id, p.artifacts)
    h = signed.package_hash
    ctx.run(
        "context_packages.insert",
        ctx.group_id,
        p.mission_id,
        p.scope_key,
        p.version,
        h,
        p.generator,
        dumps(signed.wire()),
        ctx.now_ms,
    )
    ctx.emit(
        EventType.CONTEXT_PUBLISHED,
        {
            "mission_id": p.mission_id,
            "scope": p.scope,
            "version": p.version,
            "package_hash": h,
            "previous": p.previous,
            "package": signed.wire(),
        },
    )
    ctx.reply["package_hash"] = h


@command(CommandType.ARTIFACT_PROMOTE)
def artifact_promote(ctx: Ctx) -> None:
    """Approve an Artifact published in this Group as a classified Organization Artifact
    (MW-13.3-d).

    Body: ``artifact_hash`` (published here: ``unknown_artifact`` otherwise) and
    ``classification`` (``public``, ``internal``, ``confidential`` or ``restricted``). The
    ``artifact.promoted`` Event carries the Artifact's provenance (its manifests' ids, Missions
    and WorkItems) and, being in the signed hash chain, is the verifiable record of the transfer.
    """
    require_role(ctx, Role.MISSION_OWNER)
    h = need(ctx.body, "artifact_hash")
    if not is_hash(h):
        raise Reject(
            RejectionCode.INVALID_BODY, "artifact_hash must be SHA-256 hex", field="artifact_hash"
        )
    classification = member_of(
        Classification,
        need(ctx.body, "classification"),
        field="classification",
        what="classification",
    )
    rows = ctx.all(
        "artifacts.homes_in_group",
        ctx.group_id,
        h,
    )
    if not rows:
        raise Reject(
            RejectionCode.UNKNOWN_ARTIFACT,
            "the artifact was not published in this Group",
            artifact_hash=h,
        )
    provenance: list[dict[str, Any]] = [dict(r) for r in rows]
    ctx.run(
        "promoted_artifacts.upsert",
        ctx.group_id,
        h,
        classification.value,
        ctx.command.actor,
        ctx.now_ms,
    )
    ctx.emit(
        EventType.ARTIFACT_PROMOTED,
        {
            "artifact_hash": h,
            "classification": classification.value,
            "approved_by": ctx.command.actor,
            "provenance": provenance,
        },
    )
