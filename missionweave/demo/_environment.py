"""The target of the audit: a Python environment's distributions (the ``env.inventory`` work).

The environment is one or more site-packages directories: by default the running interpreter's
(``sysconfig``'s ``purelib`` and ``platlib``, and the user site when enabled), or a directory
given with ``--site-packages``. Each ``*.dist-info`` / ``*.egg-info`` directory in them is a
distribution, read with :func:`importlib.metadata.Distribution.at`; a name seen in an earlier
directory shadows a later one, as on ``sys.path``.
"""

from __future__ import annotations

import hashlib
import os
import re
import site
import sys
import sysconfig
from collections.abc import Callable, Collection, Iterable, Sequence
from importlib.metadata import Distribution, PackageMetadata
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._record import licence_of, meta_field, record_paths

INVENTORY_FORMAT: Final = "missionweave.demo/inventory@1"

_NORMALIZE = re.compile(r"[-_.]+")
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9._-]+")


def normalize_name(name: str) -> str:
    """The PEP 503 normalized form of a distribution name (``Typing_Extensions`` →
    ``typing-extensions``)."""
    return _NORMALIZE.sub("-", name).lower()


def _name_digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def id_slug(name: str, taken: Collection[str] = ()) -> str:
    """The part of a verify WorkItem id that names distribution ``name``: its PEP 503 form
    when that holds only ``[a-z0-9-]`` (``typing-extensions``); otherwise every other character
    replaced by ``-``, followed by ``-`` and 8 hex digits of the SHA-256 of ``name`` as
    written (``we ird/../x`` → ``we-ird-x-<digest>``). A slug already in ``taken`` gets the
    digest too (and then a counter), so the ids of one inventory never collide."""
    norm = normalize_name(name)
    slug = _NORMALIZE.sub("-", _NOT_IN_ID.sub("-", norm)).strip("-")
    if slug != norm or not slug:
        slug = f"{slug}-{_name_digest(name)}" if slug else _name_digest(name)
    if slug in taken:
        slug = f"{slug}-{_name_digest(name)}"
    base, n = slug, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    return slug


def default_site_packages() -> list[Path]:
    """The running interpreter's site-packages directories that exist, in ``sys.path`` order
    of precedence: the user site (when enabled), then ``purelib`` and ``platlib``."""
    paths: list[str] = []
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    cfg = sysconfig.get_paths()
    paths += [cfg["purelib"], cfg["platlib"]]
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir() and all(path.resolve() != o.resolve() for o in out):
            out.append(path)
    return out


class DistEntry(BaseModel):
    """One distribution of the inventory.

    Attributes:
        name: its name as its metadata spells it.
        normalized: the PEP 503 form.
        version: its version.
        license: its licence (see :func:`~._record.licence_of`), or ``None``.
        dist_info: absolute path of its ``.dist-info`` directory.
        root: the site-packages directory holding it.
        files_listed: rows of its RECORD (0 without one).
        work_item_id: the ``verify`` WorkItem that checks it.
    """

    model_config = ConfigDict(extra="forbid")
    name: str
    normalized: str
    version: str
    license: str | None = None
    dist_info: str
    root: str
    files_listed: int = Field(ge=0)
    work_item_id: str


class Shadowed(BaseModel):
    """A distribution hidden by one of the same name earlier on the path (not verified)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    version: str
    dist_info: str


class Inventory(BaseModel):
    """The inventory Artifact: what the environment holds and which WorkItem verifies what."""

    model_config = ConfigDict(extra="forbid")
    report_format: Literal["missionweave.demo/inventory@1"] = INVENTORY_FORMAT
    mission_id: str
    paths: list[str] = Field(min_length=1)
    interpreter: str | None = Field(
        default=None, description="sys.executable when the target is the running interpreter"
    )
    python_version: str | None = None
    distributions: list[DistEntry]
    shadowed: list[Shadowed] = Field(default_factory=list)


def _metadata(dist_info: Path) -> PackageMetadata | None:
    try:
        return Distribution.at(dist_info).metadata
    except (TypeError, ValueError):  # neither METADATA nor PKG-INFO
        return None


def _rows(dist_info: Path) -> int:
    try:
        with (dist_info / "RECORD").open("rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def metadata_dirs(path: Path) -> list[Path]:
    """The ``*.dist-info`` and ``*.egg-info`` directories directly in ``path``, sorted."""
    found = [p for p in path.iterdir() if p.suffix in (".dist-info", ".egg-info") and p.is_dir()]
    return sorted(found, key=lambda p: p.name.lower())


def take_inventory(
    paths: Sequence[Path],
    mission_id: str,
    item_id: Callable[[str], str],
    *,
    interpreter: bool = False,
) -> Inventory:
    """List the distributions in ``paths``.

    Args:
        paths: site-packages directories, in order of precedence.
        mission_id: the Mission the inventory is for.
        item_id: the distribution's :func:`id_slug` → the id of the WorkItem that verifies
            it.
        interpreter: the paths are the running interpreter's (recorded in the inventory).

    Returns:
        The inventory, distributions in path order then by name.

    Raises:
        OSError: a directory cannot be listed.
    """
    seen: dict[str, DistEntry] = {}
    slugs: set[str] = set()
    shadowed: list[Shadowed] = []
    for root in paths:
        root = Path(root).absolute()
        for d in metadata_dirs(root):
            meta = _metadata(d)
            stem = d.name.rsplit(".", 1)[0]
            name = meta_field(meta, "Name") or stem.split("-")[0]
            version = meta_field(meta, "Version") or "0"
            norm = normalize_name(name)
            if norm in seen:
                shadowed.append(Shadowed(name=name, version=version, dist_info=str(d)))
                continue
            slug = id_slug(name, slugs)
            slugs.add(slug)
            seen[norm] = DistEntry(
                name=name,
                normalized=norm,
                version=version,
                license=licence_of(meta),
                dist_info=str(d),
                root=str(root),
                files_listed=_rows(d),
                work_item_id=item_id(slug),
            )
    return Inventory(
        mission_id=mission_id,
        paths=[str(Path(p).absolute()) for p in paths],
        interpreter=sys.executable if interpreter else None,
        python_version=".".join(map(str, sys.version_info[:3])) if interpreter else None,
        distributions=list(seen.values()),
        shadowed=shadowed,
    )


def claimed_files(dist_infos: Iterable[str | os.PathLike[str]]) -> frozenset[str]:
    """Every absolute path listed by the RECORDs of ``dist_infos``: the files some
    distribution of the environment owns (never reported as unlisted)."""
    out: set[str] = set()
    for d in dist_infos:
        out |= record_paths(Path(d))
    return frozenset(out)


__all__ = [
    "INVENTORY_FORMAT",
    "DistEntry",
    "Inventory",
    "Shadowed",
    "claimed_files",
    "default_site_packages",
    "id_slug",
    "metadata_dirs",
    "normalize_name",
    "take_inventory",
]
