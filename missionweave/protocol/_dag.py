"""The evolving WorkItem DAG of a Mission (spec 10.4).

Pure and deterministic (no I/O, no clocks), so the Mission workflow can hold one. Items and edges
may be added at any time (MW-10.4-a); a change that would create a cycle, a self-loop, a duplicate
id or an edge to an unknown item is refused whole with a structured :class:`GraphError`
(MW-10.4-c). The cycle check is :mod:`graphlib`'s.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping, Sequence

from ._contract import DependencyStrategy
from ._errors import GraphError, Rejection
from ._rejection_codes import RejectionCode
from ._states import TERMINAL_STATES, WorkItemState


def dependencies_satisfied(
    strategy: DependencyStrategy, dependency_states: Sequence[WorkItemState | None]
) -> bool:
    """Whether dependencies in ``dependency_states`` satisfy ``strategy`` (MW-10.4-b).

    ``all_verified``: every dependency is ``verified``; ``any_verified``: at least one is;
    ``all_terminal``: every dependency is terminal, ``verified`` or ``cancelled`` (MW-10.2-a;
    ``failed`` is not terminal: it may be re-offered, MW-10.2-b). No dependencies: satisfied.
    ``None`` (unknown) counts as not done. The Authority and the Mission workflow both call this.
    """
    if not dependency_states:
        return True
    match strategy:
        case DependencyStrategy.ALL_VERIFIED:
            return all(s is WorkItemState.VERIFIED for s in dependency_states)
        case DependencyStrategy.ANY_VERIFIED:
            return any(s is WorkItemState.VERIFIED for s in dependency_states)
        case DependencyStrategy.ALL_TERMINAL:
            return all(s in TERMINAL_STATES for s in dependency_states)
    return False  # pragma: no cover - exhaustive match


def _fail(code: RejectionCode, reason: str, **detail: object) -> GraphError:
    return GraphError(Rejection(code=code, reason=reason, detail=dict(detail)))


class WorkGraph:
    """A DAG of WorkItem ids; an edge ``a → b`` means *b depends on a*.

    The graph holds ids and dependency strategies only; states live with the caller and are passed
    to :meth:`eligible`.
    """

    def __init__(self) -> None:
        self._deps: dict[str, tuple[str, ...]] = {}
        self._dependents: dict[str, list[str]] = {}
        self._strategy: dict[str, DependencyStrategy] = {}
        self._order: list[str] = []

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._deps

    def __len__(self) -> int:
        return len(self._deps)

    @property
    def items(self) -> list[str]:
        """Item ids in insertion order."""
        return list(self._deps)

    def dependencies(self, item_id: str) -> tuple[str, ...]:
        """The ids ``item_id`` depends on."""
        return self._deps[item_id]

    def dependents(self, item_id: str) -> list[str]:
        """The ids that depend on ``item_id``, in the order the edges were added (an index:
        constant time, however large the graph)."""
        return list(self._dependents.get(item_id, ()))

    def strategy(self, item_id: str) -> DependencyStrategy:
        """The dependency strategy of ``item_id``."""
        return self._strategy[item_id]

    def add(
        self,
        items: Mapping[str, Iterable[str]],
        strategies: Mapping[str, DependencyStrategy] | None = None,
        edges: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Add items (id → dependency ids) and extra edges ``(dependency, dependent)`` atomically.

        Args:
            items: new item ids mapped to the ids they depend on (existing or new).
            strategies: dependency strategy per new item (default ``all_verified``).
            edges: additional ``(dependency, dependent)`` pairs between any known ids.

        Raises:
            GraphError: code ``duplicate_id`` (an id already in the graph or twice in ``items``),
                ``unknown_id`` (a dependency or edge end that is neither known nor new),
                ``self_loop`` or ``cycle`` (detail names the cycle). Nothing is added then.

        Implements MW-10.4-a and MW-10.4-c.
        """
        new: dict[str, list[str]] = {}
        for item_id, deps in items.items():
            if not item_id:
                raise _fail(RejectionCode.INVALID_ID, "a WorkItem id must be non-empty")
            if item_id in self._deps:
                raise _fail(
                    RejectionCode.DUPLICATE_ID, f"WorkItem {item_id} already exists", id=item_id
                )
            new[item_id] = list(dict.fromkeys(deps))
        known = self._deps.keys() | new.keys()
        proposed = {k: list(v) for k, v in self._deps.items()}
        proposed.update(new)
        for dep, dependent in edges:
            for end in (dep, dependent):
                if end not in known:
                    raise _fail(
                        RejectionCode.UNKNOWN_ID, f"edge names unknown WorkItem {end}", id=end
                    )
            if dep not in proposed[dependent]:
                proposed[dependent].append(dep)
        for item_id, deps in proposed.items():
            for dep in deps:
                if dep == item_id:
                    raise _fail(
                        RejectionCode.SELF_LOOP, f"WorkItem {item_id} depends on itself", id=item_id
                    )
                if dep not in known:
                    raise _fail(
                        RejectionCode.UNKNOWN_ID,
                        f"WorkItem {item_id} depends on unknown WorkItem {dep}",
                        id=item_id,
                        dependency=dep,
                    )
        try:  # the order is kept: computing it again for 10,000 items is not free
            order = [str(n) for n in graphlib.TopologicalSorter(proposed).static_order()]
        except graphlib.CycleError as exc:
            cycle = [str(n) for n in exc.args[1]]
            raise _fail(
                RejectionCode.CYCLE,
                "the change would create a dependency cycle: " + " -> ".join(cycle),
                cycle=cycle,
            ) from None
        for item_id in new:
            self._strategy[item_id] = (strategies or {}).get(
                item_id, DependencyStrategy.ALL_VERIFIED
            )
        for item_id, deps in proposed.items():
            for dep in deps[len(self._deps.get(item_id, ())) :]:  # the edges this change adds
                self._dependents.setdefault(dep, []).append(item_id)
        self._deps = {k: tuple(v) for k, v in proposed.items()}
        self._order = order

    def is_eligible(self, item_id: str, states: Mapping[str, WorkItemState]) -> bool:
        """Whether ``item_id``'s dependencies satisfy its strategy (MW-10.4-b); see
        :func:`dependencies_satisfied`. A dependency missing from ``states`` counts as not
        done."""
        deps = self._deps[item_id]
        return dependencies_satisfied(self._strategy[item_id], [states.get(d) for d in deps])

    def blocked_forever(self, item_id: str, states: Mapping[str, WorkItemState]) -> bool:
        """Whether no future state of the dependencies can ever make ``item_id`` eligible.

        True for ``all_verified`` once a dependency is ``cancelled``; for ``any_verified`` once
        every dependency is ``cancelled``. (``failed`` is not final: it may be re-offered.)
        """
        deps = self._deps[item_id]
        got = [states.get(d) for d in deps]
        match self._strategy[item_id]:
            case DependencyStrategy.ALL_VERIFIED:
                return any(s is WorkItemState.CANCELLED for s in got)
            case DependencyStrategy.ANY_VERIFIED:
                return bool(deps) and all(s is WorkItemState.CANCELLED for s in got)
        return False

    def topological_order(self) -> list[str]:
        """All ids, dependencies first (ties in insertion order)."""
        return list(self._order)

    def to_wire(self) -> dict[str, dict[str, object]]:
        """JSON form: ``{id: {"deps": [...], "strategy": "..."}}`` (insertion order kept)."""
        return {
            i: {"deps": list(d), "strategy": str(self._strategy[i])} for i, d in self._deps.items()
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Mapping[str, object]]) -> WorkGraph:
        """Rebuild from :meth:`to_wire` output (re-validated).

        Raises:
            GraphError: the data is not a valid DAG.
        """
        g = cls()
        items: dict[str, list[str]] = {}
        strategies: dict[str, DependencyStrategy] = {}
        for i, spec in data.items():
            deps = spec.get("deps", [])
            items[i] = [str(d) for d in deps] if isinstance(deps, list) else []
            strategies[i] = DependencyStrategy(str(spec.get("strategy", "all_verified")))
        g.add(items, strategies)
        return g
