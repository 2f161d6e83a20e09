"""The WorkItem state table (spec 10.2) checked exhaustively against a re-statement of the spec.

The expectations below are written from the spec text (REQUIREMENTS.md 10.2 and the rules of 10.3,
11.3 and 11.4 that name who acts), never derived from ``TRANSITIONS``: every (state, action, role)
combination is asked of :func:`check_transition` and compared with them.

Requirements: MW-10.2-a, MW-10.2-b, MW-10.2-c.
"""

from __future__ import annotations

import pytest

from missionweave.protocol import (
    TERMINAL_STATES,
    UNFINISHED_STATES,
    WORK_ACTIONS,
    Rejection,
    Role,
    Transition,
    WorkItemState,
    check_transition,
)

R = Role
ALL_STATES: list[WorkItemState | None] = [None, *WorkItemState]

# --- the table, row by row ("current state" → "next state") ----------------------------------
_OPEN_TO_SUBMITTED = {
    WorkItemState(n) for n in ("open", "offered", "queued", "active", "blocked", "submitted")
}
SPEC_ROWS: dict[str, tuple[set[WorkItemState | None], set[WorkItemState]]] = {
    # none → open work proposal
    "work.propose": ({None}, {WorkItemState.PROPOSED}),
    # none, or open proposal → open
    "work.authorize": ({None, WorkItemState.PROPOSED}, {WorkItemState.OPEN}),
    # open, offered, queued, active, blocked or failed (with no active owner) → offered
    "work.offer": (
        {
            WorkItemState.OPEN,
            WorkItemState.OFFERED,
            WorkItemState.QUEUED,
            WorkItemState.ACTIVE,
            WorkItemState.BLOCKED,
            WorkItemState.FAILED,
        },
        {WorkItemState.OFFERED},
    ),
    "work.accept_offer": ({WorkItemState.OFFERED}, {WorkItemState.QUEUED}),
    "approval.grant_execution": ({WorkItemState.QUEUED}, {WorkItemState.QUEUED}),
    "work.start": ({WorkItemState.QUEUED}, {WorkItemState.ACTIVE}),
    "work.checkpoint": ({WorkItemState.ACTIVE}, {WorkItemState.QUEUED}),
    "work.block": ({WorkItemState.ACTIVE}, {WorkItemState.BLOCKED}),
    "work.unblock": ({WorkItemState.BLOCKED}, {WorkItemState.QUEUED, WorkItemState.OPEN}),
    "work.submit": ({WorkItemState.ACTIVE}, {WorkItemState.SUBMITTED}),
    "work.accept_result": ({WorkItemState.SUBMITTED}, {WorkItemState.VERIFIED}),
    "work.fail": (_OPEN_TO_SUBMITTED, {WorkItemState.FAILED}),
    "work.cancel": (_OPEN_TO_SUBMITTED, {WorkItemState.CANCELLED}),
    "mission.create_child": (
        {
            WorkItemState.OPEN,
            WorkItemState.OFFERED,
            WorkItemState.QUEUED,
            WorkItemState.ACTIVE,
            WorkItemState.BLOCKED,
        },
        {WorkItemState.BLOCKED},
    ),
    # linked child Mission approved / failed (the declared child-failure policy decides)
    "mission.child_approved": ({WorkItemState.BLOCKED}, {WorkItemState.VERIFIED}),
    "mission.child_failed": (
        {WorkItemState.BLOCKED},
        {WorkItemState.BLOCKED, WorkItemState.FAILED},
    ),
    # parent Mission failed or cancelled: only unfinished items (never failed, verified, cancelled)
    "mission.fail": (_OPEN_TO_SUBMITTED, {WorkItemState.FAILED}),
    "mission.cancel": (_OPEN_TO_SUBMITTED, {WorkItemState.CANCELLED}),
}
# Worker reports that sections 10.3 and 11 define without a row of their own: they keep the state.
OTHER_ROWS: dict[str, tuple[set[WorkItemState | None], set[WorkItemState]]] = {
    "work.decline_offer": (
        {WorkItemState.OFFERED},
        {WorkItemState.OFFERED},
    ),  # MW-10.3-e: the offer stays offered
    "lease.renew": (
        {WorkItemState.QUEUED, WorkItemState.ACTIVE},
        {WorkItemState.QUEUED, WorkItemState.ACTIVE},
    ),  # MW-11.3-a/b: queued ownership and the execution lease are renewable leases
    # MW-11.4-b: Workers report progress while active and also when blocked
    "progress.report": (
        {WorkItemState.ACTIVE, WorkItemState.BLOCKED},
        {WorkItemState.ACTIVE, WorkItemState.BLOCKED},
    ),
}
EXPECTED = {**SPEC_ROWS, **OTHER_ROWS}

