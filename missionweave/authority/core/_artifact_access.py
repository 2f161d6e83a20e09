"""Who may read or write an Artifact's bytes: the Authority's checks behind every grant
(MW-13.3-d; the routes are ``authority.http``'s ``_artifact_routes``).

Content is addressed per Group: each Group has its own namespace in the artifact store, so a
hash names nothing outside the Group that holds it. A **read** is tied to who reads
(:func:`read_scope`): an operator reads any content of the Group; an agent names its lease and
reads for that lease's Mission; a person (a member's key without a lease) names a Mission it may
read — any of its Group's with the ``coordinator``, ``mission_owner``, ``reviewer`` or
``owner`` role, else one in which it holds or held a lease. Within the Mission the content
rule is :func:`._possession.readable_in_mission`; anything not readable is answered like
content that does not exist (:func:`artifact_read_refusal`). A promoted Artifact is read from
the promoting Group's namespace. A **write** into ``g`` needs the writer's own live
*execution* lease in ``g`` — a queued hold is no licence to add content — (an operator needs
none): only an owner at work adds content to a Group. An **upload** is bounded
(:func:`upload_refusal`): at most :attr:`AuthorityConfig.max_upload_bytes`, and never below the
disk reserve (issue 37, item 5).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ...protocol import Rejection, RejectionCode, Role, is_hash
from ._items import LeaseKind
from ._possession import readable_in_mission

if TYPE_CHECKING:
    from ._engine import Authority


def _refusal(code: RejectionCode, reason: str, **detail: object) -> Rejection:
    return Rejection(code=code, reason=reason, detail=dict(detail))


#: Roles that direct or review a Group's Missions: a person holding one reads any of them.
MISSION_READERS = frozenset({Role.COORDINATOR, Role.MISSION_OWNER, Role.REVIEWER, Role.OWNER})


def unreadable(group_id: str, artifact_hash: str) -> Rejection:
    """The one answer for content a reader may not read or nobody holds (404
    ``unknown_artifact``): it says nothing of whether another Mission or Group holds it."""
    return _refusal(
        RejectionCode.UNKNOWN_ARTIFACT,
        "no Artifact with this hash is readable here",
        group_id=group_id,
        artifact_hash=artifact_hash,
    )


def read_scope(
    authority: Authority,
    group_id: str,
    key: str,
    artifact_hash: str,
    *,
    lease_id: str | None,
    mission_id: str | None,
    operator: bool,
) -> str | Rejection | None:
    """The Mission a read by ``key`` (an active member's of ``group_id``, or an operator's,
    checked by the caller) is for. Implements MW-13.3-d.

    Returns:
        ``None`` for an operator that names no Mission (every content of the Group); the
        Mission id; or a refusal: ``lease_required`` (a member named neither a lease nor a
        Mission), ``unknown_lease``/``not_owner``/``stale_lease`` (as for a write),
        ``unknown_mission``, or the one :func:`unreadable` answer (a Mission this reader may
        not read, or a lease of another Mission than the one named).
    """
    if lease_id is not None and not operator:
        found = _own_lease(authority, group_id, key, lease_id)
        if isinstance(found, Rejection):
            return found
        item = authority.work_item(group_id, str(found["work_item_id"]))
        leased = None if item is None else str(item["mission_id"])
        if leased is None or (mission_id is not None and mission_id != leased):
            return unreadable(group_id, artifact_hash)
        return leased
    if mission_id is None:
        if operator:
            return None
        return _refusal(
            RejectionCode.LEASE_REQUIRED,
            "a member's read names its lease (an agent's ctx.fetch) or a Mission it may read "
            "(`artifacts get --mission`); only an operator reads without one",
        )
    with authority._lock:
        store = authority.store
        if store.one("missions.exists_by_group_id_mission_id", group_id, mission_id) is None:
            return _refusal(
                RejectionCode.UNKNOWN_MISSION,
                f"no Mission {mission_id!r}",
                group_id=group_id,
                mission_id=mission_id,
            )
        if operator:
            return mission_id
        member = store.one("members.active_by_key", group_id, key)
        roles = set(json.loads(member["roles"])) if member is not None else set()
        held = member is not None and (
            store.one("leases.held_in_mission", group_id, member["agent_id"], mission_id)
            is not None
        )
    return mission_id if roles & MISSION_READERS or held else unreadable(group_id, artifact_hash)


def artifact_read_refusal(
    authority: Authority, group_id: str, artifact_hash: str, *, mission_id: str | None
) -> Rejection | None:
    """May ``artifact_hash`` be read in ``group_id`` for Mission ``mission_id`` (``None``: an
    operator's read of the whole Group; :func:`read_scope` says who reads for which)?

    Returns:
        ``None`` when allowed (the store may still not hold it), else ``invalid_request`` (a
        malformed hash) or the one :func:`unreadable` answer (issue 38).

    Implements MW-13.3-d.
    """
    if not is_hash(artifact_hash):
        return _refusal(
            RejectionCode.INVALID_REQUEST, "not a SHA-256 hex hash", field="artifact_hash"
        )
    if mission_id is None:
        return None
    with authority._lock:
        ok = readable_in_mission(authority.store, group_id, mission_id, artifact_hash)
    return None if ok else unreadable(group_id, artifact_hash)


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


def _own_lease(
    authority: Authority, group_id: str, key: str, lease_id: str | None
) -> dict[str, object] | Rejection:
    """The lease ``lease_id`` when it is ``key``'s agent's, in ``group_id``, active and
    unexpired; else ``lease_required``, ``unknown_lease``, ``not_owner`` or ``stale_lease``."""
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
    return row


def artifact_write_refusal(
    authority: Authority, group_id: str, key: str, lease_id: str | None
) -> dict[str, object] | Rejection:
    """May ``key`` (an active member's of ``group_id``, checked by the caller) write content
    into ``group_id``'s namespace under lease ``lease_id``?

    Returns:
        The lease row when it is the key's agent's, in this Group, an *execution* lease,
        active and unexpired; else ``lease_required`` (none named, or a queued hold: work
        not started adds no content), ``unknown_lease``, ``not_owner`` or ``stale_lease``.
    """
    row = _own_lease(authority, group_id, key, lease_id)
    if isinstance(row, Rejection):
        return row
    if row["kind"] != LeaseKind.EXECUTION:
        return _refusal(
            RejectionCode.LEASE_REQUIRED,
            "writing an Artifact needs an execution lease: a queued hold (work not started) "
            "is not one",
            lease_id=lease_id,
            kind=row["kind"],
        )
    return row
