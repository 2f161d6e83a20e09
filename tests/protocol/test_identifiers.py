"""The one identifier rule (``missionweave.protocol.identifier_problem``), against an oracle
written from its definition, and at the Command envelope."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missionweave.protocol import Actor, Command, identifier_problem, label_problem
from missionweave.protocol._identifiers import INVISIBLE_RANGES

FORBIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _valid(s: str) -> bool:
    return (
        1 <= len(s) <= 128
        and s == s.strip()
        and unicodedata.normalize("NFC", s) == s
        and all(unicodedata.category(c) not in FORBIDDEN for c in s)
        and all(c == " " or unicodedata.category(c) != "Zs" for c in s)
        and not any(lo <= ord(c) <= hi for c in s for lo, hi in INVISIBLE_RANGES)
    )


@given(st.text(max_size=140) | st.text(alphabet=st.characters(max_codepoint=127), max_size=140))
def test_identifier_rule_matches_its_definition(s: str) -> None:
    assert (identifier_problem(s) is None) == _valid(s), s


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " a",
        "a ",
        "   ",
        "a\x00b",
        "coord\u200b",
        "\u202ecoord",
        "a\u2066b",
        "cafe\u0301",
        "x" * 129,
        "a\nb",
        "\ufeffa",
        # invisible though letters, marks or symbols (found by an attack on 2026-12-01)
        "w1\u3164",
        "w1\u034f",
        "w1\ufe0f",
        "w1\u115f",
        "w1\uffa0",
        "w1\u2800",
        "w1\U000e0100",
        "w1\u180b",
        "a\u00a0b",
        "a\u3000b",
        # and by its second round
        "w1\U0001d159",
        "w1\U00016fe4",
        "w1\u303f",
        "w1\U0001bc9d",
        "w1\ufffc",
    ],
)
def test_invisible_padded_or_unnormalized_ids_are_refused(bad: str) -> None:
    assert identifier_problem(bad) is not None
    with pytest.raises(ValueError):
        Actor.generate(bad).command("work.propose", "g1", {})
    with pytest.raises(ValueError):
        Command(command_id="c", group_id=bad, type="t.x", actor="a", issued_at_ms=0)


def test_readable_ids_pass_and_group_ids_are_path_segments() -> None:
    for good in ("ada", "mission-m1/c12", "verify:requests@2.32", "café", "検証-1", "a b"):
        assert identifier_problem(good) is None, good
    assert identifier_problem("g/1", path_segment=True) is not None
    assert identifier_problem("g%2F1", path_segment=True) is not None
    assert identifier_problem("..", path_segment=True) is not None
    assert identifier_problem(".", path_segment=True) is not None
    assert label_problem("") is None and label_problem("A title, with spaces") is None
    assert label_problem("title\x00") is not None and label_problem("\u202etitle") is not None
