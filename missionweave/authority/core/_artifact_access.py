"""Who may read or write an Artifact's bytes: the Authority's checks behind every grant
(MW-13.3-d; the routes are ``authority.http``'s ``_artifact_routes``).

Content is addressed per Group: each Group has its own namespace in the artifact store, so a
hash names nothing outside the Group that holds it. A **read** by a key in Group ``g`` needs an
active member's key of ``g`` (or an operator's); when it is for a Mission's context (an agent's
``ctx.fetch`` names its Mission) the Artifact must also be usable there — published in that
Mission, promoted to an Organization Artifact, or never published at all (an external input
the Group holds) — exactly the rule :func:`check_context_use` applies to Commands. A promoted
Artifact is read from the promoting Group's namespace. A **write** into ``g`` needs the
writer's own live execution lease in ``g`` (an operator needs none): only an owner at work
adds content to a Group. An **upload** is bounded (:func:`upload_refusal`): at most
:attr:`AuthorityConfig.max_upload_bytes`, and never below the disk reserve (issue 37, item 5).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ...protocol import Rejection, RejectionCode, is_hash
from ._handlers_context import context_use

if TYPE_CHECKING:
    from ._engine import Authority


def _refusal(code: RejectionCode, reason: str, **detail: object) -> Rejection:
    return Rejection(code=code, reason=reason, detail=dict(detail))


def artifact_read_refusal(
    authority: Authority,
    group_id: str,
    artifact_hash: str,
    *,
    mission_id: str | None = None,
) -> Rejection | None:
    """May a member of ``group_id`` (checked by the caller) read ``artifact_hash`` into the
    context of ``mission_id``? Implements MW-13.3-d.

    Args:
        authority: the Group Authority.
        group_id: the reader's Group.
        artifact_hash: SHA-256 hex.
        mission_id: the Mission whose context the read is for; ``None`` for a member's own
            read outside any Mission (a person's ``missionweave artifacts get``).

    Returns:
        ``None`` when allowed, else ``invalid_request`` (a malformed hash), ``unknown_mission``
        or ``cross_mission_content`` (the other Mission is not named, MW-13.3-e).
    """
    if not is_hash(artifact_hash):
        return _refusal(
            RejectionCode.INVALID_REQUEST, "not a SHA-256 hex hash", field="artifact_hash"
        )
    if mission_id is None:
        return None
    rejection = context_use(authority, group_id, mission_id, artifact_hash)
    if rejection is None or rejection.code == RejectionCode.UNKNOWN_ARTIFACT:
        return None  # an external input: no Mission's content (the Group must hold it)
    return rejection


def promoting_groups(authority: Authority, artifact_hash: str) -> list[str]:
    """The Groups that promoted ``artifact_hash`` to an Organization Artifact, in order."""
    with authority._lock:
        rows = authority.store.all("promoted_artifacts.groups", artifact_hash)
    return [str(r[0]) for r in rows]


def upload_refusal(
    authority: Authority, dirs: Iterable[str | Path], size: int | None
) -> Rejection | None:
    """May an upload of ``size`` bytes (``None``: not known yet) be written into ``dirs`` (the
    artifact store's root; the grant route passes it for a write grant too)?

    Returns:
        ``None`` when allowed; else ``payload_too_large`` (413: ``bytes``, ``max_bytes``) past
        :attr:`AuthorityConfig.max_upload_bytes`, or ``insufficient_storage`` (507: ``path``,
        ``free_bytes``, ``reserve_bytes``, ``needed_bytes``) when a directory is below the
        disk reserve or would be after the upload (counted twice: the Authority spools it
        before storing it).
    """
    limit = authority.config.max_upload_bytes
    if size is not None and size > limit:
        return _refusal(
            RejectionCode.PAYLOAD_TOO_LARGE,
            f"an Artifact upload is at most {limit} bytes",
            bytes=size,
            max_bytes=limit,
        )
    short = authority.disk_reserve.shortfall(dirs, needed=2 * (size or 0))
    return None if short is None else short.rejection()


def artifact_write_refusal(
    authority: Authority, group_id: str, key: str, lease_id: str | None
) -> Rejection | None:
    """May ``key`` (an active member's of ``group_id``, checked by the caller) write content
    into ``group_id``'s namespace under lease ``lease_id``?

    Returns:
        ``None`` when the lease is the key's agent's, in this Group, active and unexpired;
        else ``lease_required``, ``unknown_lease``, ``not_owner`` or ``stale_lease``.
    """
    if not lease_id:
        return _refusal(
            RejectionCode.LEASE_REQUIRED,
            "writing an Artifact needs the writer's live execution lease",
        )
    row = authority.lease(lease_id)
    if row is None or row["group_id"] != group_id:
        return _refusal(
            RejectionCode.UNKNOWN_LEASE, "no such lease in this Group", lease_id=lease_id
        )
    if authority.member_key(group_id, str(row["agent_id"])) != key:
        return _refusal(
            RejectionCode.NOT_OWNER, "the lease belongs to another agent", lease_id=lease_id
        )
    if not row["valid"]:
        return _refusal(
            RejectionCode.STALE_LEASE, "the lease is no longer active", lease_id=lease_id
        )
    return None
