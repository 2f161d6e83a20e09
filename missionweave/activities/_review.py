"""The coordinator's own review steps (MW-13.2-b steps 1 and 2), run by ``review_submission``.

1. **integrity** — every submitted Artifact is in its Group's namespace of the artifact store
   (which the coordinator reads as the operator), its bytes hash
   to its name (MW-13.1-d), and a manifest of it names this Group, Mission and WorkItem and is
   signed by its producer (verified under the key of the producer's published Agent Card, which
   the Authority binds to the member's key); then every deliverable is present — inline in the
   outputs, as the hash of a submitted Artifact, or as a submitted Artifact whose manifest has the
   deliverable's schema (or media type) — and valid against its JSON Schema, and every other
   Artifact whose manifest names a registered schema is valid against it;
2. **deterministic** — Evidence for every acceptance criterion, passing for ``deterministic``
   criteria and not failing for the others (those are judged by a reviewer agent or the
   MissionOwner), and the contract's registered checks.

A review WorkItem (``ReviewInput.review_of`` set) is checked for integrity (its manifests may
name the reviewed WorkItem too) and for Evidence on each criterion whatever its result: a
reviewer's ``fail`` is the content of its review, judged for the reviewed WorkItem.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import jsonschema
from temporalio.exceptions import ApplicationError

from ..artifacts import (
    ArtifactIntegrityError,
    ArtifactNotFound,
    ArtifactStore,
    ManifestError,
    ManifestIndex,
)
from ..authority.client import AuthorityClient, CursorTooOldError
from ..protocol import EventType, Evidence, SignedManifest, verify_manifest
from ..protocol.temporal_contract import ReviewInput, ReviewStep

log = logging.getLogger(__name__)

#: A deterministic check: given the submitted outputs and Evidence, ``None`` when it passes or
#: a short reason when it fails. Registered by name; contracts cite it in ``criterion.check``.
Check = Callable[[Mapping[str, Any], list[Evidence]], str | None]

#: Largest Artifact whose JSON is parsed for a schema check, bytes (a larger one fails it).
MAX_SCHEMA_BYTES = 16 << 20

#: Group log pages (of 1,000 Events) searched for a manifest the index does not hold.
LOG_PAGES = 20

_JSON_TYPES = ("application/json", "application/ld+json", "application/schema+json")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class CheckedArtifact:
    """One submitted Artifact after the integrity check.

    Attributes:
        hash: its SHA-256 hex.
        manifest: its verified manifest for this WorkItem, or ``None``.
        size: its size in bytes (0 when it could not be read).
        data: its bytes when small enough to be schema-checked (else ``None``).
        content_ok: its bytes were read and match its hash.
        problem: why it fails the check, or ``None``.
    """

    hash: str
    manifest: SignedManifest | None = None
    size: int = 0
    content_ok: bool = False
    data: bytes | None = None
    problem: str | None = None

    def json(self) -> tuple[Any, str | None]:
        """Its content parsed as JSON: ``(value, None)`` or ``(None, why not)``."""
        if self.data is None:
            return None, f"larger than {MAX_SCHEMA_BYTES} bytes: not schema-checked"
        try:
            return json.loads(self.data), None
        except ValueError as exc:
            return None, f"not JSON ({exc})"


@dataclass(slots=True, eq=False)
class SubmissionReview:
    """Steps 1 and 2 of the coordinator's review.

    Args:
        authority: the Authority client (producers' keys, and the Group log when the manifest
            index lacks a manifest).
        coordinator_id: the coordinator's agent id (the producer of its Evidence).
        artifact_store: the root of the store the agents publish to through the Authority
            (each Group's namespace is read: ``for_group``; ``None``: a submission with
            Artifacts fails the integrity step).
        checks: deterministic checks by name.
        schemas: JSON Schemas by id.
    """

    authority: AuthorityClient
    coordinator_id: str
    _: KW_ONLY
    artifact_store: ArtifactStore | None
    checks: Mapping[str, Check]
    schemas: Mapping[str, dict[str, Any]]

    def _evidence(
        self,
        subject: str,
        criterion: str,
        method: str,
        ok: bool | None,
        summary: str,
        artifacts: Iterable[str] = (),
    ) -> Evidence:
        result = "inconclusive" if ok is None else "pass" if ok else "fail"
        return Evidence(
            subject=subject,
            criterion=criterion,
            method=method,
            result=result,
            producer=self.coordinator_id,
            timestamp_ms=_now_ms(),
            artifacts=list(artifacts),
            summary=summary[:2000],
        )

    # ------------------------------------------------------------------- step 1: integrity

    async def integrity(self, inp: ReviewInput) -> ReviewStep:
        """Artifact integrity and required output schemas (MW-13.2-b step 1, MW-13.1-d).

        Raises:
            ArtifactStoreError: the store failed (the activity is retried).
            AuthorityUnavailable: the Authority cannot be reached (retried).
        """
        problems: list[str] = []
        evidence: list[Evidence] = []
        hashes = list(dict.fromkeys(inp.artifacts))
        checked: dict[str, CheckedArtifact] = {}
        if hashes and self.artifact_store is None:
            problems.append(
                f"no artifact store configured: {len(hashes)} artifact(s) cannot be verified"
            )
        elif hashes:
            checked = await self._check_artifacts(inp, hashes)
            for h in hashes:
                c = checked[h]
                if c.problem:
                    problems.append(f"artifact {h[:12]}: {c.problem}")
                    summary = c.problem
                else:
                    assert c.manifest is not None
                    summary = (
                        f"{c.size} bytes match sha256; manifest "
                        f"{c.manifest.manifest_id[:12]} signed by "
                        f"{c.manifest.manifest.producer}"
                    )
                evidence.append(
                    self._evidence(
                        h,
                        "artifact_integrity",
                        "sha256 + signed manifest",
                        not c.problem,
                        summary,
                        [h],
                    )
                )
        if inp.review_of is None:
            p, ev = self._deliverables(inp, checked)
            problems += p
            evidence += ev
        return ReviewStep(
            step="integrity",
            passed=not problems,
            evidence=evidence,
            detail="; ".join(problems) or "artifacts verified; deliverables present and valid",
        )

    async def _check_artifacts(
        self, inp: ReviewInput, hashes: list[str]
    ) -> dict[str, CheckedArtifact]:
        keys = await self._producer_keys(inp.group_id)
        checked = await asyncio.to_thread(self._check_all, inp, hashes, keys)
        unknown = {h for h, c in checked.items() if c.manifest is None and c.content_ok}
        if unknown and await self._ingest_from_log(inp.group_id, unknown, keys):
            again = await asyncio.to_thread(self._check_all, inp, sorted(unknown), keys)
            checked.update(again)
        return checked

    async def _producer_keys(self, group_id: str) -> dict[str, str]:
        """Agent id → public key from the Group's published Agent Cards (the Authority refuses
        a card whose key is not the agent's)."""
        return {
            a.agent_id: a.card.public_key
            for a in await self.authority.agents(group_id)
            if a.card is not None
        }

    def _check_all(
        self, inp: ReviewInput, hashes: list[str], keys: Mapping[str, str]
    ) -> dict[str, CheckedArtifact]:
        return {h: self._check_one(inp, h, keys) for h in hashes}

    def _check_one(self, inp: ReviewInput, h: str, keys: Mapping[str, str]) -> CheckedArtifact:
        assert self.artifact_store is not None
        store = self.artifact_store.for_group(inp.group_id)  # content is addressed per Group
        out = CheckedArtifact(h)
        try:
            with tempfile.TemporaryDirectory(prefix="mw-review-") as tmp:
                # a verified read in bounded memory (MW-13.1-d); the file is only kept when
                # small enough to be schema-checked
                ref = store.get_to_file(h, Path(tmp) / "content")
                out.size, out.content_ok = ref.size, True
                if ref.size <= MAX_SCHEMA_BYTES:
                    out.data = (Path(tmp) / "content").read_bytes()
        except ArtifactNotFound:
            out.problem = "missing from the artifact store"
            return out
        except ArtifactIntegrityError as exc:
            out.problem = f"content does not match its hash (stored bytes hash to {exc.actual})"
            return out
        except ValueError as exc:
            out.problem = str(exc)
            return out
        try:
            manifests = ManifestIndex(store).get(h)
        except ManifestError as exc:
            log.warning("manifest index of %s: %s", h, exc)
            manifests = []
        items = {inp.work_item_id} | ({inp.review_of} if inp.review_of else set())
        mine = [
            m
            for m in manifests
            if m.manifest.content_hash == h
            and m.manifest.group_id == inp.group_id
            and m.manifest.mission_id == inp.mission_id
            and m.manifest.work_item_id in items
        ]
        for m in mine:
            key = keys.get(m.manifest.producer)
            if key is not None and verify_manifest(m, key):
                out.manifest = m
                return out
        if mine:
            out.problem = (
                f"manifest not signed by its producer {mine[0].manifest.producer} "
                "(no published Agent Card key verifies it)"
            )
        else:
            out.problem = f"no manifest names Mission {inp.mission_id} / WorkItem " + (
                inp.work_item_id
            )
        return out

    async def _ingest_from_log(
        self, group_id: str, wanted: set[str], keys: Mapping[str, str]
    ) -> int:
        """Add to the index the manifests of ``artifact.published`` Events for ``wanted``
        found in the newest pages of the Group log (the index is a cache of the log: a
        publisher that died between the Authority's acceptance and indexing leaves a gap)."""
        assert self.artifact_store is not None
        index = ManifestIndex(self.artifact_store.for_group(group_id))
        added = 0
        upper, _ = await self.authority.head(group_id)
        for _ in range(LOG_PAGES):
            if upper <= 0:
                break
            after = max(0, upper - 1000)
            try:
                events = await self.authority.events(group_id, after, upper - after)
            except CursorTooOldError:
                break
            for ev in events:
                if (
                    ev.type != EventType.ARTIFACT_PUBLISHED
                    or ev.body.get("artifact_hash") not in wanted
                ):
                    continue
                try:
                    signed = SignedManifest.model_validate(ev.body["manifest"])
                    await asyncio.to_thread(index.add, signed, keys.get(signed.manifest.producer))
                    added += 1
                except (KeyError, ValueError, ManifestError) as exc:
                    log.warning("event %s#%s: unusable manifest: %s", group_id, ev.seq, exc)
            upper = after
        return added

    def _schema_problem(self, name: str, schema_id: str, value: Any) -> str | None:
        schema = self.schemas.get(schema_id)
        if schema is None:
            return f"{name}: schema {schema_id!r} is not registered"
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as exc:
            return f"{name}: {exc.message}"
        except jsonschema.SchemaError as exc:
            return f"{name}: schema {schema_id!r} is invalid: {exc.message}"
        return None

    def _deliverables(
        self, inp: ReviewInput, checked: Mapping[str, CheckedArtifact]
    ) -> tuple[list[str], list[Evidence]]:
        problems: list[str] = []
        evidence: list[Evidence] = []
        covered: set[str] = set()
        for d in inp.contract.deliverables:
            value: Any = None
            source = ""
            if d.name in inp.outputs:
                v = inp.outputs[d.name]
                if isinstance(v, str) and v in checked:  # names a submitted Artifact
                    source = v
                else:
                    value = v
            else:
                source = next(
                    (
                        h
                        for h, c in checked.items()
                        if c.manifest is not None
                        and (
                            c.manifest.manifest.schema_id == d.schema_id
                            if d.schema_id
                            else c.manifest.manifest.media_type == d.media_type
                        )
                    ),
                    "",
                )
                if not source:
                    problems.append(f"deliverable {d.name!r} missing")
                    continue
            covered.add(source)
            if d.schema_id is None:
                continue
            why: str | None = None
            if source:
                if checked[source].problem:
                    continue  # reported with the Artifact
                value, why = checked[source].json()
                why = f"{d.name}: {why}" if why else None
            why = why or self._schema_problem(d.name, d.schema_id, value)
            if why:
                problems.append(why)
            evidence.append(
                self._evidence(
                    inp.work_item_id,
                    f"schema:{d.name}",
                    f"json-schema {d.schema_id}",
                    why is None,
                    why or f"{d.name} is valid",
                    [source] if source else [],
                )
            )
        for h, c in checked.items():
            m = c.manifest.manifest if c.manifest is not None else None
            if h in covered or c.problem or m is None or m.schema_id not in self.schemas:
                continue
            if m.media_type.split(";")[0].strip() not in _JSON_TYPES:
                continue
            value, why = c.json()
            assert m.schema_id is not None
            why = why or self._schema_problem(f"artifact {h[:12]}", m.schema_id, value)
            if why:
                problems.append(why)
            evidence.append(
                self._evidence(
                    h, "schema", f"json-schema {m.schema_id}", why is None, why or "valid", [h]
                )
            )
        return problems, evidence

    # --------------------------------------------------------------- step 2: deterministic

    def deterministic(self, inp: ReviewInput) -> ReviewStep:
        """Evidence for every criterion and the registered checks (MW-13.2-b step 2).

        Raises:
            ApplicationError: a criterion names a check that is not registered
                (non-retryable, type ``UnknownCheck``).
        """
        problems: list[str] = []
        evidence: list[Evidence] = []
        by: dict[str, list[Evidence]] = {}
        for e in inp.evidence:
            by.setdefault(e.criterion, []).append(e)
        for c in inp.contract.acceptance_criteria:
            results = {e.result for e in by.get(c.id, [])}
            mine: list[str] = []
            if not results:
                mine.append(f"{c.id}: no Evidence")
            elif inp.review_of is None and c.kind == "deterministic" and results != {"pass"}:
                mine.append(f"{c.id}: Evidence says {', '.join(sorted(results - {'pass'}))}")
            elif inp.review_of is None and "fail" in results:
                mine.append(f"{c.id}: the submitter's Evidence says fail")
            if c.check and inp.review_of is None:
                check = self.checks.get(c.check)
                if check is None:
                    raise ApplicationError(
                        f"check {c.check!r} is not registered",
                        type="UnknownCheck",
                        non_retryable=True,
                    )
                why = check(inp.outputs, inp.evidence)
                if why:
                    mine.append(f"{c.id}: check {c.check}: {why}")
            problems += mine
            if mine:
                ok, summary = False, "; ".join(mine)
            elif inp.review_of is not None:
                ok, summary = True, "reviewer Evidence present"
            elif c.kind == "deterministic":
                ok, summary = (
                    True,
                    "passing Evidence" + (f" and check {c.check}" if c.check else ""),
                )
            else:
                who = "the MissionOwner's Approval" if c.kind == "human" else "a reviewer agent"
                ok, summary = None, f"{c.kind} criterion: judged by {who}"
            evidence.append(
                self._evidence(inp.work_item_id, c.id, "coordinator review", ok, summary)
            )
        return ReviewStep(
            step="deterministic",
            passed=not problems,
            detail="; ".join(problems) or "every criterion has acceptable Evidence",
            evidence=evidence,
        )


__all__ = ["MAX_SCHEMA_BYTES", "Check", "CheckedArtifact", "SubmissionReview"]
