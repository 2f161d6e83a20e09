"""One identity per look, checked when an id is created (UTS #39; issue 38 item 5).

A new id is refused when

* it is not in Unicode NFKC (``unnormalized_id``): fullwidth ``ｐａｙｐａｌ``, the ligature
  ``ﬁ``; refused, never normalized, since ids sit inside signed bytes
  (:func:`~missionweave.protocol.new_identifier_problem`);
* a Group or agent id mixes scripts (``mixed_script_id``, :func:`._confusables.is_mixed_script`);
* its confusable skeleton (:func:`._confusables.skeleton`) is the skeleton of an id registered
  first in its scope (``confusable_id``): Group ids and agent ids across the Authority, Mission
  ids within their Group, WorkItem ids within their Mission.

Only a Mission or WorkItem refusal names the id it looks like (``detail.confusable_with``, of
the same Group): Group and agent ids are the Authority's, and a refusal never tells one Group
another's ids. The checks run at creation only (``group.create``, ``member.add``,
``mission.create``, ``work.propose`` / ``work.authorize``), so a log written before them still
folds and its ids still act.

Each scope's skeletons are kept in the ``id_skeletons`` table, one row per skeleton (the first
id wins). A scope whose ids were created before the table existed is indexed on its first
creation: its ids are read and their skeletons recorded, with a marker row (skeleton ``""``,
which no id has) saying so.
"""

from __future__ import annotations

from enum import StrEnum

from ...protocol import RejectionCode, identifier_problem, new_identifier_problem
from ._command_scope import Ctx, Reject
from ._confusables import is_mixed_script, resolved_scripts, skeleton

#: The marker row's skeleton: the scope's earlier ids are indexed.
_INDEXED = ""


class IdKind(StrEnum):
    """What an id names, which decides its scope and what its refusal may say."""

    GROUP = "group"
    AGENT = "agent"
    MISSION = "mission"
    WORK_ITEM = "work_item"


#: The kinds whose scope is the whole Authority: a refusal never names their look-alike.
_AUTHORITY_WIDE = frozenset({IdKind.GROUP, IdKind.AGENT})


def register_identity(
    ctx: Ctx, kind: IdKind, value: str, field: str, *, group_id: str = "", mission_id: str = ""
) -> None:
    """Refuse ``value`` as a new id of ``kind`` unless it is one identity per look, then record
    its skeleton in its scope. Call it only when the id is created; ``value`` has passed
    :func:`~missionweave.protocol.identifier_problem` already.

    Args:
        ctx: the Command's context (writes roll back with it).
        kind: what the id names.
        value: the new id.
        field: the Command field that carries it (named in the refusal).
        group_id: the Group of a Mission or WorkItem id.
        mission_id: the Mission of a WorkItem id.

    Raises:
        Reject: ``unnormalized_id`` (not NFKC), ``mixed_script_id`` (a Group or agent id),
            ``confusable_id`` (``confusable_with`` names the twin of a Mission or WorkItem id).
    """
    problem = new_identifier_problem(value)
    if problem is not None:
        code = RejectionCode.INVALID_BODY
        if identifier_problem(value) is None:
            code = RejectionCode.UNNORMALIZED_ID
        raise Reject(code, f"{field} {problem}", field=field)
    if kind in _AUTHORITY_WIDE and is_mixed_script(value):
        scripts = sorted({s for ch in value for s in resolved_scripts(ch) or ()})
        raise Reject(RejectionCode.MIXED_SCRIPT_ID, f"{field} mixes scripts (UTS #39)",
                     field=field, scripts=scripts)  # fmt: skip
    scope = (kind.value, group_id, mission_id)
    _index(ctx, kind, scope)
    own = skeleton(value)
    row = ctx.one("id_skeletons.id", *scope, own)
    if row is not None and row["id"] != value:
        if kind in _AUTHORITY_WIDE:
            raise Reject(RejectionCode.CONFUSABLE_ID,
                         f"{field} looks like an existing {kind.value} id (UTS #39 skeleton)",
                         field=field)  # fmt: skip
        twin = str(row["id"])
        raise Reject(RejectionCode.CONFUSABLE_ID, f"{field} looks like {twin!r} (UTS #39 skeleton)",
                     field=field, confusable_with=twin)  # fmt: skip
    ctx.run("id_skeletons.insert_ignore", *scope, own, value)


def _index(ctx: Ctx, kind: IdKind, scope: tuple[str, str, str]) -> None:
    """Record the skeletons of the scope's ids created before the index, once."""
    if ctx.one("id_skeletons.id", *scope, _INDEXED) is not None:
        return
    _, group_id, mission_id = scope
    match kind:
        case IdKind.GROUP:
            rows = ctx.all("groups.ids")
        case IdKind.AGENT:
            rows = ctx.all("agents.ids")
        case IdKind.MISSION:
            rows = ctx.all("missions.ids_of_group", group_id)
        case IdKind.WORK_ITEM:
            rows = ctx.all("work_items.ids_of_mission", group_id, mission_id)
    for row in rows:
        ctx.run("id_skeletons.insert_ignore", *scope, skeleton(str(row[0])), str(row[0]))
    ctx.run("id_skeletons.insert_ignore", *scope, _INDEXED, "")


__all__ = ["IdKind", "register_identity"]