# --- who may act: (roles the spec names as actors, roles that clearly may not act) -------------
# A role in neither set is one the spec is silent about; either answer is accepted for it.
_NOT_WORKER = set(Role) - {R.WORKER}
_BYSTANDERS = {R.MEMBER, R.REVIEWER, R.OWNER}
ROLE_RULES: dict[str, tuple[set[Role], set[Role]]] = {
    "work.propose": (set(Role), set()),  # any Group member may propose
    "work.authorize": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),  # the Coordinator creates it
    "work.offer": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),  # the Coordinator offers (10.1-b)
    "work.accept_offer": ({R.WORKER}, _NOT_WORKER),  # offers go to Workers (10.3-a)
    "work.decline_offer": ({R.WORKER}, _NOT_WORKER),  # a Worker declines (10.3-e)
    "approval.grant_execution": ({R.MISSION_OWNER}, {R.MEMBER, R.WORKER}),  # never the executor
    "work.start": ({R.WORKER}, _NOT_WORKER),
    "lease.renew": ({R.WORKER}, _NOT_WORKER),
    "progress.report": ({R.WORKER}, _NOT_WORKER),
    "work.checkpoint": ({R.WORKER}, _NOT_WORKER),
    "work.block": ({R.WORKER}, _NOT_WORKER),
    "work.submit": ({R.WORKER}, _NOT_WORKER),
    # the Coordinator resolves the blocker (11.4-c)
    "work.unblock": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
    # "the Coordinator's review passes"
    "work.accept_result": ({R.COORDINATOR}, {R.MEMBER, R.WORKER, R.OWNER}),
    # the Coordinator, or the Worker reporting its own failure (11.3-c, 11.4-f)
    "work.fail": ({R.COORDINATOR, R.WORKER}, _BYSTANDERS),
    "work.cancel": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
    "mission.create_child": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
    "mission.child_approved": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
    "mission.child_failed": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
    "mission.fail": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
    "mission.cancel": ({R.COORDINATOR}, _BYSTANDERS | {R.WORKER}),
}


def test_restatement_is_self_consistent() -> None:
    assert set(EXPECTED) == set(ROLE_RULES)
    for action, (allow, deny) in ROLE_RULES.items():
        assert not allow & deny, action


def test_table_knows_exactly_the_spec_actions__MW_10_2_c() -> None:
    assert set(WORK_ACTIONS) == set(EXPECTED)


@pytest.mark.parametrize("action", sorted(EXPECTED))
def test_every_state_action_role_combination__MW_10_2_c(action: str) -> None:
    sources, targets = EXPECTED[action]
    allow, deny = ROLE_RULES[action]
    wrong: list[str] = []
    for state in ALL_STATES:
        for role in Role:
            verdict = check_transition(state, action, {role})
            if state not in sources:
                ok = isinstance(verdict, Rejection) and (
                    verdict.code == "transition_not_allowed"
                    or (role in deny and verdict.code == "role_not_allowed")
                )
            elif role in deny:
                ok = isinstance(verdict, Rejection) and verdict.code == "role_not_allowed"
            elif role in allow:
                ok = isinstance(verdict, Transition) and set(verdict.targets) == targets
            else:  # the spec does not say whether this role may act
                ok = (isinstance(verdict, Transition) and set(verdict.targets) == targets) or (
                    isinstance(verdict, Rejection) and verdict.code == "role_not_allowed"
                )
            if not ok:
                wrong.append(f"{state} --{action}--> as {role}: {verdict!r}")
    assert wrong == []


@pytest.mark.parametrize("action", sorted(EXPECTED))
def test_no_roles_no_transition__MW_10_2_c(action: str) -> None:
    sources, _ = EXPECTED[action]
    for state in ALL_STATES:
        verdict = check_transition(state, action, set())
        assert isinstance(verdict, Rejection)
        assert verdict.code in {"transition_not_allowed", "role_not_allowed"}
        if state in sources:
            assert verdict.code == "role_not_allowed"


