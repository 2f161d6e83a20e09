"""Proof of possession and who may read which content (MW-13.3-d; issue 38, items 1 and 2).

A content hash proves nothing: every member reads the Group log, so it knows every hash
published and can predict many outputs. What proves that a publisher holds bytes is that they
reached the store under its own write grant. So the Authority records each upload — the
Group, the hash and the lease whose grant carried it, with that lease's Mission and WorkItem
(``artifact_uploads``, :func:`record_upload`) — at the moment the bytes are checked against
their hash (the filesystem store's blob route; for S3, when the Authority confirms a staged
upload). Then:

- ``artifact.publish`` of ``h`` into WorkItem ``w`` of Mission ``m`` is accepted only when
  :func:`possession` holds: ``h`` was uploaded under a lease of ``w``, or is already ``m``'s
  published (so proven) content, or is promoted, or is one of ``w``'s contract inputs that
  ``m`` may read. Otherwise ``content_not_uploaded`` — the same answer whether or not any
  Mission, of this Group or another, holds such bytes. Two Missions of one Group that
  produce identical bytes each prove possession and both publish.
- A read for Mission ``m`` (:func:`readable_in_mission`) reaches ``m``'s published or
  uploaded content, promoted content, and content no Mission's lease brought (an external
  input an operator or the store's holder put in the Group's namespace) — never bytes
  another Mission published or uploaded.

Functions here take a ``reads`` object — a live Store under the Authority's lock, or a
handler's :class:`~._command_scope.Ctx` — so the handler and the HTTP routes ask one rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ...protocol import RejectionCode
from ._command_scope import Ctx, Reject
from ._items import contract_of
from ._store import Row

if TYPE_CHECKING:
    from ._engine import Authority


class Reads(Protocol):
    """What the rules read: a :class:`~._store.Store` or a handler's ``Ctx``."""

    def one(self, name: str, *args: Any) -> Row | None:
        """One row of a named statement, or ``None``."""
        ...


def _has(reads: Reads, name: str, *args: Any) -> bool:
    return reads.one(name, *args) is not None


def published_in_mission(reads: Reads, group_id: str, mission_id: str, h: str) -> bool:
    """``h`` was published (its possession proven) in Mission ``mission_id`` of ``group_id``."""
    return _has(reads, "artifacts.published_in_mission", group_id, h, mission_id)


def readable_in_mission(reads: Reads, group_id: str, mission_id: str, h: str) -> bool:
    """May a reader for Mission ``mission_id`` of ``group_id`` read ``h`` (MW-13.3-d)?

    Yes for the Mission's own content (published, or uploaded under one of its leases), a
    promoted Organization Artifact, and content no Mission of the Group published or
    uploaded (an external input: it enters a Mission only as the inputs it was given).
    Another Mission's content, published or only uploaded so far, is not readable.
    """
    if published_in_mission(reads, group_id, mission_id, h):
        return True
    if _has(reads, "artifact_uploads.in_mission", group_id, h, mission_id):
        return True
    if _has(reads, "promoted_artifacts.any", h):
        return True
    return not (
        _has(reads, "artifacts.published_in_group", group_id, h)
        or _has(reads, "artifact_uploads.in_group", group_id, h)
    )


def possession(reads: Reads, item: Row, h: str) -> bool:
    """Has WorkItem ``item`` (a ``work_items`` row) proven it holds ``h``?

    Yes when ``h`` was uploaded under a write grant of one of ``item``'s leases, is already
    its Mission's published content, is promoted, or is one of its contract inputs that its
    Mission may read (an input it was given).
    """
    g, m, w = item["group_id"], item["mission_id"], item["work_item_id"]
    if _has(reads, "artifact_uploads.in_item", g, h, w):
        return True
    if published_in_mission(reads, g, m, h) or _has(reads, "promoted_artifacts.any", h):
        return True
    return h in contract_of(item).inputs and readable_in_mission(reads, g, m, h)


def refuse_unproven_content(ctx: Ctx, item: Row, h: str) -> None:
    """``artifact.publish``'s possession check (issue 38 item 1). Implements MW-13.3-d.

    Raises:
        Reject: ``content_not_uploaded`` (``artifact_hash``): one answer whether or not any
            other Mission or Group holds ``h``.
    """
    if not possession(ctx, item, h):
        raise Reject(
            RejectionCode.CONTENT_NOT_UPLOADED,
            "publish content uploaded under this WorkItem's own write grant (or content "
            "already this Mission's, promoted, or given as its input)",
            artifact_hash=h,
        )


def record_upload(authority: Authority, lease: Row | dict[str, Any], h: str) -> None:
    """Record that bytes hashing to ``h`` reached the store under ``lease``'s write grant
    (its ``lease_id``, ``group_id``, ``work_item_id``; the WorkItem gives the Mission).
    Idempotent. Called once the bytes were checked against ``h``, before the upload is
    answered, so a publish that follows finds it."""
    g, w = str(lease["group_id"]), str(lease["work_item_id"])
    with authority._write(fsync=False):  # the bytes are durable; the record joins the next fsync
        item = authority.store.one("work_items.row", g, w)
        if item is None:  # a lease names a WorkItem of its Group, always
            raise LookupError(f"lease {lease['lease_id']} names no WorkItem {w!r} of {g!r}")
        authority.store.run(
            "artifact_uploads.insert_ignore",
            g,
            h,
            str(lease["lease_id"]),
            str(item["mission_id"]),
            w,
            authority.clock(),
        )


def present_for(authority: Authority, lease: Row | dict[str, Any], h: str) -> bool:
    """Would a publish of ``h`` under ``lease`` pass without a new upload (the write grant's
    ``present``)? Only for this WorkItem's proven content: another Mission's bytes are never
    announced, and never spare an upload."""
    with authority._lock:
        item = authority.store.one("work_items.row", lease["group_id"], lease["work_item_id"])
        return item is not None and possession(authority.store, item, h)


__all__ = [
    "possession",
    "present_for",
    "published_in_mission",
    "readable_in_mission",
    "record_upload",
    "refuse_unproven_content",
]
