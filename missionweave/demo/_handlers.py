"""The demo agents' work handlers: ``env.inventory``, ``dist.verify``, ``sbom.build`` and the
reviewer's ``sbom.review``.

* **inventory** lists the distributions of the target, publishes the inventory Artifact, then
  adds one ``verify`` WorkItem per distribution with an edge into the SBOM item —
  ``ctx.authorize_work`` — *before* it submits, so the SBOM cannot become eligible and the
  Mission cannot finish first (MW-10.4-a);
* **verify** re-hashes every file the distribution's RECORD lists and publishes its report;
  its Evidence for "all listed files match" names every missing or modified file;
* **sbom** builds the CycloneDX SBOM from the inventory and every report, validates it, and
  publishes it with the inventory and the reports as its sources (MW-13.1-c);
* **review** (a reviewer agent's review WorkItem, MW-13.2-b step 3) compares the SBOM with the
  inventory and each component's report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import lru_cache, partial
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..protocol import Evidence, RejectionCode
from ..protocol.temporal_contract import ReviewRequest
from ..worker import (
    HandlerRegistry,
    Pause,
    PermanentFailure,
    Submission,
    WorkAuthorizationRejected,
    WorkContext,
    handler,
)
from ._environment import Inventory, claimed_files, metadata_dirs, take_inventory
from ._record import SHOWN_PER_KIND, DistReport, describe_files, one_line, verify_distribution
from ._sbom import build_sbom, coverage_problems, sbom_components, validate_sbom
from ._spec import (
    AUTHORIZE_CHUNK,
    INVENTORY_CAPABILITY,
    INVENTORY_SCHEMA,
    REPORT_SCHEMA,
    REVIEW_CAPABILITY,
    SBOM_CAPABILITY,
    SBOM_MEDIA_TYPE,
    SBOM_SCHEMA,
    VERIFY_CAPABILITY,
    verify_id,
    verify_items,
)

#: ``async (group_id, mission_id, work_item_ids) -> {verified item: its submitted Artifact
#: hashes}``: where the SBOM handler finds verify reports its ``dependency_artifacts`` lack.
ReportLookup = Callable[[str, str, Sequence[str]], Awaitable[dict[str, list[str]]]]

#: How often the SBOM handler looks again for reports not yet verified, seconds.
REPORT_POLL_S = 1.0
#: Files named per kind in a verify's Evidence summary (at most 2,000 characters in all).
EVIDENCE_FILES = 50

_MODEL = ConfigDict(extra="forbid")


class InventoryInput(BaseModel):
    """Input of ``<M>:inventory``: the site-packages directories and the SBOM item's id."""

    model_config = _MODEL
    paths: list[str]
    interpreter: bool = False
    sbom_item: str


class VerifyInput(BaseModel):
    """Input of ``<M>:verify:<dist>``: the distribution and its ``.dist-info`` directory."""

    model_config = _MODEL
    name: str
    dist_info: str


class SbomInput(BaseModel):
    """Input of ``<M>:sbom``: the inventory item whose Artifact lists the distributions."""

    model_config = _MODEL
    inventory_item: str


def _version(dist: str) -> str:
    try:
        return package_version(dist)
    except PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------------------ inventory


