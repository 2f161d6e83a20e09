"""The protocol's vocabulary is typed: Command types, Event types and rejection codes are
StrEnums in ``missionweave.protocol`` whose values are the wire strings, every rejection code is
documented once, docs/authority.md's table is made from that, and no code outside ``protocol/``
spells a Command type, an Event type or a rejection code as a string literal."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from missionweave.authority.core._registry import HANDLERS
from missionweave.cli._authority import REJECTIONS_BEGIN, REJECTIONS_END
from missionweave.protocol import (
    REJECTION_DOCS,
    CommandType,
    EventType,
    Rejection,
    RejectionCode,
    SigningKey,
    rejection_table,
    sign_command,
)
from missionweave.protocol import Command as WireCommand
from tests.support.cli_processes import mw

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "missionweave"
DOC = ROOT / "docs" / "authority.md"

TYPES = {m.value for m in CommandType} | {m.value for m in EventType}
CODES = {m.value for m in RejectionCode}


def test_every_rejection_code_is_documented_once() -> None:
    assert set(REJECTION_DOCS) == set(RejectionCode)
    for code, doc in REJECTION_DOCS.items():
        assert doc.meaning and doc.next_step, code
        assert "|" not in doc.meaning + doc.next_step, code  # it would split the table's row


def test_docs_table_is_the_generated_one() -> None:
    """Regenerate with ``missionweave authority rejections`` and paste it between the markers."""
    committed = DOC.read_text().split(REJECTIONS_BEGIN, 1)[1].split(REJECTIONS_END, 1)[0]
    assert committed.strip() == rejection_table().strip()
    rows = {line.split("|")[1].strip() for line in committed.strip().splitlines()[2:]}
    assert rows == {f"`{c.value}`" for c in RejectionCode}
    r = mw("authority", "rejections")
    assert r.returncode == 0 and r.stdout == rejection_table()


def test_members_are_their_wire_strings() -> None:
    assert CommandType.WORK_START == "work.start" and EventType.WORK_STARTED == "work.started"
    assert RejectionCode.OWNER_ACTIVE == "owner_active"
    assert json.dumps({"type": CommandType.WORK_START}) == '{"type": "work.start"}'
    for enum in (CommandType, EventType, RejectionCode):
        assert len({m.value for m in enum}) == len(enum)  # no alias hides a second spelling
    # mission.child_approved/failed name a Command and the Event it records, nothing else
    assert {m.value for m in CommandType} & {m.value for m in EventType} == {
        "mission.child_approved",
        "mission.child_failed",
    }


def test_a_command_signs_the_same_with_a_member_or_its_string() -> None:
    key = SigningKey.generate()
    fields = {"command_id": "c1", "group_id": "g", "actor": "a", "issued_at_ms": 1}
    typed = sign_command(WireCommand(type=CommandType.WORK_START, **fields), key)
    plain = sign_command(WireCommand(type="work.start", **fields), key)
    assert typed.signing_bytes() == plain.signing_bytes()
    assert typed.signature == plain.signature
    assert type(typed.type) is str  # the model holds the wire string, not the member


def test_every_command_type_has_its_handler() -> None:
    assert set(HANDLERS) == set(CommandType)
    assert all(isinstance(t, CommandType) for t in HANDLERS)


# ------------------------------------------------------------------------------------ AST


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _template(node: ast.JoinedStr) -> re.Pattern[str] | None:
    """The strings an f-string can make, as a pattern; ``None`` when it has no literal word."""
    parts, words = [], False
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(re.escape(v.value))
            words = words or bool(re.search(r"[a-z]{2}", v.value))
        else:
            parts.append(r"[a-z_]+")
    return re.compile("".join(parts)) if words else None


def _in_code_place(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """``node`` is passed as an argument, compared, matched, or given as a ``code``."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.IfExp) and node is not parent.test:
        return _in_code_place(parent, parents)
    if isinstance(parent, ast.Set | ast.Tuple | ast.List):
        grand = parents.get(id(parent))
        if isinstance(grand, ast.Compare):
            return True
    if isinstance(parent, ast.Call) and node in parent.args:
        return True
    if isinstance(parent, ast.keyword | ast.Compare | ast.MatchValue):
        return True
    if isinstance(parent, ast.Dict):
        for k, v in zip(parent.keys, parent.values, strict=True):
            if v is node and isinstance(k, ast.Constant) and k.value == "code":
                return True
        keys = parent.keys
        return node in keys and all(isinstance(k, ast.Constant) and k.value in CODES for k in keys)
    if isinstance(parent, ast.Assign | ast.AnnAssign):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return any(
            (isinstance(t, ast.Name) and t.id == "code")
            or (isinstance(t, ast.Attribute) and t.attr == "code")
            for t in targets
        )
    return False


