"""One capability matcher (``missionweave.protocol.satisfies``) for ranking, admission and the
handler registry: they answer alike for every pair (MW-10.3-d, MW-10.3-f)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missionweave.activities import capability_matches as ranking_matches
from missionweave.protocol import capability_matches, satisfies
from missionweave.worker import HandlerRegistry, WorkContext

_versions = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(
    lambda parts: ".".join(map(str, parts))
)


def _registry(capabilities: list[str]) -> HandlerRegistry:
    reg = HandlerRegistry()
    for cap in capabilities:
        name, _, version = cap.partition("@")

        @reg.handler(name, version=version)
        async def run(ctx: WorkContext, input: dict[str, Any]) -> None:
            return None

    return reg


@pytest.mark.parametrize(
    ("offered", "required", "ok"),
    [
        ("x@1.2.0", "x@1.2.5", False),
        ("x@1.2.5", "x@1.2", True),
        ("x@1.10", "x@1.9", True),
        ("x@1.9", "x@1.10", False),
        ("x@2.0", "x@1.0", False),
        ("x@1.0", "x@1", True),
        ("y@1.0", "x@1.0", False),
        ("x@1.2", "x@1.2.0", True),
    ],
)
def test_satisfies__MW_10_3_d(offered: str, required: str, ok: bool) -> None:
    assert satisfies(offered, required) is ok
    assert (ranking_matches([offered], [required]) is not None) is ok
    assert (_registry([offered]).find(required) is not None) is ok


@given(st.lists(_versions, min_size=1, max_size=4, unique=True), _versions)
def test_ranking_and_the_registry_agree(offered: list[str], required: str) -> None:
    card = [f"x@{v}" for v in offered]
    reg = _registry(card)
    ranked = capability_matches(card, [f"x@{required}"])
    found = reg.find(f"x@{required}")
    assert (ranked is None) == (found is None)
    if found is not None and ranked is not None:
        assert satisfies(ranked[0], f"x@{required}")
        # the registry picks the highest serving version, as ranking names it
        assert ranked[0] == found.capability or satisfies(found.capability, ranked[0])