@handler("env.inventory", version="1.0", estimate_ms=5_000)
async def inventory(ctx: WorkContext, inp: InventoryInput) -> Submission:
    """List the target's distributions, publish the inventory, add the verify WorkItems
    (an unreadable directory fails the WorkItem for good)."""
    await ctx.guard()
    paths = [Path(p) for p in inp.paths]
    try:
        inv = await asyncio.to_thread(
            take_inventory,
            paths,
            ctx.mission_id,
            partial(verify_id, ctx.mission_id),
            interpreter=inp.interpreter,
        )
    except OSError as exc:
        raise PermanentFailure(f"cannot list the target: {exc}") from exc
    ref = await ctx.publish(
        inv.model_dump_json().encode(),
        "application/json",
        schema_id=INVENTORY_SCHEMA,
        tool_versions={"python": inv.python_version or "unknown"},
    )
    items = verify_items(ctx.mission_id, inv)
    done = int((ctx.checkpoint or {}).get("authorized", 0))
    for start in range(done, len(items), AUTHORIZE_CHUNK):
        chunk = items[start : start + AUTHORIZE_CHUNK]
        try:
            await ctx.authorize_work(chunk, [(i.work_item_id, inp.sbom_item) for i in chunk])
        except WorkAuthorizationRejected as exc:
            # ids are derived from the Mission and the names: an earlier attempt added them
            if exc.code != RejectionCode.DUPLICATE_ID:
                raise PermanentFailure(f"verify WorkItems not added: {exc}") from exc
        await ctx.save({"authorized": start + len(chunk)}, phase="authorizing")
    await ctx.report("inventoried", milestones=[f"{len(items)} verify WorkItems added"])
    n = len(inv.distributions)
    where = ", ".join(inv.paths)
    return Submission(
        outputs={
            "inventory": ref.hash,
            "distributions": n,
            "verify_items": len(items),
            "shadowed": len(inv.shadowed),
            "paths": inv.paths,
        },
        evidence=[
            ctx.evidence(
                "listed",
                method="importlib.metadata over *.dist-info",
                summary=f"{n} distributions in {where}"[:2000],
                artifacts=[ref.hash],
            )
        ],
    )


# --------------------------------------------------------------------------------- verify


@lru_cache(maxsize=8)
def _claimed(root: str, mission_id: str) -> frozenset[str]:
    """Files owned by any distribution in ``root``, once per Mission (not reported as
    unlisted)."""
    return claimed_files(metadata_dirs(Path(root)))


def _verify(dist_info: str, mission_id: str) -> DistReport:
    path = Path(dist_info).absolute()
    if not path.is_dir():
        raise PermanentFailure(f"{path} is not a directory")
    report = verify_distribution(path, _claimed(str(path.parent), mission_id))
    # the Mission's own report: another Mission's identical bytes could not be published here
    return report.model_copy(update={"mission_id": mission_id})


def evidence_summary(report: DistReport) -> str:
    """One line for the Evidence of "all listed files match", naming every bad file."""
    if report.files_match:
        return (
            f"{report.files_hashed} listed files match their sha256 "
            f"({report.files_unhashed} listed without hash, {len(report.unlisted)} "
            f"unlisted, {report.unlisted_bytecode} unlisted bytecode)"
        )
    if not report.record:
        return one_line(f"{report.name} {report.version}: {report.record_error or 'no RECORD'}")
    return describe_files(report.problems_by_kind(), limit=EVIDENCE_FILES)[:2000]


@handler("dist.verify", version="1.0", estimate_ms=2_000)
async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
    """Re-hash every file of one distribution's RECORD; publish the report."""
    await ctx.guard()
    report = await asyncio.to_thread(_verify, inp.dist_info, ctx.mission_id)
    ref = await ctx.publish(
        report.model_dump_json().encode(), "application/json", schema_id=REPORT_SCHEMA
    )
    return Submission(
        outputs={
            "report": ref.hash,
            "name": report.name,
            "version": report.version,
            "license": report.license,
            "record": report.record,
            "files_listed": report.files_listed,
            "files_hashed": report.files_hashed,
            "bytes_hashed": report.bytes_hashed,
            **{
                k: report.counts.get(k, 0)
                for k in ("missing", "modified", "unsupported", "unlisted")
            },
            "unlisted_bytecode": report.unlisted_bytecode,
            "files_by_kind": {
                k.kind: list(k.paths[:SHOWN_PER_KIND]) for k in report.problems_by_kind()
            },
        },
        evidence=[
            ctx.evidence(
                "files_match",
                "pass" if report.files_match else "fail",
                method="RECORD hash and size re-check",
                summary=evidence_summary(report),
                artifacts=[ref.hash],
            )
        ],
    )


