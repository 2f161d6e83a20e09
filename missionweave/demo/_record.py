"""Integrity of one installed distribution against its ``RECORD`` (the ``dist.verify`` work).

A wheel installer writes ``<name>-<version>.dist-info/RECORD``: one CSV row per installed file,
``path,hash,size``, where ``hash`` is ``<algorithm>=<urlsafe base64 digest without padding>``
(``sha256=…``) and paths are relative to the directory holding the ``.dist-info`` (the
site-packages directory; scripts may sit outside it, ``../../bin/…``). Rows without a hash —
``RECORD`` itself, sometimes bytecode — are only checked for existence.

:func:`verify_distribution` re-hashes every listed file and reports what is **missing**, what
is **modified** (digest or size differ), and which files lie in the distribution's own
directories without being listed by it or by any other distribution of the environment
(**unlisted**; bytecode caches, which the interpreter writes after installation, are only
counted). It is pure file reading, safe to run in a thread.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from email.message import Message
from importlib.metadata import Distribution, PackageMetadata
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

#: At most this many paths are listed per kind in a report (the counts stay exact).
MAX_LISTED = 1000

REPORT_FORMAT: Final = "missionweave.demo/dist-report@1"


@dataclass(frozen=True, slots=True)
class RecordEntry:
    """One row of a ``RECORD`` file.

    Attributes:
        path: the path as written (``/``-separated, relative to the site-packages directory).
        algorithm: the hash algorithm (``sha256``), or ``None`` for a row without a hash.
        digest: the urlsafe base64 digest without padding, or ``None``.
        size: the size in bytes, or ``None`` when not given.
    """

    path: str
    algorithm: str | None
    digest: str | None
    size: int | None


class RecordError(ValueError):
    """A ``RECORD`` row that cannot be parsed (the message names the row)."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """``text`` with control characters — a line break in a quoted RECORD field, say — written
    as escapes (``\\n``), so that a message naming it stays one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def record_text(data: bytes) -> str:
    """The text of a ``RECORD`` file.

    Raises:
        RecordError: it is not UTF-8 (the message names RECORD, the byte and its offset).
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise RecordError(
            f"RECORD is not UTF-8 text (byte 0x{bad} at offset {exc.start})"
        ) from None


def parse_record(text: str) -> list[RecordEntry]:
    """Parse the CSV text of a ``RECORD`` file.

    Raises:
        RecordError: the text is not CSV, or a row has no path, a hash that is not
            ``algorithm=digest``, or a size that is not a non-negative integer.
    """
    out: list[RecordEntry] = []
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:  # a NUL byte, a field over the csv module's limit
        raise RecordError(f"RECORD is not CSV text ({one_line(str(exc))})") from None
    for n, row in enumerate(rows, start=1):
        if not row or not any(cell.strip() for cell in row):
            continue
        path = row[0].strip()
        raw_hash = row[1].strip() if len(row) > 1 else ""
        raw_size = row[2].strip() if len(row) > 2 else ""
        if not path:
            raise RecordError(f"RECORD row {n}: no path")
        algorithm = digest = None
        if raw_hash:
            algorithm, sep, digest = raw_hash.partition("=")
            if not sep or not algorithm or not digest:
                raise RecordError(f"RECORD row {n}: hash {raw_hash!r} is not algorithm=digest")
        size = None
        if raw_size:
            if not raw_size.isdigit():
                raise RecordError(f"RECORD row {n}: size {raw_size!r} is not an integer")
            size = int(raw_size)
        out.append(RecordEntry(path, algorithm, digest, size))
    return out


def record_digest(data: bytes, algorithm: str = "sha256") -> str:
    """``<algorithm>=<urlsafe base64 digest, no padding>`` of ``data``, as RECORD writes it.

    Raises:
        ValueError: ``hashlib`` has no such algorithm.
    """
    h = hashlib.new(algorithm, data)
    return f"{algorithm}=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")


def file_digest(path: Path, algorithm: str) -> tuple[str, int]:
    """``(<algorithm>=<digest>, size in bytes)`` of the file at ``path`` (``hashlib.file_digest``).

    Raises:
        ValueError: ``hashlib`` has no such algorithm.
        OSError: the file cannot be read.
    """
    with path.open("rb") as f:
        h = hashlib.file_digest(f, algorithm)
        size = f.tell()
    encoded = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")
    return f"{algorithm}={encoded}", size


@dataclass(frozen=True, slots=True)
class FilesOfKind:
    """Files of one kind of problem: ``paths`` (maybe only the first ones) of ``count``."""

    kind: str
    paths: Sequence[str]
    count: int


#: Files named per kind in a one-line description (:func:`describe_files`).
SHOWN_PER_KIND = 5


def describe_files(kinds: Iterable[FilesOfKind], limit: int = SHOWN_PER_KIND) -> str:
    """One line naming the files per kind, at most ``limit`` each:
    ``missing: a.pyc; modified: six.py, b.py … 3 more`` (control characters escaped)."""
    parts = []
    for k in kinds:
        shown = [one_line(p) for p in k.paths[:limit]]
        more = k.count - len(shown)
        if not shown:
            parts.append(f"{k.kind}: {k.count} file{'s' if k.count != 1 else ''}")
        else:
            parts.append(f"{k.kind}: " + ", ".join(shown) + (f" … {more} more" if more > 0 else ""))
    return "; ".join(parts)


class ModifiedFile(BaseModel):
    """A listed file whose content differs from its ``RECORD`` row."""

    model_config = ConfigDict(extra="forbid")
    path: str
    expected: str = Field(description="the RECORD hash, algorithm=digest")
    actual: str = Field(description="the file's hash now, same algorithm")
    expected_size: int | None = Field(default=None, ge=0)
    actual_size: int = Field(ge=0)


class DistReport(BaseModel):
    """The per-distribution report a ``dist.verify`` WorkItem publishes (JSON Artifact).

    ``files_match`` is the verdict of the criterion "all listed files match": a ``RECORD``
    exists and parses, and no listed file is missing, modified or hashed with an algorithm
    ``hashlib`` lacks. Unlisted files are reported but do not change it. Sizes are bytes.
    """

    model_config = ConfigDict(extra="forbid")
    report_format: Literal["missionweave.demo/dist-report@1"] = REPORT_FORMAT
    mission_id: str | None = Field(
        default=None,
        description="the Mission whose dist.verify WorkItem wrote it: each Mission's report is "
        "its own content (another Mission's identical report is not published in it, MW-13.3-d)",
    )
    name: str
    version: str
    license: str | None = None
    dist_info: str = Field(description="absolute path of the .dist-info directory")
    root: str = Field(description="the directory RECORD paths are relative to")
    record: bool = Field(description="a RECORD file was found and parsed")
    record_error: str | None = None
    files_listed: int = Field(ge=0)
    files_hashed: int = Field(ge=0, description="listed files whose hash was checked")
    files_unhashed: int = Field(ge=0, description="rows without a hash: existence checked")
    bytes_hashed: int = Field(ge=0)
    missing: list[str] = Field(default_factory=list)
    modified: list[ModifiedFile] = Field(default_factory=list)
    unsupported: list[str] = Field(default_factory=list, description="unknown hash algorithm")
    unlisted: list[str] = Field(default_factory=list)
    unlisted_bytecode: int = Field(default=0, ge=0, description="unlisted __pycache__/*.pyc")
    counts: dict[str, int] = Field(default_factory=dict, description="exact counts per kind")
    files_match: bool

    def problem_files(self) -> list[str]:
        """The missing, modified and unsupported paths, in that order."""
        return [*self.missing, *(m.path for m in self.modified), *self.unsupported]

    def problems_by_kind(self) -> list[FilesOfKind]:
        """The bad files per kind (``missing``, ``modified``, ``unsupported``; kinds with
        none left out), each with its exact count."""
        found = (
            ("missing", self.missing),
            ("modified", [m.path for m in self.modified]),
            ("unsupported", self.unsupported),
        )
        return [FilesOfKind(k, v, max(self.counts.get(k, 0), len(v))) for k, v in found if v]


def meta_field(meta: PackageMetadata | Message | None, key: str) -> str | None:
    """One field of a distribution's metadata, or ``None`` when absent."""
    if meta is None or key not in meta:
        return None
    value = meta[key]
    return str(value) if value is not None else None


