"""What a ``work.submit`` or ``work.fail`` carries, checked before anything is written
(MW-13.2-a/c, MW-13.3-d).

:func:`checked_submission` is the one check of a submission's content, for an owner's
submission and for a former owner's late one alike (that one is recorded for audit only if its
content passes, MW-11.5-b); :func:`checked_failure` is the same for a failure's Evidence.

A SHA-256 hex string (:func:`~missionweave.protocol.is_hash`) in a place that names content
names an Artifact: a submission's ``artifacts``, the ``artifacts`` and ``subject`` of its
Evidence, and an output's whole value (a nested value is data). No such Artifact may be another
Mission's (``cross_mission_content``, MW-13.3-d). What stands for this WorkItem's work — its
``artifacts``, its Evidence's subjects, and a deliverable's output — must moreover have been
published in this WorkItem's conversation (an ``artifact.published`` Event of this WorkItem) or
promoted into the Group: another WorkItem's Artifact is not this one's result. Any other output
may name an Artifact of this Mission as data (the inventory an SBOM was built from, an input)
or a hash never published (a digest).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, NamedTuple

from ...protocol import (
    CanonicalizationError,
    EventType,
    Evidence,
    RejectionCode,
    canonical_bytes,
    is_hash,
)
from ._command_scope import Ctx, Reject
from ._handlers_context import refuse_other_missions
from ._items import cited, contract_of, evidence_hashes, parse_evidence
from ._store import Row

#: Most bytes of one inline output (its name and value, as RFC 8785 canonical JSON): larger
#: content is published as an Artifact and the output names its hash.
MAX_INLINE_OUTPUT_BYTES = 64 * 1024
#: Most Artifacts one submission names (each once).
MAX_SUBMITTED_ARTIFACTS = 1_000


class CheckedSubmission(NamedTuple):
    """A submission's content once :func:`checked_submission` passed it."""

    outputs: dict[str, Any]
    artifacts: list[str]
    evidence: list[Evidence]


def checked_submission(ctx: Ctx, item: Row) -> CheckedSubmission:
    """The ``outputs``, ``artifacts`` and ``evidence`` of ``ctx.body``, checked for ``item``
    (MW-13.2-a/c, MW-13.3-d). Implements MW-13.2-a.

    ``artifacts`` is a list of at most :data:`MAX_SUBMITTED_ARTIFACTS` distinct SHA-256 hex
    hashes; ``outputs`` an object whose every entry is at most :data:`MAX_INLINE_OUTPUT_BYTES`
    of canonical JSON, an output whose value is a SHA-256 hex string naming an Artifact (see
    the module's docstring for which); a deliverable is present as a non-empty output of its
    name (a non-blank string, a non-empty object or list: ``null``, numbers and booleans are no
    deliverable's content) or as a submitted Artifact whose manifest has its schema id (its
    media type when it names none).

    Raises:
        Reject: ``evidence_required`` / ``evidence_missing`` (a criterion without Evidence);
            ``invalid_body`` (``field``: ``artifacts`` not a list of SHA-256 hex, longer than
            ``max_items``, or naming an ``artifact`` twice; ``outputs`` not an object, an
            ``output`` over ``max_bytes`` or not JSON); ``cross_mission_content``
            (``artifact_hash``: another Mission's Artifact, MW-13.3-d); ``artifact_not_published``
            (``artifact``, with the deliverable's ``output`` or the Evidence ``criterion`` that
            names it: not published in this WorkItem nor promoted); ``artifact_without_evidence``
            (``artifact``: cited by no Evidence); ``artifact_not_submitted`` (``artifact`` and
            ``criterion``: cited by Evidence but not among ``artifacts``);
            ``deliverable_missing`` (``deliverable``: neither a non-empty output nor a matching
            submitted Artifact).
    """
    evidence = evidence_per_criterion(ctx, item)
    contract = contract_of(item)
    artifacts = _artifact_list(ctx.body.get("artifacts", []))
    outputs = _outputs(ctx.body.get("outputs", {}))
    named = {n: v for n, v in outputs.items() if is_hash(v)}
    about = [(e.criterion, e.subject) for e in evidence if is_hash(e.subject)]
    subjects = [h for _, h in about]
    refuse_other_missions(
        ctx, item["mission_id"], [*artifacts, *cited(evidence), *named.values(), *subjects]
    )
    _published_and_cited(ctx, item, artifacts, evidence)
    deliverables = {d.name for d in contract.deliverables}
    for name, h in named.items():
        if name in deliverables:  # another WorkItem's Artifact does not stand for this one's
            _published_here(ctx, item, h, output=name)
    for criterion, h in about:
        _published_here(ctx, item, h, criterion=criterion)
    _cited_are_submitted(artifacts, evidence)
    present = {n for n, v in outputs.items() if _has_content(v)}
    absent = [d for d in contract.deliverables if d.name not in present]
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
                    "a deliverable of the contract has no non-empty output and no submitted "
                    "Artifact",
                    deliverable=d.name,
                    schema_id=d.schema_id,
                    media_type=d.media_type,
                )
    return CheckedSubmission(outputs, artifacts, evidence)


