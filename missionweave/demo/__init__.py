"""``missionweave demo``: an integrity audit of a real Python environment, run as a Mission.

The Mission starts with ``inventory`` (capability ``env.inventory``) and ``sbom``
(``sbom.build``, depending on it). The inventory lists the target's distributions, publishes
the inventory Artifact and adds one ``verify:<dist>`` WorkItem per distribution
(``dist.verify``) with an edge into the SBOM while the Mission runs (MW-10.4-a); each verify
re-hashes the files its RECORD lists and publishes a report; the SBOM (CycloneDX JSON,
``cyclonedx-python-lib``) cites the inventory and every report as its sources, and a reviewer
agent judges that it covers every distribution (MW-13.2-b step 3). See ``docs/demo.md``.

Public names: the verify logic (:func:`verify_distribution`, :func:`parse_record`,
:class:`DistReport`), the inventory (:func:`take_inventory`, :class:`Inventory`), the SBOM
(:func:`build_sbom`, :func:`validate_sbom`), the Mission (:func:`audit_mission`), the
handlers (:func:`demo_registry`), the runner (:func:`run_demo`, :class:`DemoOptions`, and the
checks of its target and data directory, :func:`resolve_target`, :func:`check_data_dir`) and
how a WorkItem id reads without its Mission prefix (:func:`short_id`).
"""

from ._environment import (
    DistEntry,
    Inventory,
    default_site_packages,
    normalize_name,
    take_inventory,
)
from ._handlers import demo_registry
from ._record import (
    DistReport,
    ModifiedFile,
    RecordEntry,
    RecordError,
    parse_record,
    record_digest,
    verify_distribution,
)
from ._runner import (
    DemoError,
    DemoInterrupted,
    DemoOptions,
    LogReports,
    check_data_dir,
    resolve_target,
    run_demo,
)
from ._sbom import build_sbom, coverage_problems, validate_sbom
from ._spec import AGENTS, audit_mission, new_mission_id, short_id
from ._summary import Summary

__all__ = [
    "AGENTS",
    "DemoError",
    "DemoInterrupted",
    "DemoOptions",
    "DistEntry",
    "DistReport",
    "Inventory",
    "LogReports",
    "ModifiedFile",
    "RecordEntry",
    "RecordError",
    "Summary",
    "audit_mission",
    "build_sbom",
    "check_data_dir",
    "coverage_problems",
    "default_site_packages",
    "demo_registry",
    "new_mission_id",
    "normalize_name",
    "parse_record",
    "record_digest",
    "resolve_target",
    "run_demo",
    "short_id",
    "take_inventory",
    "validate_sbom",
    "verify_distribution",
]
