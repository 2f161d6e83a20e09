"""The audit Mission: WorkItem ids, contracts, the MissionSpec, the coordinator's schemas and
deterministic checks, and the demo agents' cards.

The Mission starts with two WorkItems — ``<M>:inventory`` and ``<M>:sbom`` (which depends on
it) — and grows while it runs: the inventory handler adds one ``<M>:verify:<dist>`` per
distribution, each depending on the inventory, with an edge into the SBOM (MW-10.4-a).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..protocol import AcceptanceCriterion, Deliverable, Evidence, WorkContract
from ..protocol.temporal_contract import MissionSpec, OfferPolicy, ReviewPolicy, WorkItemSpec
from ._environment import Inventory
from ._record import DistReport, FilesOfKind, describe_files

if TYPE_CHECKING:
    from ..activities import Check

INVENTORY_CAPABILITY = "env.inventory@1.0"
VERIFY_CAPABILITY = "dist.verify@1.0"
SBOM_CAPABILITY = "sbom.build@1.0"
REVIEW_CAPABILITY = "sbom.review@1.0"

INVENTORY_SCHEMA = "missionweave.demo/inventory@1"
REPORT_SCHEMA = "missionweave.demo/dist-report@1"
SBOM_SCHEMA = "missionweave.demo/cyclonedx-sbom@1"
SBOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"

#: The most WorkItems one ``authorize_work`` update carries (keeps its payload small).
AUTHORIZE_CHUNK = 50

_MAX_ID = 120  # the Authority allows 128; a review item appends ":review"


def new_mission_id(now: datetime | None = None) -> str:
    """A fresh Mission id, ``audit-YYYYMMDD-HHMMSS-xxxx`` (UTC, 4 random hex digits): WorkItem
    ids are unique per Group, so every run gets its own."""
    t = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"audit-{t}-{secrets.token_hex(2)}"


def inventory_id(mission_id: str) -> str:
    """``<mission>:inventory``."""
    return f"{mission_id}:inventory"


def sbom_id(mission_id: str) -> str:
    """``<mission>:sbom``."""
    return f"{mission_id}:sbom"


def verify_id(mission_id: str, slug: str) -> str:
    """``<mission>:verify:<slug>`` — the slug being the distribution's name in a form the
    Authority accepts in ids (:func:`~._environment.id_slug`) — shortened with a digest when
    too long."""
    wid = f"{mission_id}:verify:{slug}"
    if len(wid) <= _MAX_ID:
        return wid
    tail = hashlib.sha256(slug.encode()).hexdigest()[:8]
    return wid[: _MAX_ID - 9] + "-" + tail


def short_id(mission_id: str, work_item_id: str) -> str:
    """A WorkItem id without its Mission prefix, for display."""
    return work_item_id.removeprefix(mission_id + ":")


# ------------------------------------------------------------------------------ contracts

_TIMEOUTS = {"start_deadline_ms": 300_000, "lease_ms": 30_000, "heartbeat_ms": 5_000}


def _contract(
    objective: str,
    deliverable: Deliverable,
    criteria: list[AcceptanceCriterion],
    capability: str,
    *,
    attempts: int,
    backoff_ms: int,
    operations: Sequence[str] = (),
    lease_ms: int = _TIMEOUTS["lease_ms"],
) -> WorkContract:
    """A demo WorkItem's contract: one deliverable, one capability, the demo's timeouts
    (``lease_ms`` aside) and a retry of ``attempts`` starting ``backoff_ms`` apart."""
    return WorkContract(
        objective=objective,
        deliverables=[deliverable],
        acceptance_criteria=criteria,
        required_capabilities=[capability],
        timeouts={**_TIMEOUTS, "lease_ms": lease_ms},
        retry={"max_attempts": attempts, "initial_backoff_ms": backoff_ms},
        allowed_operations=list(operations),
    )


def inventory_contract() -> WorkContract:
    """The contract of ``<M>:inventory`` (capability ``env.inventory@1.0``)."""
    listed = AcceptanceCriterion(
        id="listed",
        description="every distribution of the target is listed and has a verify WorkItem",
        evidence_required="the number of distributions and the directories scanned",
        check="inventory_listed",
    )
    return _contract(
        "List the distributions of the target Python environment and add one verify WorkItem "
        "per distribution to the Mission",
        Deliverable(name="inventory", schema_id=INVENTORY_SCHEMA),
        [listed],
        INVENTORY_CAPABILITY,
        attempts=3,
        backoff_ms=1_000,
        operations=["read:site-packages", "mission:authorize_work"],
    )


def verify_contract(name: str, version: str) -> WorkContract:
    """The contract of ``<M>:verify:<dist>`` (capability ``dist.verify@1.0``)."""
    files_match = AcceptanceCriterion(
        id="files_match",
        description="all listed files match",
        evidence_required="the number of files hashed; every missing or modified file",
        check="files_match",
    )
    return _contract(
        f"Check every file the RECORD of {name} {version} lists against its hash",
        Deliverable(name="report", schema_id=REPORT_SCHEMA),
        [files_match],
        VERIFY_CAPABILITY,
        attempts=2,
        backoff_ms=500,
        operations=["read:site-packages"],
    )


def sbom_contract(*, require_approval: bool = False) -> WorkContract:
    """The contract of ``<M>:sbom`` (capability ``sbom.build@1.0``): a valid CycloneDX SBOM
    (deterministic), covering every distribution of the inventory (semantic: a reviewer
    agent's WorkItem judges it) and, with ``require_approval``, a MissionOwner's sign-off."""
    criteria = [
        AcceptanceCriterion(
            id="valid_cyclonedx",
            description="the SBOM is valid CycloneDX 1.6 JSON",
            evidence_required="the strict schema validation's result",
            check="sbom_complete",
        ),
        AcceptanceCriterion(
            id="covers_inventory",
            kind="semantic",
            description="the SBOM names every distribution of the inventory, with its "
            "version and the hash of its verify report",
            evidence_required="a reviewer's comparison of the SBOM with the inventory",
        ),
    ]
    if require_approval:
        criteria.append(
            AcceptanceCriterion(
                id="signoff",
                kind="human",
                description="a MissionOwner signs the SBOM off",
                evidence_required="a MissionOwner's Approval",
            )
        )
    return _contract(
        "Build a CycloneDX JSON SBOM of the environment whose provenance points at the "
        "inventory and every verify report",
        Deliverable(name="sbom", media_type=SBOM_MEDIA_TYPE, schema_id=SBOM_SCHEMA),
        criteria,
        SBOM_CAPABILITY,
        attempts=3,
        backoff_ms=1_000,
        lease_ms=60_000,
    )


def verify_items(mission_id: str, inventory: Inventory) -> list[WorkItemSpec]:
    """One ``verify`` WorkItem per distribution of ``inventory``, each depending on the
    inventory item; its input names the distribution's ``.dist-info``."""
    return [
        WorkItemSpec(
            work_item_id=d.work_item_id,
            contract=verify_contract(d.name, d.version),
            dependencies=[inventory_id(mission_id)],
            input={"name": d.name, "dist_info": d.dist_info},
        )
        for d in inventory.distributions
    ]


def audit_mission(
    group_id: str,
    mission_id: str,
    paths: list[str],
    *,
    interpreter: bool,
    require_approval: bool = False,
) -> MissionSpec:
    """The audit's MissionSpec: ``inventory`` and ``sbom`` (depending on it); the verify
    WorkItems are added while it runs.

    Args:
        group_id: the Group.
        mission_id: a fresh Mission id (:func:`new_mission_id`).
        paths: the site-packages directories to audit.
        interpreter: the paths are the running interpreter's.
        require_approval: the SBOM needs a MissionOwner's Approval.
    """
    inv, sbom = inventory_id(mission_id), sbom_id(mission_id)
    title = f"Integrity audit of {paths[0]}" + (f" (+{len(paths) - 1})" if len(paths) > 1 else "")
    return MissionSpec(
        group_id=group_id,
        mission_id=mission_id,
        title=title,
        items=[
            WorkItemSpec(
                work_item_id=inv,
                contract=inventory_contract(),
                input={"paths": paths, "interpreter": interpreter, "sbom_item": sbom},
            ),
            WorkItemSpec(
                work_item_id=sbom,
                dependencies=[inv],
                contract=sbom_contract(require_approval=require_approval),
                input={"inventory_item": inv},
            ),
        ],
        offer_policy=OfferPolicy(offer_ttl_ms=10_000, reoffer_backoff_ms=5_000),
        review=ReviewPolicy(reviewer_capability=REVIEW_CAPABILITY),
    )


# ------------------------------------------------------------------ the coordinator's review

SBOM_STRUCTURE: dict[str, Any] = {
    "type": "object",
    "required": ["bomFormat", "specVersion", "components"],
    "properties": {
        "bomFormat": {"const": "CycloneDX"},
        "specVersion": {"enum": ["1.5", "1.6"]},
        "serialNumber": {"type": "string", "pattern": "^urn:uuid:"},
        "components": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "name", "version", "purl", "bom-ref"],
                "properties": {"name": {"type": "string", "minLength": 1},
                               "purl": {"type": "string", "pattern": "^pkg:pypi/"}},
            },
        },
    },
}  # fmt: skip


def schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schemas the coordinator validates deliverables against (review step 1)."""
    return {
        INVENTORY_SCHEMA: Inventory.model_json_schema(),
        REPORT_SCHEMA: DistReport.model_json_schema(),
        SBOM_SCHEMA: SBOM_STRUCTURE,
    }


def _int(outputs: Mapping[str, Any], key: str) -> int:
    value = outputs.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def check_inventory_listed(outputs: Mapping[str, Any], evidence: list[Evidence]) -> str | None:
    """Deterministic check: at least one distribution, and one verify WorkItem for each."""
    n, items = _int(outputs, "distributions"), _int(outputs, "verify_items")
    if n < 1:
        return "no distribution listed"
    return None if items == n else f"{items} verify WorkItems for {n} distributions"


def check_files_match(outputs: Mapping[str, Any], evidence: list[Evidence]) -> str | None:
    """Deterministic check of a verify submission: a RECORD, nothing missing, modified or
    hashed with an unknown algorithm; a failure names the first files of each kind."""
    if outputs.get("record") is not True:
        return "no usable RECORD"
    bad = {k: _int(outputs, k) for k in ("missing", "modified", "unsupported")}
    if any(v < 0 for v in bad.values()):
        return "no count of missing, modified and unsupported files"
    if any(bad.values()):
        listed = outputs.get("files_by_kind")
        listed = listed if isinstance(listed, dict) else {}
        return describe_files(FilesOfKind(k, _strs(listed.get(k)), n) for k, n in bad.items() if n)
    return None


def check_sbom_complete(outputs: Mapping[str, Any], evidence: list[Evidence]) -> str | None:
    """Deterministic check of the SBOM submission: one component and one report per
    distribution."""
    n = _int(outputs, "distributions")
    got = {k: _int(outputs, k) for k in ("components", "reports")}
    wrong = [f"{v} {k}" for k, v in got.items() if v != n]
    return f"{', '.join(wrong)} for {n} distributions" if wrong else None


def checks() -> dict[str, Check]:
    """The coordinator's deterministic checks by name (review step 2)."""
    return {
        "inventory_listed": check_inventory_listed,
        "files_match": check_files_match,
        "sbom_complete": check_sbom_complete,
    }