def evidence_per_criterion(ctx: Ctx, item: Row) -> list[Evidence]:
    """The Command's ``evidence``, which must answer every acceptance criterion of ``item``'s
    contract: of a submission, and of a child Mission's approval (MW-10.2-c). Implements
    MW-13.2-a.

    Raises:
        Reject: ``invalid_body``, ``evidence_required``, ``evidence_missing`` (``missing``:
            the criteria ids without Evidence).
    """
    evidence = parse_evidence(ctx, required=True)
    covered = {e.criterion for e in evidence}
    missing = [c.id for c in contract_of(item).acceptance_criteria if c.id not in covered]
    if missing:
        raise Reject(
            RejectionCode.EVIDENCE_MISSING,
            "every acceptance criterion needs Evidence",
            missing=missing,
        )
    return evidence


def checked_failure(ctx: Ctx, item: Row) -> list[Evidence]:
    """The ``evidence`` of a ``work.fail`` body, checked for ``item``: for the owner's failure,
    a Coordinator's, and a former owner's late one (recorded for audit only if it passes,
    MW-11.5-b). At least one Evidence; no Artifact it names (its ``artifacts``, a ``subject``
    that is a SHA-256 hash) is another Mission's (MW-13.3-d). A failure may cite what it
    could not finish, so Artifacts never published here are not refused.

    Raises:
        Reject: ``invalid_body`` (``evidence`` not a list of Evidence), ``evidence_required``,
            ``cross_mission_content`` (``artifact_hash``).
    """
    evidence = parse_evidence(ctx, required=True)
    refuse_other_missions(ctx, item["mission_id"], evidence_hashes(evidence))
    return evidence


def _artifact_list(raw: object) -> list[str]:
    """``artifacts``: a list of at most :data:`MAX_SUBMITTED_ARTIFACTS` distinct hashes."""
    if not isinstance(raw, list):
        raise Reject(RejectionCode.INVALID_BODY, "artifacts must be a list", field="artifacts")
    if len(raw) > MAX_SUBMITTED_ARTIFACTS:
        raise Reject(
            RejectionCode.INVALID_BODY,
            f"a submission names at most {MAX_SUBMITTED_ARTIFACTS} Artifacts",
            field="artifacts",
            items=len(raw),
            max_items=MAX_SUBMITTED_ARTIFACTS,
        )
    if not all(is_hash(a) for a in raw):
        raise Reject(
            RejectionCode.INVALID_BODY, "artifacts must be SHA-256 hex hashes", field="artifacts"
        )
    seen: set[str] = set()
    for h in raw:
        if h in seen:
            raise Reject(
                RejectionCode.INVALID_BODY,
                "a submission names each Artifact once",
                field="artifacts",
                artifact=h,
            )
        seen.add(h)
    return raw


def _outputs(raw: object) -> dict[str, Any]:
    """``outputs``: an object whose every entry is at most :data:`MAX_INLINE_OUTPUT_BYTES`."""
    if not isinstance(raw, dict):
        raise Reject(RejectionCode.INVALID_BODY, "outputs must be an object", field="outputs")
    for name, value in raw.items():
        try:
            size = len(canonical_bytes({name: value}))
        except CanonicalizationError:
            raise Reject(
                RejectionCode.INVALID_BODY, "an output must be JSON", field="outputs", output=name
            ) from None
        if size > MAX_INLINE_OUTPUT_BYTES:
            raise Reject(
                RejectionCode.INVALID_BODY,
                f"an inline output is at most {MAX_INLINE_OUTPUT_BYTES} bytes of canonical "
                "JSON: publish larger content as an Artifact and name its hash",
                field="outputs",
                output=name,
                bytes=size,
                max_bytes=MAX_INLINE_OUTPUT_BYTES,
            )
    return raw


def _has_content(value: object) -> bool:
    """Whether an output's value can stand for a deliverable: a string with a visible character
    (not only spaces or invisible format characters such as U+200B), a non-empty object or
    list."""
    if isinstance(value, str):
        return any(not c.isspace() and unicodedata.category(c) != "Cf" for c in value)
    return isinstance(value, dict | list) and len(value) > 0


def _is_published_here(ctx: Ctx, item: Row, h: str) -> bool:
    """``h`` was published in ``item``'s conversation or promoted into its Group."""
    return (
        ctx.one("artifacts.published_in_item", ctx.group_id, h, item["work_item_id"]) is not None
        or ctx.one("promoted_artifacts.in_group", ctx.group_id, h) is not None
    )


def _published_here(ctx: Ctx, item: Row, h: str, **where: str) -> None:
    """Refuse ``h`` (named by a deliverable or an Evidence subject, ``where``) unless
    :func:`_is_published_here`."""
    if not _is_published_here(ctx, item, h):
        raise Reject(
            RejectionCode.ARTIFACT_NOT_PUBLISHED,
            "an Artifact a submission names must be published in this WorkItem (or promoted)",
            artifact=h,
            **where,
        )


def _published_and_cited(
    ctx: Ctx, item: Row, artifacts: list[str], evidence: list[Evidence]
) -> None:
    """Each submitted Artifact was published in this WorkItem's conversation or promoted in
    this Group, and some Evidence references it (its ``artifacts`` or ``subject``)."""
    referenced = {h for e in evidence for h in e.artifacts} | {e.subject for e in evidence}
    for h in artifacts:
        if not _is_published_here(ctx, item, h):
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
    ``artifacts`` (an output may name one of this WorkItem's Artifacts it does not submit)."""
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


__all__ = ["CheckedSubmission", "checked_failure", "checked_submission", "evidence_per_criterion"]