def licence_of(meta: PackageMetadata | Message | None) -> str | None:
    """The distribution's licence: ``License-Expression`` (PEP 639), else a one-line
    ``License`` field, else the ``License ::`` classifiers joined by ``;``; ``None`` if none."""
    if meta is None:
        return None
    expr = (meta_field(meta, "License-Expression") or "").strip()
    if expr:
        return expr
    lic = (meta_field(meta, "License") or "").strip()
    if lic and "\n" not in lic and len(lic) <= 100 and lic.upper() != "UNKNOWN":
        return lic
    classifiers = meta.get_all("Classifier") or []
    names = [c.split("::")[-1].strip() for c in classifiers if c.startswith("License ::")]
    names = [n for n in names if n and n != "OSI Approved"]
    return "; ".join(dict.fromkeys(names)) or None


def _resolve(root: Path, rel: str) -> str:
    return os.path.normpath(rel if os.path.isabs(rel) else os.path.join(root, rel))


def record_paths(dist_info: Path) -> set[str]:
    """Absolute, normalized paths listed in ``dist_info``'s RECORD (empty when it has none or
    it cannot be parsed): the files this distribution claims."""
    dist_info = Path(dist_info).absolute()
    try:
        entries = parse_record(record_text((dist_info / "RECORD").read_bytes()))
    except (OSError, RecordError):
        return set()
    return {_resolve(dist_info.parent, e.path) for e in entries}