# --------------------------------------------------------------------------------- agents


@dataclass(frozen=True, slots=True)
class DemoAgent:
    """One demo agent: its id, capabilities, execution slots, queue bound and roles."""

    agent_id: str
    capabilities: tuple[str, ...]
    max_concurrency: int
    max_queue_depth: int
    roles: tuple[str, ...] = ("worker",)


#: Different capabilities and concurrency, so offers, declines and parallel executions show
#: in the log. ``verifier-2`` takes only work it can start at once (queue 0): offered a
#: WorkItem while busy — the coordinator counts one queue place per slot — it declines with
#: ``capacity``, and the WorkItem goes to the next-ranked agent.
AGENTS: tuple[DemoAgent, ...] = (
    DemoAgent("surveyor", (INVENTORY_CAPABILITY, SBOM_CAPABILITY), 1, 4),
    DemoAgent("verifier-1", (VERIFY_CAPABILITY,), 3, 32),
    DemoAgent("verifier-2", (VERIFY_CAPABILITY,), 1, 0),
    DemoAgent("reviewer", (REVIEW_CAPABILITY,), 1, 4, ("worker", "reviewer")),
)

#: The MissionOwner whose key signs an Approval (``--require-approval``).
OWNER_ID = "owner"


__all__ = [
    "AGENTS",
    "AUTHORIZE_CHUNK",
    "INVENTORY_CAPABILITY",
    "INVENTORY_SCHEMA",
    "OWNER_ID",
    "REPORT_SCHEMA",
    "REVIEW_CAPABILITY",
    "SBOM_CAPABILITY",
    "SBOM_MEDIA_TYPE",
    "SBOM_SCHEMA",
    "VERIFY_CAPABILITY",
    "DemoAgent",
    "audit_mission",
    "check_files_match",
    "check_inventory_listed",
    "check_sbom_complete",
    "checks",
    "inventory_contract",
    "inventory_id",
    "new_mission_id",
    "sbom_contract",
    "sbom_id",
    "schemas",
    "short_id",
    "verify_contract",
    "verify_id",
    "verify_items",
]
