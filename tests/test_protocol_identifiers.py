"""The one identifier rule (``missionweave.protocol.identifier_problem``), against an oracle
written from its definition, and at the Command envelope."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missionweave.protocol import Actor, Command, identifier_problem, label_problem

FORBIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _valid(s: str) -> bool:
    return (
        1 <= len(s) <= 128
        and s == s.strip()
        and unicodedata.normalize("NFC", s) == s
        and all(unicodedata.category(c) not in FORBIDDEN for c in s)
    )


@given(st.text(max_size=140) | st.text(alphabet=st.characters(max_codepoint=127), max_size=140))
def test_identifier_rule_matches_its_definition(s: str) -> None:
    assert (identifier_problem(s) is None) == _valid(s), s


@pytest.mark.parametrize(
    "bad",
    ["", " a", "a ", "   ", "a\x00b", "coord\u200b", "\u202ecoord", "a\u2066b", "cafe\u0301",
     "x" * 129, "a\nb", "\ufeffa"],
)  # fmt: skip
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
    assert label_problem("") is None and label_problem("A title, with spaces") is None
    assert label_problem("title\x00") is not None and label_problem("\u202etitle") is not None