def test_any_one_allowed_role_suffices__MW_10_2_c() -> None:
    coordinator_account = {R.OWNER, R.COORDINATOR, R.MISSION_OWNER}
    assert isinstance(
        check_transition(WorkItemState.OPEN, "work.offer", coordinator_account), Transition
    )
    assert isinstance(
        check_transition(WorkItemState.OFFERED, "work.accept_offer", {R.REVIEWER, R.WORKER}),
        Transition,
    )
    verdict = check_transition(WorkItemState.OFFERED, "work.accept_offer", coordinator_account)
    assert isinstance(verdict, Rejection) and verdict.code == "role_not_allowed"


def test_terminal_states_have_no_outgoing_transition__MW_10_2_a() -> None:
    assert set(TERMINAL_STATES) == {WorkItemState.VERIFIED, WorkItemState.CANCELLED}
    everyone = set(Role)
    for state in (WorkItemState.VERIFIED, WorkItemState.CANCELLED):
        for action in sorted(WORK_ACTIONS):
            verdict = check_transition(state, action, everyone)
            assert isinstance(verdict, Rejection), (state, action)
            assert verdict.code == "transition_not_allowed"


def test_failed_leaves_only_by_a_new_offer__MW_10_2_b() -> None:
    everyone = set(Role)
    allowed = {
        a
        for a in WORK_ACTIONS
        if isinstance(check_transition(WorkItemState.FAILED, a, everyone), Transition)
    }
    assert allowed == {"work.offer"}
    verdict = check_transition(WorkItemState.FAILED, "work.offer", {R.COORDINATOR})
    assert isinstance(verdict, Transition) and verdict.targets == (WorkItemState.OFFERED,)


@pytest.mark.parametrize("action", ["mission.fail", "mission.cancel"])
def test_mission_end_reaches_only_unfinished_items__MW_10_2_b(action: str) -> None:
    assert set(UNFINISHED_STATES) == _OPEN_TO_SUBMITTED
    everyone = set(Role)
    reached = {
        s for s in ALL_STATES if isinstance(check_transition(s, action, everyone), Transition)
    }
    assert reached == _OPEN_TO_SUBMITTED
    assert WorkItemState.FAILED not in reached


def test_stale_revision_is_rejected__MW_10_2_c() -> None:
    worker = {R.WORKER}
    stale = check_transition(
        WorkItemState.OFFERED, "work.accept_offer", worker, revision=1, current_revision=2
    )
    assert isinstance(stale, Rejection) and stale.code == "stale_revision"
    assert stale.detail == {"revision": 1, "current_revision": 2}
    ahead = check_transition(
        WorkItemState.OFFERED, "work.accept_offer", worker, revision=3, current_revision=2
    )
    assert isinstance(ahead, Rejection) and ahead.code == "stale_revision"
    current = check_transition(
        WorkItemState.OFFERED, "work.accept_offer", worker, revision=2, current_revision=2
    )
    assert isinstance(current, Transition)
    unnamed = check_transition(
        WorkItemState.OFFERED, "work.accept_offer", worker, current_revision=2
    )
    assert isinstance(unnamed, Transition)
    # the revision never unlocks a state the table forbids
    wrong_state = check_transition(
        WorkItemState.QUEUED, "work.accept_offer", worker, revision=2, current_revision=2
    )
    assert isinstance(wrong_state, Rejection) and wrong_state.code == "transition_not_allowed"


def test_unknown_action_is_rejected__MW_10_2_c() -> None:
    for action in ("work.teleport", "", "WORK.OFFER", "work.offer "):
        verdict = check_transition(WorkItemState.OPEN, action, set(Role))
        assert isinstance(verdict, Rejection) and verdict.code == "unknown_action"


def test_rejection_names_the_facts__MW_10_2_c() -> None:
    verdict = check_transition(WorkItemState.SUBMITTED, "work.start", {R.WORKER})
    assert isinstance(verdict, Rejection)
    assert verdict.detail["state"] == "submitted"
    assert verdict.detail["allowed_from"] == ["queued"]
    none = check_transition(None, "work.start", {R.WORKER})
    assert isinstance(none, Rejection) and none.detail["state"] is None