# ----------------------------------------------------------------------------------- sbom


async def _reports(
    ctx: WorkContext, wanted: list[str], lookup: ReportLookup | None
) -> dict[str, list[str]] | Pause:
    """Each verify item's submitted Artifacts: from ``dependency_artifacts``, else (an edge
    the workflow does not hand over) from ``lookup``, waiting until every one is verified."""
    found = {w: ctx.dependency_artifacts[w] for w in wanted if ctx.dependency_artifacts.get(w)}
    while lookup is not None and len(found) < len(wanted):
        missing = [w for w in wanted if w not in found]
        found.update(await lookup(ctx.group_id, ctx.mission_id, missing))
        if len(found) == len(wanted):
            break
        if ctx.should_pause():
            return ctx.pause({"waiting_for": len(wanted) - len(found)})
        await ctx.report(
            "waiting for verify reports",
            blockers=[f"{len(wanted) - len(found)} verify WorkItems not verified"],
        )
        await asyncio.sleep(REPORT_POLL_S)
    return found


def _criteria_evidence(
    ctx: WorkContext, results: dict[str, tuple[str, str]], artifacts: Iterable[str]
) -> list[Evidence]:
    """Evidence for every criterion of the contract; a ``human`` one is left to the
    MissionOwner (``inconclusive``: ready for sign-off)."""
    out = []
    for c in ctx.contract.acceptance_criteria:
        result, summary = results.get(c.id, ("inconclusive", "ready for sign-off"))
        out.append(
            ctx.evidence(
                c.id,
                result,
                method=f"{c.kind} self-check",
                summary=summary,
                artifacts=list(artifacts),
            )
        )
    return out


async def sbom(ctx: WorkContext, inp: SbomInput, lookup: ReportLookup | None) -> Submission | Pause:
    """Build, validate and publish the CycloneDX SBOM of the inventory."""
    await ctx.guard()
    inv_hashes = ctx.dependency_artifacts.get(inp.inventory_item) or []
    if not inv_hashes:
        raise PermanentFailure(f"{inp.inventory_item} handed over no inventory Artifact")
    inv_hash = inv_hashes[0]
    inv = Inventory.model_validate_json(await ctx.fetch(inv_hash))
    wanted = [d.work_item_id for d in inv.distributions]
    found = await _reports(ctx, wanted, lookup)
    if isinstance(found, Pause):
        return found
    lost = [w for w in wanted if w not in found]
    if lost:  # retryable: the reports may be found on the next attempt
        raise RuntimeError(f"no verify report for {len(lost)} item(s): {', '.join(lost[:5])}")
    reports: dict[str, tuple[str, DistReport]] = {}
    for w in wanted:
        h = found[w][0]
        reports[w] = (h, DistReport.model_validate_json(await ctx.fetch(h)))
    await ctx.guard()
    text = await asyncio.to_thread(build_sbom, inv, inv_hash, reports)
    invalid = await asyncio.to_thread(validate_sbom, text)
    sources = [inv_hash, *(h for h, _ in reports.values())]
    ref = await ctx.publish(
        text.encode(),
        SBOM_MEDIA_TYPE,
        schema_id=SBOM_SCHEMA,
        sources=sources,
        tool_versions={"cyclonedx-python-lib": _version("cyclonedx-python-lib")},
    )
    gaps = coverage_problems(inv, text)
    n = len(inv.distributions)
    results = {
        "valid_cyclonedx": ("fail", invalid)
        if invalid
        else ("pass", "valid CycloneDX 1.6 JSON (strict schema validation)"),
        "covers_inventory": ("fail", "; ".join(gaps)[:2000])
        if gaps
        else ("pass", f"{n} components for {n} distributions, each with its report hash"),
    }
    return Submission(
        outputs={
            "sbom": ref.hash,
            "inventory": inv_hash,
            "distributions": n,
            "components": len(sbom_components(text)),
            "reports": len(reports),
            "spec_version": "1.6",
        },
        evidence=_criteria_evidence(ctx, results, [ref.hash]),
    )


