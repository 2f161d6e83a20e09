"""What a ``work.submit`` carries, checked before anything is written (MW-13.2-a/c, MW-13.3-d).

:func:`checked_submission` is the one check of a submission's content, for an owner's
submission and for a former owner's late one alike (that one is recorded for audit only if its
content passes, MW-11.5-b): Evidence for every acceptance criterion; ``artifacts`` each
published in this WorkItem's conversation (an ``artifact.published`` Event of this WorkItem)
or promoted into the Group, and cited by some Evidence; every Artifact that Evidence cites
among ``artifacts``; every deliverable of the contract present.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ...protocol import EventType, Evidence, RejectionCode, is_hash
from ._command_scope import Ctx, Reject
from ._handlers_context import refuse_other_missions
from ._items import cited, contract_of, parse_evidence
from ._store import Row


class CheckedSubmission(NamedTuple):
    """A submission's content once :func:`checked_submission` passed it."""

    outputs: dict[str, Any]
    artifacts: list[str]
    evidence: list[Evidence]


def checked_submission(ctx: Ctx, item: Row) -> CheckedSubmission:
    """The ``outputs``, ``artifacts`` and ``evidence`` of ``ctx.body``, checked for ``item``.
    (MW-13.2-a/c).

    Raises:
        Reject: ``evidence_required`` / ``evidence_missing`` (a criterion without Evidence);
            ``invalid_body`` (``artifacts`` not a list of SHA-256 hex, ``outputs`` not an
            object); ``cross_mission_content`` (another Mission's Artifact, MW-13.3-d);
            ``artifact_not_published`` (``artifact``: not published in this WorkItem nor
            promoted); ``artifact_without_evidence`` (``artifact``: cited by no Evidence);
            ``artifact_not_submitted`` (``artifact`` and ``criterion``: cited by Evidence but
            not among ``artifacts``); ``deliverable_missing`` (``deliverable``: a
            contract deliverable with neither an output of its name nor a submitted Artifact
            whose manifest has its schema id, or media type when it names none).
    """
    evidence = parse_evidence(ctx, required=True)
    contract = contract_of(item)
    covered = {e.criterion for e in evidence}
    missing = [c.id for c in contract.acceptance_criteria if c.id not in covered]
    if missing:
        raise Reject(
            RejectionCode.EVIDENCE_MISSING,
            "every acceptance criterion needs Evidence",
            missing=missing,
        )
    artifacts = ctx.body.get("artifacts", [])
    if not isinstance(artifacts, list) or not all(is_hash(a) for a in artifacts):
        raise Reject(
            RejectionCode.INVALID_BODY, "artifacts must be SHA-256 hex hashes", field="artifacts"
        )
    outputs = ctx.body.get("outputs", {})
    if not isinstance(outputs, dict):
        raise Reject(RejectionCode.INVALID_BODY, "outputs must be an object", field="outputs")
    refuse_other_missions(ctx, item["mission_id"], [*artifacts, *cited(evidence)])
    _published_and_cited(ctx, item, artifacts, evidence)
    _cited_are_submitted(artifacts, evidence)
    named = {n for n, v in outputs.items() if v is not None}
    absent = [d for d in contract.deliverables if d.name not in named]
    if absent:
        manifests = _manifests(ctx, item, artifacts)
        for d in absent:
            if not any(
                (m.get("schema_id") == d.schema_id) if d.schema_id else
                (m.get("media_type") == d.media_type)
                for m in manifests
            ):  # fmt: skip
                raise Reject(
                    RejectionCode.DELIVERABLE_MISSING,
                    "a deliverable of the contract has no output and no submitted Artifact",
                    deliverable=d.name,
                    schema_id=d.schema_id,
                    media_type=d.media_type,
                )
    return CheckedSubmission(outputs, artifacts, evidence)


def _published_and_cited(
    ctx: Ctx, item: Row, artifacts: list[str], evidence: list[Evidence]
) -> None:
    """Each submitted Artifact was published in this WorkItem's conversation or promoted in
    this Group, and some Evidence references it (its ``artifacts`` or ``subject``)."""
    referenced = {h for e in evidence for h in e.artifacts} | {e.subject for e in evidence}
    for h in artifacts:
        if ctx.one("artifacts.published_in_item", ctx.group_id, h, item["work_item_id"]) is None \
                and ctx.one("promoted_artifacts.in_group", ctx.group_id, h) is None:  # fmt: skip
            raise Reject(
                RejectionCode.ARTIFACT_NOT_PUBLISHED,
                "a submitted Artifact must be published in this WorkItem (or promoted)",
                artifact=h,
            )
        if h not in referenced:
            raise Reject(
                RejectionCode.ARTIFACT_WITHOUT_EVIDENCE,
                "every submitted Artifact must be referenced by Evidence",
                artifact=h,
            )


def _cited_are_submitted(artifacts: list[str], evidence: list[Evidence]) -> None:
    """Every Artifact an Evidence cites (its ``artifacts``) is among the submission's
    ``artifacts`` (an output may still name another Artifact, an input say, as data)."""
    submitted = set(artifacts)
    for e in evidence:
        for h in e.artifacts:
            if h not in submitted:
                raise Reject(
                    RejectionCode.ARTIFACT_NOT_SUBMITTED,
                    "Evidence may cite only Artifacts of this submission",
                    artifact=h,
                    criterion=e.criterion,
                )


def _manifests(ctx: Ctx, item: Row, artifacts: list[str]) -> list[dict[str, Any]]:
    """The manifests (as JSON) of the submitted Artifacts published in this WorkItem."""
    wanted = set(artifacts)
    if not wanted:
        return []
    out: list[dict[str, Any]] = []
    g, wid, t = item["group_id"], item["work_item_id"], EventType.ARTIFACT_PUBLISHED
    for row in ctx.all("events.of_item_type", g, t, wid, g, t, wid):
        body = json.loads(row[0])["body"]
        if body.get("artifact_hash") in wanted:
            out.append(body.get("manifest", {}).get("manifest", {}))
    return out


__all__ = ["CheckedSubmission", "checked_submission"]
