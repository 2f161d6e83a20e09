"""Authorizing the Mission's WorkItems (MW-10.4-a): the spec's at the start, a batch at a time,
and those the ``authorize_work`` update adds while the Mission runs, with new edges
(:class:`Authorizations`, a part of the Mission workflow).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..protocol import CommandType, GraphError, RejectionCode, WorkGraph, WorkItemState
    from ..protocol.temporal_contract import (
        AuthorizeWorkInput,
        CommandVerdict,
        SubmitCommandsResult,
        first_duplicate,
    )
    from ._board import Board
    from ._commands import Commands, OnVerdict
    from ._input_bounds import check_new_inputs
    from ._review import refuse
    from ._run import IDLE
    from ._state import ItemState


class Authorizations:
    """``work.authorize`` and ``work.add_dependencies`` for one Mission.

    Attributes:
        unauthorized: the spec's WorkItems whose ``work.authorize`` is not queued yet, in
            dependency order (first run only): queued a batch at a time as batches are sent
            (:meth:`top_up`), since 10,000 Commands built at once would hold one workflow task
            past Temporal's deadlock bound.
    """

    def __init__(self, board: Board, commands: Commands) -> None:
        self._board = board
        self._commands = commands
        self.unauthorized: list[str] = []

    def top_up(self, n: int) -> None:
        """Queue ``work.authorize`` for the next ``n`` of the spec's WorkItems not yet queued."""
        n = max(n, 0)
        ids, self.unauthorized = self.unauthorized[:n], self.unauthorized[n:]
        for wid in ids:
            self.authorize(self._board.state.items[wid])

    def authorize(self, item: ItemState) -> str:
        """Queue ``item``'s ``work.authorize``; returns its command id."""
        return self._commands.intent(
            CommandType.WORK_AUTHORIZE,
            {
                "work_item_id": item.work_item_id,
                "mission_id": self._board.state.spec.mission_id,
                "contract": item.spec.contract.wire(),
                "dependencies": item.spec.dependencies,
            },
            self._answered(item.work_item_id),
        )

    def _answered(self, wid: str) -> OnVerdict:
        state = self._board.state

        def answered(v: CommandVerdict) -> None:
            if wid not in state.items or v.accepted:
                return
            run = self._board.run(wid)
            rej = v.rejection
            if (
                rej is not None
                and rej.code == RejectionCode.DUPLICATE_ID
                and (rej.detail.get("mission_id") == state.spec.mission_id)
            ):
                run.authorized_before()
            else:  # e.g. the id is another Mission's: WorkItem ids are unique per Group
                why = rej.reason if rej else "?"
                run.note(f"not authorized: {why}")
                state.cancel_reason = state.cancel_reason or f"{wid} not authorized: {why}"

        return answered

    async def authorize_work(self, inp: AuthorizeWorkInput) -> SubmitCommandsResult:
        """The ``authorize_work`` update (MW-10.4-a): once the Authority holds the Mission,
        :meth:`add`, then the verdicts on its Commands.

        Raises:
            ApplicationError: ``mission_closed``, the run ended without creating the Mission;
                or as :meth:`check`.
        """
        state = self._board.state
        # an update sent with the workflow's start runs before ``run`` sent ``mission.create``
        await workflow.wait_condition(lambda: state.created or state.status != "running")
        if not state.created:
            raise refuse(
                RejectionCode.MISSION_CLOSED, f"the Mission is {state.status}: {state.end_reason}"
            )
        cids = self.add(inp)
        answered = self._commands.answered
        await workflow.wait_condition(lambda: all(c in answered for c in cids))
        return SubmitCommandsResult(verdicts=[answered[c] for c in cids])

    def add(self, inp: AuthorizeWorkInput) -> list[str]:
        """Add ``inp``'s WorkItems and edges (checked again: another update that waited too
        may have added the same id or name meanwhile); returns the ids of the Commands whose
        verdicts answer the update.

        Raises:
            ApplicationError: as :meth:`check`.
        """
        self.check(inp)
        board, state = self._board, self._board.state
        board.graph.add(
            {i.work_item_id: i.dependencies for i in inp.items},
            {i.work_item_id: i.contract.dependency_strategy for i in inp.items},
            inp.edges,
        )
        for name, contract in inp.contracts.items():  # its items name them after continue-as-new
            state.spec.contracts.setdefault(name, contract)
        self.top_up(len(self.unauthorized))  # what the new items may depend on
        cids = []
        for spec in inp.items:
            item = state.items[spec.work_item_id] = ItemState(spec=spec)
            board.attention.add(spec.work_item_id)
            cids.append(self.authorize(item))
        # Edges into WorkItems authorized before: kept in their spec (the state that travels
        # through continue-as-new) and recorded by the Authority, which checks them on offers.
        added: dict[str, list[str]] = {}
        for dep, dependent in inp.edges:
            added.setdefault(dependent, []).append(dep)
        for wid, deps in added.items():
            item = state.items[wid]
            new = [d for d in dict.fromkeys(deps) if d not in item.spec.dependencies]
            if not new:
                continue  # edges it has already: nothing to record
            item.spec = item.spec.model_copy(
                update={"dependencies": [*item.spec.dependencies, *new]}
            )
            cids.append(
                self._commands.intent(
                    CommandType.WORK_ADD_DEPENDENCIES, {"work_item_id": wid, "dependencies": new}
                )
            )
        return cids

    def check(self, inp: AuthorizeWorkInput) -> None:
        """The ``authorize_work`` update's validator (MW-10.4-c).

        Raises:
            ApplicationError: its type the rejection code — the Mission is not running, an
                input is over its bounds, an id is given twice or is taken, the graph would
                have a cycle, a contract name is another contract's, or an edge reaches an
                archived WorkItem or one no longer open.
        """
        state = self._board.state
        if state.status != "running":
            raise refuse(RejectionCode.MISSION_CLOSED, f"the Mission is {state.status}")
        check_new_inputs(state, inp.items)  # what continue-as-new could not carry
        dup = first_duplicate([i.work_item_id for i in inp.items])
        if dup is not None:  # the later copy would replace the first (MW-10.4-c)
            raise refuse(RejectionCode.DUPLICATE_ID, f"WorkItem {dup} is given twice")
        trial = WorkGraph.from_wire(self._board.graph.to_wire())
        try:  # cycles, self-loops, unknown and duplicate ids (MW-10.4-c)
            trial.add({i.work_item_id: i.dependencies for i in inp.items}, edges=inp.edges)
        except GraphError as exc:
            raise refuse(exc.rejection.code, str(exc)) from None
        for name, contract in inp.contracts.items():
            if state.spec.contracts.get(name, contract) != contract:
                raise refuse(
                    RejectionCode.CONTRACT_NAME_TAKEN,
                    f"the Mission's contract {name!r} is "
                    "another contract: give this one another name",
                )
        archived_deps = [d for i in inp.items for d in i.dependencies if d in state.archived]
        archived_deps += [dep for dep, _ in inp.edges if dep in state.archived]
        if archived_deps:  # its offer would go without the dependency's Artifacts
            raise refuse(
                RejectionCode.ARCHIVED_DEPENDENCY,
                f"WorkItem {archived_deps[0]} is archived (its "
                "details left the Mission's state past its size budget): new work "
                "cannot depend on it",
            )
        for dep, dependent in inp.edges:
            if dependent in state.archived:
                raise refuse(
                    RejectionCode.NOT_OPEN,
                    f"WorkItem {dependent} is "
                    f"{state.archived[dependent].value}: edges only go into an "
                    "open WorkItem",
                )
            item = state.items.get(dependent)
            if (
                item is not None
                and dep not in item.spec.dependencies
                and (
                    item.state is not WorkItemState.OPEN
                    or self._board.runs.get(dependent, IDLE).offer_pending
                )
            ):  # no agent may hold work that a new edge says cannot start yet
                raise refuse(
                    RejectionCode.NOT_OPEN,
                    f"WorkItem {dependent} is {item.state.value}"
                    + (" (being offered)" if item.state is WorkItemState.OPEN else "")
                    + ": edges only go into an open WorkItem",
                )


__all__ = ["Authorizations"]