def _scan_roots(root: Path, listed: Iterable[str]) -> list[str]:
    """The outermost directories inside ``root`` (never ``root`` itself, which every
    distribution shares) that hold a listed file: where unlisted files are looked for."""
    top = os.path.normpath(root)
    dirs = {os.path.dirname(p) for p in listed}
    dirs = {d for d in dirs if d != top and d.startswith(top + os.sep)}
    out: list[str] = []
    for d in sorted(dirs):
        if not any(d.startswith(o + os.sep) for o in out):
            out.append(d)
    return out


def _unlisted(root: Path, listed: set[str], claimed: Collection[str]) -> tuple[list[str], int]:
    files: list[str] = []
    bytecode = 0
    for scan in _scan_roots(root, listed):
        for dirpath, _dirs, names in os.walk(scan):
            for name in names:
                full = os.path.join(dirpath, name)
                if full in listed or full in claimed:
                    continue
                if name.endswith(".pyc") and os.path.basename(dirpath) == "__pycache__":
                    bytecode += 1
                else:
                    files.append(os.path.relpath(full, root).replace(os.sep, "/"))
    return sorted(files), bytecode


def verify_distribution(dist_info: Path, claimed: Collection[str] = frozenset()) -> DistReport:
    """Check every file ``dist_info``'s RECORD lists against its hash and size.

    Args:
        dist_info: the distribution's ``.dist-info`` (or ``.egg-info``) directory.
        claimed: absolute normalized paths listed by the environment's other distributions
            (:func:`record_paths`): those are not reported as unlisted here.

    Returns:
        The report; ``files_match`` is false when the RECORD is absent or malformed, or a
        listed file is missing, modified, or hashed with an algorithm ``hashlib`` lacks.

    Raises:
        OSError: the metadata cannot be read at all.
    """
    dist_info = Path(dist_info).absolute()
    root = dist_info.parent
    try:
        meta: PackageMetadata | None = Distribution.at(dist_info).metadata
    except (TypeError, ValueError):  # no METADATA / PKG-INFO at all
        meta = None
    name = meta_field(meta, "Name") or dist_info.name.split("-")[0]
    version = meta_field(meta, "Version") or "0"
    base = {
        "name": name,
        "version": version,
        "dist_info": str(dist_info),
        "root": str(root),
        "license": licence_of(meta),
    }
    try:
        entries = parse_record(record_text((dist_info / "RECORD").read_bytes()))
    except FileNotFoundError:
        return DistReport(
            **base,
            record=False,
            record_error="no RECORD file",
            files_listed=0,
            files_hashed=0,
            files_unhashed=0,
            bytes_hashed=0,
            files_match=False,
        )
    except RecordError as exc:
        return DistReport(
            **base,
            record=False,
            record_error=one_line(str(exc))[:500],
            files_listed=0,
            files_hashed=0,
            files_unhashed=0,
            bytes_hashed=0,
            files_match=False,
        )
    missing: list[str] = []
    modified: list[ModifiedFile] = []
    unsupported: list[str] = []
    hashed = unhashed = nbytes = 0
    listed: set[str] = set()
    for e in entries:
        full = _resolve(root, e.path)
        listed.add(full)
        path = Path(full)
        if not path.is_file():
            missing.append(e.path)
            continue
        if e.algorithm is None or e.digest is None:
            unhashed += 1
            continue
        expected = f"{e.algorithm}={e.digest}"
        try:
            actual, size = file_digest(path, e.algorithm)
        except ValueError:
            unsupported.append(e.path)
            continue
        except OSError:
            missing.append(e.path)
            continue
        hashed += 1
        nbytes += size
        if actual != expected or (e.size is not None and e.size != size):
            modified.append(
                ModifiedFile(
                    path=e.path,
                    expected=expected,
                    actual=actual,
                    expected_size=e.size,
                    actual_size=size,
                )
            )
    unlisted, bytecode = _unlisted(root, listed, claimed)
    counts = {
        "missing": len(missing),
        "modified": len(modified),
        "unsupported": len(unsupported),
        "unlisted": len(unlisted),
    }
    return DistReport(
        **base,
        record=True,
        files_listed=len(entries),
        files_hashed=hashed,
        files_unhashed=unhashed,
        bytes_hashed=nbytes,
        missing=missing[:MAX_LISTED],
        modified=modified[:MAX_LISTED],
        unsupported=unsupported[:MAX_LISTED],
        unlisted=unlisted[:MAX_LISTED],
        unlisted_bytecode=bytecode,
        counts=counts,
        files_match=not (missing or modified or unsupported),
    )


__all__ = [
    "REPORT_FORMAT",
    "SHOWN_PER_KIND",
    "DistReport",
    "FilesOfKind",
    "ModifiedFile",
    "RecordEntry",
    "RecordError",
    "describe_files",
    "file_digest",
    "licence_of",
    "meta_field",
    "one_line",
    "parse_record",
    "record_digest",
    "record_paths",
    "record_text",
    "verify_distribution",
]
