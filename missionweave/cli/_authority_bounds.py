"""The options of ``authority serve`` that bound what one member can make the Authority do:
each member's Command budget per Group, the disk reserve, the upload bound and the Groups one
``session.open`` opens (docs/authority.md "Operating")."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer

from ..authority.core import (
    DEFAULT_MAX_SESSION_GROUPS,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_RESERVE_BYTES,
    CommandLimits,
)
from ._common import CliError

_MIB = 1024 * 1024
_DEFAULT = CommandLimits()

COMMAND_RATE = typer.Option(
    _DEFAULT.commands_per_s,
    "--command-rate",
    min=0.0,
    help="Commands per second each member may send in a Group, over its burst (a "
    "coordinator: 10× per Mission). Lease renewals and the Commands that end work are not "
    "counted. 0: no Command budget.",
)
COMMAND_BURST = typer.Option(
    _DEFAULT.burst, "--command-burst", min=1, help="Commands a member may send at once."
)
COMMAND_BYTES_RATE = typer.Option(
    _DEFAULT.bytes_per_s // 1024,
    "--command-bytes-rate-kib",
    min=1,
    help="KiB of Commands per second each member may send in a Group, over its burst.",
)
COMMAND_BYTES_BURST = typer.Option(
    _DEFAULT.bytes_burst // _MIB,
    "--command-bytes-burst-mib",
    min=1,
    help="MiB of Commands a member may send at once.",
)
GROUP_LIMITS = typer.Option(
    None,
    "--group-limits",
    metavar="FILE",
    help='JSON {"<group_id>": {"commands_per_s", "burst", "bytes_per_s", "bytes_burst"}}: '
    "the Command budget of particular Groups (names left out take the defaults above).",
)
DISK_RESERVE = typer.Option(
    DEFAULT_RESERVE_BYTES // _MIB,
    "--disk-reserve-mib",
    min=0,
    help="Free space kept on the database's and the artifact store's disks: below it new "
    "content and new work are refused (507); renewals and endings still commit. 0: none.",
)
MAX_UPLOAD = typer.Option(
    DEFAULT_MAX_UPLOAD_BYTES // _MIB,
    "--max-upload-mib",
    min=1,
    help="Largest Artifact upload accepted (413 past it).",
)
MAX_SESSION_GROUPS = typer.Option(
    DEFAULT_MAX_SESSION_GROUPS,
    "--max-session-groups",
    min=1,
    help="Most Groups one session.open opens (an agent in more is refused too_many_groups).",
)


def bounds_config(
    budget: tuple[float, int, int, int],
    group_limits: Path | None,
    disk_reserve_mib: int,
    max_upload_mib: int,
    max_session_groups: int,
) -> dict[str, Any]:
    """The :class:`AuthorityConfig` settings of these options.

    Args:
        budget: ``--command-rate``, ``--command-burst``, ``--command-bytes-rate-kib`` and
            ``--command-bytes-burst-mib`` (a rate of 0: no budget).
        group_limits: ``--group-limits``.
        disk_reserve_mib: ``--disk-reserve-mib``.
        max_upload_mib: ``--max-upload-mib``.
        max_session_groups: ``--max-session-groups``.

    Raises:
        CliError: ``--group-limits`` is not a readable JSON object of valid limits.
    """
    rate, burst, bytes_rate_kib, bytes_burst_mib = budget
    default = (
        CommandLimits(rate, burst, bytes_rate_kib * 1024, bytes_burst_mib * _MIB)
        if rate > 0
        else None
    )
    return {
        "command_limits": default,
        "group_command_limits": _group_limits(group_limits, default) if group_limits else {},
        "disk_reserve_bytes": disk_reserve_mib * _MIB,
        "max_upload_bytes": max_upload_mib * _MIB,
        "max_session_groups": max_session_groups,
    }


def _group_limits(path: Path, default: CommandLimits | None) -> dict[str, CommandLimits]:
    """The ``--group-limits`` file: each Group's limits over ``default``."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"--group-limits {path}: {exc}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise CliError(f"--group-limits {path}: not an object of objects")
    base = asdict(default or CommandLimits())
    out: dict[str, CommandLimits] = {}
    for group_id, value in raw.items():
        try:
            out[group_id] = CommandLimits.from_wire({**base, **value})
        except (TypeError, ValueError) as exc:
            raise CliError(f"--group-limits {path}: {group_id}: {exc}") from None
    return out