def _spelled_out(source: str, where: str) -> list[str]:
    """Each place of ``source`` that spells out the vocabulary, in line order."""
    return [hit for _, hit in sorted(_hits(source, where), key=lambda h: h[0])]


def _hits(source: str, where: str) -> Iterator[tuple[int, str]]:
    tree = ast.parse(source)
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if isinstance(parents.get(id(node)), ast.JoinedStr):
                continue  # a piece of an f-string: judged whole, below
            if node.value in TYPES or (node.value in CODES and _in_code_place(node, parents)):
                yield node.lineno, f"{where}:{node.lineno}: {node.value!r}"
        elif isinstance(node, ast.JoinedStr) and _in_code_place(node, parents):
            pattern = _template(node)
            made = sorted(v for v in TYPES | CODES if pattern and pattern.fullmatch(v))
            if made:
                yield node.lineno, f"{where}:{node.lineno}: {ast.unparse(node)} makes {made}"


def test_no_command_type_event_type_or_rejection_code_is_spelled_out() -> None:
    """Outside ``protocol/`` (where the enums live), a Command type or Event type is never a
    string literal, and a rejection code is never a literal that is passed, compared, matched
    or assigned as a ``code``; nor is one assembled by an f-string. Docstrings may name them."""
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if "protocol" not in path.relative_to(PACKAGE).parts[:1]
        for hit in _spelled_out(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_the_check_finds_what_it_forbids() -> None:
    """The AST check is not vacuous: each forbidden form in a sample module is found."""
    source = (
        "def f(ctx, r, kind, code):\n"
        '    ctx.emit("work.started", {})\n'
        '    if r.code == "owner_active": pass\n'
        '    if r.code in {"mission_exists", "x"}: pass\n'
        '    raise Reject(f"{kind}_expired", "the grant has expired")\n'
        '    code = "not_owner"\n'
        '    _OUTCOMES = {"work.failed": "fail"}\n'
        '    status = {"unknown_group": 404, "unauthorized": 403}.get(r.code, 422)\n'
        '    log("mission_exists is not a code here")\n'
    )
    hits = _spelled_out(source, "sample.py")
    assert [h.split(": ", 1)[1] for h in hits] == [
        "'work.started'",
        "'owner_active'",
        "'mission_exists'",
        "f'{kind}_expired' makes ['lease_expired', 'offer_expired', 'token_expired']",
        "'not_owner'",
        "'work.failed'",
        "'unknown_group'",
        "'unauthorized'",
    ]


def test_a_rejections_code_is_the_enum_and_travels_as_its_wire_string() -> None:
    """``Rejection.code`` is a :class:`RejectionCode` (issue 36): a wire string reads as its
    member, is written back unchanged, and a code no member names does not validate."""
    r = Rejection.model_validate({"code": "not_blocked", "reason": "WorkItem a is not blocked"})
    assert r.code is RejectionCode.NOT_BLOCKED
    assert json.loads(r.model_dump_json())["code"] == "not_blocked"
    with pytest.raises(ValidationError):
        Rejection.model_validate({"code": "no_such_code", "reason": "?"})


def test_the_refusals_of_updates_and_authorize_work_are_rejection_codes() -> None:
    """The codes the Mission's update validators and the Worker's ``authorize_work`` client
    refuse with are documented codes, not strings of their own (issue 36)."""
    for code in (
        "not_blocked", "contract_name_taken", "archived_dependency", "wrong_command_type",
        "wrong_group", "not_awaiting_approval", "stale_review", "input_too_large",
        "mission_inputs_too_large", "update_rejected", "update_error", "workflow_unreachable",
    ):  # fmt: skip
        assert RejectionCode(code) in REJECTION_DOCS