# --------------------------------------------------------------------------------- review


@handler("sbom.review", version="1.0", estimate_ms=5_000)
async def review(ctx: WorkContext, req: ReviewRequest) -> Submission:
    """Judge whether the SBOM covers every distribution of the inventory, each component
    pointing at a report of that very distribution whose files all match."""
    await ctx.guard()
    inv_hash, sbom_hash = req.outputs.get("inventory"), req.outputs.get("sbom")
    problems: list[str] = []
    summary = ""
    if not isinstance(inv_hash, str) or not isinstance(sbom_hash, str):
        problems.append("the submission names no inventory or SBOM Artifact")
    else:
        inv = Inventory.model_validate_json(await ctx.fetch(inv_hash))
        text = (await ctx.fetch(sbom_hash)).decode("utf-8")
        try:
            problems += coverage_problems(inv, text)
            comps = sbom_components(text)
        except ValueError as exc:
            problems.append(f"SBOM unreadable: {exc}")
            comps = {}
        for comp in comps.values():
            try:
                rep = DistReport.model_validate_json(await ctx.fetch(str(comp["report"])))
            except (ValueError, ValidationError, LookupError) as exc:
                problems.append(f"{comp['name']}: report unreadable ({type(exc).__name__})")
                continue
            if (rep.name, rep.version) != (comp["name"], comp["version"]) or not rep.files_match:
                problems.append(
                    f"{comp['name']}: its report is of {rep.name} {rep.version}, "
                    f"files_match={rep.files_match}"
                )
        if not problems:
            summary = (
                f"all {len(inv.distributions)} distributions of the inventory are in "
                "the SBOM with their version and a clean verify report"
            )
    verdict = "fail" if problems else "pass"
    text_ = "; ".join(problems)[:2000] if problems else summary
    # the review's deliverable names what it read; its Evidence cites only Artifacts it
    # submits itself (none), so the reviewed ones are in the output, not in ``artifacts``
    return Submission(
        outputs={
            "review": {
                "verdict": verdict,
                "inventory": inv_hash,
                "sbom": sbom_hash,
                "problems": problems[:50],
            }
        },
        evidence=[
            ctx.evidence(
                c.id,
                verdict,
                method="inventory and SBOM comparison",
                summary=text_,
                subject=req.subject,
            )
            for c in req.criteria
        ],
    )


# ------------------------------------------------------------------------------ registries


def demo_registry(
    capabilities: Iterable[str], lookup: ReportLookup | None = None
) -> HandlerRegistry:
    """A registry with the demo handlers for ``capabilities`` (``id@version`` strings).

    Args:
        capabilities: which of ``env.inventory@1.0``, ``dist.verify@1.0``, ``sbom.build@1.0``
            and ``sbom.review@1.0`` the agent serves.
        lookup: where the SBOM handler finds verified reports that its
            ``dependency_artifacts`` lack (see :class:`~._runner.LogReports`).

    Raises:
        KeyError: an unknown capability.
    """

    @handler("sbom.build", version="1.0", estimate_ms=10_000)
    async def build(ctx: WorkContext, inp: SbomInput) -> Submission | Pause:
        return await sbom(ctx, inp, lookup)

    table: dict[str, Callable[..., Any]] = {
        INVENTORY_CAPABILITY: inventory,
        VERIFY_CAPABILITY: verify,
        SBOM_CAPABILITY: build,
        REVIEW_CAPABILITY: review,
    }
    return HandlerRegistry(table[cap] for cap in sorted(set(capabilities)))


__all__ = [
    "InventoryInput",
    "ReportLookup",
    "SbomInput",
    "VerifyInput",
    "demo_registry",
    "evidence_summary",
    "inventory",
    "review",
    "sbom",
    "verify",
]
