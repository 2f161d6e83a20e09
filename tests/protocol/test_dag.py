"""The evolving WorkItem DAG (spec 10.4): growth over time, eligibility, cycle rejection.

Requirements: MW-10.4-a, MW-10.4-b, MW-10.4-c.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from missionweave.protocol import DependencyStrategy, GraphError, WorkGraph, WorkItemState

D = DependencyStrategy


def _snapshot(g: WorkGraph) -> tuple[object, list[str]]:
    return g.to_wire(), g.items


def _reject(g: WorkGraph, code: str, *args: object, **kw: object) -> GraphError:
    before = _snapshot(g)
    with pytest.raises(GraphError) as exc:
        g.add(*args, **kw)  # type: ignore[arg-type]
    assert exc.value.rejection.code == code
    assert _snapshot(g) == before, "a refused change must leave the graph untouched"
    return exc.value


def _has_cycle(deps: Mapping[str, tuple[str, ...]]) -> bool:
    """Independent DFS cycle check over ``item -> its dependencies``."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)

    def visit(n: str) -> bool:
        color[n] = grey
        for d in deps[n]:
            if color[d] == grey or (color[d] == white and visit(d)):
                return True
        color[n] = black
        return False

    return any(color[n] == white and visit(n) for n in deps)


def test_items_are_added_over_time__MW_10_4_a() -> None:
    g = WorkGraph()
    g.add({"fetch": []})
    assert g.items == ["fetch"] and len(g) == 1
    g.add({"verify": ["fetch"], "index": ["fetch"]})
    g.add({"report": ["verify", "index"]}, {"report": D.ALL_TERMINAL})
    assert g.items == ["fetch", "verify", "index", "report"]
    assert g.dependencies("report") == ("verify", "index")
    assert sorted(g.dependents("fetch")) == ["index", "verify"]
    assert g.strategy("report") is D.ALL_TERMINAL
    assert g.strategy("verify") is D.ALL_VERIFIED
    assert "report" in g and "nope" not in g


def test_extra_edges_between_known_items__MW_10_4_a() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": []})
    g.add({}, edges=[("a", "b")])
    assert g.dependencies("b") == ("a",)
    g.add({"c": []}, edges=[("c", "a"), ("c", "a")])  # repeated edge is kept once
    assert g.dependencies("a") == ("c",)
    order = g.topological_order()
    assert order.index("c") < order.index("a") < order.index("b")


def test_independent_branches_have_no_order_between_them__MW_10_4_a() -> None:
    g = WorkGraph()
    g.add({"root": [], "left": ["root"], "right": ["root"]})
    states = {"root": WorkItemState.VERIFIED}
    assert g.is_eligible("left", states) and g.is_eligible("right", states)


def test_cycle_is_rejected_and_named__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": ["a"], "c": ["b"]})
    err = _reject(g, "cycle", {}, edges=[("c", "a")])
    cycle = err.rejection.detail["cycle"]
    assert set(cycle) == {"a", "b", "c"}
    assert cycle[0] == cycle[-1], "the cycle is reported closed, first node repeated"
    assert "a" in err.rejection.reason and "->" in err.rejection.reason


def test_cycle_among_new_items_is_rejected__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"base": []})
    err = _reject(g, "cycle", {"x": ["y", "base"], "y": ["x"]})
    assert set(err.rejection.detail["cycle"]) == {"x", "y"}
    assert "x" not in g and "y" not in g


def test_self_loop_is_rejected__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"a": []})
    assert _reject(g, "self_loop", {"b": ["b"]}).rejection.detail["id"] == "b"
    assert _reject(g, "self_loop", {}, edges=[("a", "a")]).rejection.detail["id"] == "a"


def test_unknown_id_is_rejected__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"a": []})
    err = _reject(g, "unknown_id", {"b": ["ghost"]})
    assert err.rejection.detail["dependency"] == "ghost"
    assert _reject(g, "unknown_id", {}, edges=[("a", "ghost")]).rejection.detail["id"] == "ghost"
    assert _reject(g, "unknown_id", {}, edges=[("ghost", "a")]).rejection.detail["id"] == "ghost"


def test_duplicate_id_is_rejected__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": ["a"]})
    assert _reject(g, "duplicate_id", {"c": [], "a": []}).rejection.detail["id"] == "a"
    assert "c" not in g


def test_rejected_add_is_atomic__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": ["a"]}, {"b": D.ANY_VERIFIED})
    # valid new items alongside an offending edge: nothing of it lands, strategies included
    _reject(g, "cycle", {"c": ["b"], "d": []}, {"c": D.ALL_TERMINAL}, edges=[("b", "a")])
    assert "c" not in g and "d" not in g
    assert g.dependencies("a") == ()
    _reject(g, "unknown_id", {"c": []}, {"c": D.ALL_TERMINAL}, edges=[("c", "zz")])
    g.add({"c": []})
    assert g.strategy("c") is D.ALL_VERIFIED, "a refused add must not leave its strategy behind"


def test_empty_id_is_rejected__MW_10_4_c() -> None:
    g = WorkGraph()
    _reject(g, "invalid_id", {"": []})


