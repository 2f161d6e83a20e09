"""The CycloneDX SBOM of the audited environment (the ``sbom.build`` work), built and validated
with ``cyclonedx-python-lib``.

One ``library`` component per distribution of the inventory — name, version, ``pkg:pypi``
purl, licence — whose properties name the SHA-256 of its verify report and the files that
report checked; the metadata names the inventory's hash and the Mission. The SBOM Artifact's
manifest lists the inventory and every report as its sources (MW-13.1-c).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from cyclonedx.model import Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

try:  # its home since cyclonedx-python-lib 11; the old path warns there
    from cyclonedx.contrib.license.factories import LicenseFactory
except ImportError:  # pragma: no cover - older releases
    from cyclonedx.factory.license import LicenseFactory

from ._environment import DistEntry, Inventory
from ._record import DistReport

SPEC_VERSION = "1.6"
REPORT_PROPERTY = "missionweave:verify-report-sha256"
FILES_PROPERTY = "missionweave:files-checked"


def _tool_version() -> str:
    try:
        return package_version("missionweave")
    except PackageNotFoundError:
        return "0"


def purl_of(dist: DistEntry) -> str:
    """``pkg:pypi/<normalized name>@<version>``."""
    return str(PackageURL(type="pypi", name=dist.normalized, version=dist.version))


def build_sbom(
    inventory: Inventory,
    inventory_hash: str,
    reports: Mapping[str, tuple[str, DistReport]],
) -> str:
    """The CycloneDX 1.6 JSON SBOM of ``inventory``.

    Args:
        inventory: the inventory Artifact's content.
        inventory_hash: its SHA-256 (recorded in the metadata; the serial number derives from
            it and the Mission id).
        reports: verify WorkItem id → (its report's SHA-256, the report).

    Returns:
        The SBOM as indented JSON text.

    Raises:
        KeyError: a distribution of the inventory has no report.
    """
    licences = LicenseFactory()
    bom = Bom(
        serial_number=uuid.uuid5(
            uuid.NAMESPACE_URL, f"missionweave:{inventory.mission_id}:{inventory_hash}"
        )
    )
    bom.metadata.tools.components.add(
        Component(name="missionweave", version=_tool_version(), type=ComponentType.APPLICATION)
    )
    root = bom.metadata.component = Component(
        name="python-environment",
        type=ComponentType.PLATFORM,
        bom_ref="environment",
        version=inventory.python_version or "unknown",
        description="site-packages: " + ", ".join(inventory.paths),
    )
    bom.metadata.properties.update(
        [
            Property(name="missionweave:mission", value=inventory.mission_id),
            Property(name="missionweave:inventory-sha256", value=inventory_hash),
        ]
    )
    for dist in inventory.distributions:
        report_hash, report = reports[dist.work_item_id]
        lic = report.license or dist.license
        bom.components.add(
            Component(
                name=dist.name,
                version=dist.version,
                type=ComponentType.LIBRARY,
                bom_ref=purl_of(dist),
                purl=PackageURL(type="pypi", name=dist.normalized, version=dist.version),
                licenses=[licences.make_from_string(lic)] if lic else None,
                properties=[
                    Property(name=REPORT_PROPERTY, value=report_hash),
                    Property(name=FILES_PROPERTY, value=str(report.files_hashed)),
                ],
            )
        )
    # the environment holds every distribution: a complete dependency graph from its root
    bom.register_dependency(root, bom.components)
    text: str = JsonV1Dot6(bom).output_as_string(indent=2)
    return text


def validate_sbom(text: str) -> str | None:
    """Validate ``text`` against the CycloneDX 1.6 JSON schema (strict): ``None`` when valid,
    else the first error in one line."""
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    return None if error is None else str(error).splitlines()[0][:500]


def sbom_components(text: str) -> dict[str, dict[str, Any]]:
    """The SBOM's components by purl: ``{purl: {"name", "version", "report"}}`` (the report
    hash from the component's properties, or ``None``).

    Raises:
        ValueError: ``text`` is not a JSON object with a ``components`` list.
    """
    data = json.loads(text)
    comps = data.get("components") if isinstance(data, dict) else None
    if not isinstance(comps, list):
        raise ValueError("no components list")
    out: dict[str, dict[str, Any]] = {}
    for c in comps:
        if not isinstance(c, dict):
            continue
        props = {
            p.get("name"): p.get("value") for p in c.get("properties", []) if isinstance(p, dict)
        }
        out[str(c.get("purl", ""))] = {
            "name": c.get("name"),
            "version": c.get("version"),
            "report": props.get(REPORT_PROPERTY),
        }
    return out


def coverage_problems(inventory: Inventory, text: str) -> list[str]:
    """What the SBOM lacks against the inventory: each distribution absent (by purl), with
    another version, or without a report hash; empty when it covers every one."""
    comps = sbom_components(text)
    problems: list[str] = []
    for d in inventory.distributions:
        c = comps.get(purl_of(d))
        if c is None:
            problems.append(f"{d.name} {d.version} missing")
        elif c["version"] != d.version:
            problems.append(f"{d.name}: version {c['version']} instead of {d.version}")
        elif not c["report"]:
            problems.append(f"{d.name}: no verify report hash")
    extra = sorted(set(comps) - {purl_of(d) for d in inventory.distributions})
    if extra:
        problems.append(f"{len(extra)} component(s) not in the inventory: {', '.join(extra[:5])}")
    return problems


__all__ = [
    "FILES_PROPERTY",
    "REPORT_PROPERTY",
    "SPEC_VERSION",
    "build_sbom",
    "coverage_problems",
    "purl_of",
    "sbom_components",
    "validate_sbom",
]