def test_all_verified_strategy__MW_10_4_b() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": [], "c": ["a", "b"]})
    assert g.is_eligible("a", {})  # no dependencies: eligible at once
    assert not g.is_eligible(
        "c", {"a": WorkItemState.VERIFIED}
    )  # a missing state counts as not done
    assert not g.is_eligible("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.SUBMITTED})
    assert not g.is_eligible("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.CANCELLED})
    assert g.is_eligible("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.VERIFIED})
    assert g.blocked_forever("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.CANCELLED})
    assert not g.blocked_forever("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.FAILED})


def test_any_verified_strategy__MW_10_4_b() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": [], "c": ["a", "b"]}, {"c": D.ANY_VERIFIED})
    assert not g.is_eligible("c", {})
    assert not g.is_eligible("c", {"a": WorkItemState.FAILED, "b": WorkItemState.ACTIVE})
    assert g.is_eligible("c", {"a": WorkItemState.CANCELLED, "b": WorkItemState.VERIFIED})
    assert not g.blocked_forever("c", {"a": WorkItemState.CANCELLED, "b": WorkItemState.FAILED})
    assert g.blocked_forever("c", {"a": WorkItemState.CANCELLED, "b": WorkItemState.CANCELLED})


def test_all_terminal_strategy__MW_10_4_b() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": [], "c": ["a", "b"]}, {"c": D.ALL_TERMINAL})
    assert not g.is_eligible("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.ACTIVE})
    assert not g.is_eligible("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.SUBMITTED})
    assert g.is_eligible("c", {"a": WorkItemState.VERIFIED, "b": WorkItemState.CANCELLED})
    # failed is not terminal (MW-10.2-a/b: it may be re-offered), so it does not count as done
    assert not g.is_eligible("c", {"a": WorkItemState.FAILED, "b": WorkItemState.CANCELLED})
    assert not g.blocked_forever("c", {"a": WorkItemState.CANCELLED, "b": WorkItemState.CANCELLED})


@pytest.mark.parametrize("strategy", list(DependencyStrategy))
def test_eligibility_uses_every_declared_dependency__MW_10_4_b(
    strategy: DependencyStrategy,
) -> None:
    g = WorkGraph()
    g.add({"a": [], "b": []})
    g.add({"c": ["a"]}, {"c": strategy}, edges=[("b", "c")])
    states = {"a": WorkItemState.VERIFIED, "b": WorkItemState.OPEN}
    # b is an active, unfinished dependency: only any_verified may proceed without it
    assert g.is_eligible("c", states) is (strategy is D.ANY_VERIFIED)


def test_wire_round_trip_revalidates__MW_10_4_c() -> None:
    g = WorkGraph()
    g.add({"a": [], "b": ["a"], "c": ["a", "b"]}, {"c": D.ANY_VERIFIED})
    h = WorkGraph.from_wire(g.to_wire())
    assert h.to_wire() == g.to_wire()
    bad = {
        "a": {"deps": ["b"], "strategy": "all_verified"},
        "b": {"deps": ["a"], "strategy": "all_verified"},
    }
    with pytest.raises(GraphError) as exc:
        WorkGraph.from_wire(bad)
    assert exc.value.rejection.code == "cycle"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_additions_never_leave_a_cycle__MW_10_4_a__MW_10_4_c(data: st.DataObject) -> None:
    g = WorkGraph()
    accepted_edges: set[tuple[str, str]] = set()
    stats = {"cycles": 0}
    for step in range(data.draw(st.integers(5, 20), label="steps")):
        # mostly valid growth: fresh ids depending on known or fresh ids; now and then a stray
        # (unknown or repeated) id, and extra edges that may close a cycle
        fresh = [f"s{step}_{k}" for k in range(data.draw(st.integers(1, 3)))]
        pool = [*g.items, *fresh] or ["ghost"]
        stray = data.draw(st.integers(0, 9)) == 0
        names = st.sampled_from([*pool, "ghost"] if stray else pool)
        items: dict[str, list[str]] = {}
        for k, i in enumerate(fresh):
            earlier = [*g.items, *fresh[:k]]
            wild = stray or not earlier
            items[i] = data.draw(st.lists(names if wild else st.sampled_from(earlier), max_size=3))
        if g.items and data.draw(st.integers(0, 9)) == 0:
            items[data.draw(st.sampled_from(g.items))] = []
        edges = data.draw(st.lists(st.tuples(names, names), max_size=3))
        before = _snapshot(g)
        # what the change would make, computed independently of WorkGraph
        proposed = {i: list(g.dependencies(i)) for i in g.items}
        duplicate = any(i in proposed for i in items)
        for i, deps in items.items():
            proposed.setdefault(i, []).extend(deps)
        for dep, dependent in edges:
            if dependent in proposed:
                proposed[dependent].append(dep)
        known = set(proposed)
        unknown = any(d not in known for ds in proposed.values() for d in ds) or any(
            e not in known for edge in edges for e in edge
        )
        self_loop = any(i in ds for i, ds in proposed.items())
        try:
            g.add(items, edges=edges)
        except GraphError as exc:
            assert _snapshot(g) == before
            code = exc.rejection.code
            assert code in {"duplicate_id", "unknown_id", "self_loop", "cycle"}
            if code == "cycle":
                stats["cycles"] += 1
                assert not (duplicate or unknown or self_loop)
                assert _has_cycle({k: tuple(v) for k, v in proposed.items()})
            else:
                assert {"duplicate_id": duplicate, "unknown_id": unknown, "self_loop": self_loop}[
                    code
                ]
        else:
            assert not (duplicate or unknown or self_loop)
            assert not _has_cycle({k: tuple(v) for k, v in proposed.items()})
            accepted_edges |= {(d, i) for i, ds in proposed.items() for d in ds}
        deps = {i: g.dependencies(i) for i in g.items}
        assert not _has_cycle(deps)
        assert {(d, i) for i, ds in deps.items() for d in ds} == accepted_edges
        order = g.topological_order()
        assert sorted(order) == sorted(g.items)
        pos = {n: k for k, n in enumerate(order)}
        for dep, dependent in accepted_edges:
            assert pos[dep] < pos[dependent]
    # coverage notes for --hypothesis-show-statistics
    event("edges accepted" if accepted_edges else "no edge accepted")
    event("cycle refused" if stats["cycles"] else "no cycle tried")
