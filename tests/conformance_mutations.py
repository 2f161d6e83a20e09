"""The recorded mutations behind ``docs/spec/CONFORMANCE.md`` — one home for this data.

For each MUST requirement: one or more small changes to the code that enforces it (a removed
condition, an inverted comparison, a skipped call), each as ``(file, exact old text, new text)``,
with the tests of that row that must fail once it is applied. ``python -m tests.conformance
--mutate`` applies each in a scratch copy and runs only those tests
(:mod:`tests.conformance_mutate`); the table counts a row OK only when every mutation of it names
its killing tests and its file holds the row's ``Implements MW-…`` line.

* ``old`` must occur exactly once in ``file``: when code moves, the mutation is refused and must
  be written again here.
* ``expected`` is ``"killed"``, or ``"survives (issue 38 item 4, row MW-…)"`` for a rule the code
  does not yet hold (a weak row another change will make whole): recorded so that the list is
  honest, listed by the run, and shown not OK in the table.
* :data:`READINGS`: MUST rows no code can enforce (the requirement binds the agent's own
  conduct), each with the heading of its written reading in ``docs/spec/READINGS.md``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """One change that takes a piece of row ``row`` out of the code.

    Attributes:
        row: the requirement id, ``MW-11.3-c``.
        file: the file changed, relative to the repository root.
        old: text that occurs exactly once in ``file``.
        new: what replaces it.
        tests: pytest node ids (``path::test``, a parametrized test whole) that must fail.
        expected: ``"killed"``, or ``"survives (issue 38 item 4, row …)"``.
    """

    row: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    expected: str = "killed"


def _m(row: str, file: str, old: str, new: str, *tests: str, expected: str = "killed") -> Mutation:
    return Mutation(row, file, old, new, tests, expected)


_AUTH = "missionweave/authority/core/"
_WORKER = "missionweave/worker/"
_PROTO = "missionweave/protocol/"

#: MUST rows no code can enforce: row id → heading anchor in docs/spec/READINGS.md.
READINGS: dict[str, str] = {}

MUTATIONS: tuple[Mutation, ...] = (
    _m("MW-10.1-a", _PROTO + "_contract.py",
       "deliverables: list[Deliverable] = Field(min_length=1,",
       "deliverables: list[Deliverable] = Field(default_factory=list,",
       "tests/protocol/test_contract.py::test_contract_requires_every_field__MW_10_1_a"),
    _m("MW-10.1-b", _AUTH + "_handlers_work.py",
       "    if contract.open_questions:\n",
       "    if False:\n",
       "tests/authority/test_offers.py::"
       "test_ambiguous_contract_cannot_be_accepted_until_reoffered__MW_10_1_b"),
    _m("MW-10.1-b", _WORKER + "_admission.py",
       "        if c.open_questions:\n",
       "        if False:\n",
       "tests/worker/test_admission.py::test_admission_decides_each_reason__MW_10_3_d_e"),
    _m("MW-10.1-d", _PROTO + "_contract.py",
       'objective: str = Field(min_length=1, description="what the WorkItem is for")',
       'objective: str = Field(default="see notes", description="what the WorkItem is for")',
       "tests/protocol/test_contract.py::test_notes_cannot_replace_contract_fields__MW_10_1_d"),
    _m("MW-10.2-c", _PROTO + "_states.py",
       "    if state not in row.sources:\n",
       "    if False:\n",
       "tests/protocol/test_states.py::test_every_state_action_role_combination__MW_10_2_c"),
    _m("MW-10.2-c", _PROTO + "_states.py",
       "    if not (row.roles & set(roles)):\n",
       "    if False:\n",
       "tests/protocol/test_states.py::test_every_state_action_role_combination__MW_10_2_c"),
    _m("MW-10.3-a", _PROTO + "_work_item.py",
       '                offer_candidates=tuple(str(c) for c in b["candidates"]),\n',
       '                offer_candidates=tuple(str(c) for c in b["candidates"]),\n'
       '                owner=str(b["candidates"][0]),\n',
       "tests/authority/test_offers.py::test_offer_reserves_no_ownership_and_is_durable__MW_10_3_a"),
    _m("MW-10.3-d", _WORKER + "_admission.py",
       "        if waits and req.queue_depth >= self.policy.max_queue_depth:\n",
       "        if False:\n",
       "tests/worker/test_admission.py::test_admission_decides_each_reason__MW_10_3_d_e"),
    _m("MW-10.3-e", _AUTH + "_handlers_work.py",
       "    if not _REASON.match(reason):\n",
       "    if False:\n",
       "tests/authority/test_offers.py::test_decline_carries_structured_reason__MW_10_3_e"),
    _m("MW-10.3-e", _WORKER + "_admission.py",
       "        if c.deadline_ms is not None and req.now_ms + wait + estimate > c.deadline_ms:\n",
       "        if False:\n",
       "tests/worker/test_admission.py::test_admission_decides_each_reason__MW_10_3_d_e"),
    _m("MW-10.3-f", _AUTH + "_selection.py",
       "    if extra:  # free-form rationale (private chain-of-thought) has no field\n",
       "    if False:\n",
       "tests/authority/test_offers.py::"
       "test_an_incomplete_or_untrue_selection_basis_is_refused__MW_10_3_f"),
    _m("MW-10.4-c", _PROTO + "_dag.py",
       "graphlib.TopologicalSorter(proposed).static_order()",
       "graphlib.TopologicalSorter({}).static_order()",
       "tests/protocol/test_dag.py::test_cycle_is_rejected_and_named__MW_10_4_c"),
    _m("MW-10.4-c", _PROTO + "_dag.py",
       "                if dep == item_id:\n",
       "                if False:\n",
       "tests/protocol/test_dag.py::test_self_loop_is_rejected__MW_10_4_c"),
    _m("MW-11.1-a", _PROTO + "temporal_contract.py",
       'return f"missionweave-agent-{agent_id}/{group_id}"',
       'return f"missionweave-agent-{agent_id}"',
       "tests/worker/test_group_inboxes.py::"
       "test_one_group_s_flood_does_not_hold_back_another_s_offer__MW_11_1_a"),
    _m("MW-11.1-c", _AUTH + "_handlers_schedule.py",
       '    if not {"owner", "mission_owner"} & set(ctx.roles):\n',
       "    if False:\n",
       "tests/authority/test_schedule.py::"
       "test_a_groups_priority_is_set_by_policy_or_the_mission_owner_never_a_coordinator__MW_11_1_c"),
    _m("MW-11.1-c", _WORKER + "_scheduler.py",
       "            overdue = [i for g in ready for i in ready[g] if i.queued_at_ms <= bound]\n",
       "            overdue = []\n",
       "tests/worker/test_scheduler.py::"
       "test_no_item_waits_past_the_bound_whatever_its_weight__MW_11_1_c"),
    _m("MW-11.1-d", _WORKER + "_scheduler.py",
       "self.vt[key] = self.vt.get(key, 0.0) + ms / weight",
       "self.vt[key] = self.vt.get(key, 0.0) + ms",
       "tests/worker/test_scheduler.py::"
       "test_each_groups_share_of_slot_time_is_within_5_percent_of_its_weight__MW_11_1_d"),
    _m("MW-11.1-e", _WORKER + "_scheduler.py",
       "                if (it.group_id, it.work_item_id) in seen:\n",
       "                if False:\n",
       "tests/worker/test_scheduler_adversarial.py::test_an_item_listed_twice_starts_once__MW_11_1_e"),
    _m("MW-11.2-b", _AUTH + "_handlers_schedule.py",
       '    body = _exact(ctx.body, _DISCLOSURE, "body")\n',
       "    body = dict(ctx.body)\n",
       "tests/authority/test_schedule.py::"
       "test_a_disclosure_of_another_shape_or_epoch_is_refused_and_writes_nothing__MW_11_2_b"),
    _m("MW-11.3-a", _AUTH + "_handlers_work.py",
       '    epoch = item["ownership_epoch"] + 1\n',
       '    epoch = item["ownership_epoch"]\n',
       "tests/authority/test_offers.py::test_ownership_grant_has_epoch_and_start_deadline__MW_11_3_a"),
    _m("MW-11.3-a", _AUTH + "_items.py",
       "    expires = min(ctx.now_ms + contract_of(item).timeouts.lease_ms, start_deadline_ms)\n",
       "    expires = ctx.now_ms + contract_of(item).timeouts.lease_ms\n",
       "tests/authority/test_queued_ownership.py::"
       "test_queued_ownership_is_a_renewable_fenced_lease__MW_11_3_a"),
    _m("MW-11.3-c", _AUTH + "_fence.py",
       '    if _current_lease_id(ctx, item, lease) != lease_id or lease["status"] != "active":\n',
       '    if lease["status"] != "active":\n',
       "tests/authority/test_leases.py::test_old_lease_id_rejected_with_same_epoch__MW_11_3_c"),
    _m("MW-11.3-f", _AUTH + "_handlers_admin.py",
       '        "leases.active_execution_of_agent",\n        agent,\n    ):\n',
       '        "leases.active_execution_of_agent",\n        agent,\n    )[:0]:\n',
       "tests/authority/test_leases.py::test_new_session_revokes_leases_and_requeues_first__MW_11_3_f"),
    _m("MW-11.4-a", _PROTO + "_records.py",
       "    phase: str = Field(min_length=1)\n",
       "    phase: str = Field(min_length=1)\n    percent: int | None = None\n",
       "tests/authority/test_leases.py::test_progress_is_structured_not_a_percentage__MW_11_4_a"),
    _m("MW-11.4-c", _AUTH + "_handlers_lease.py",
       "    if not resolution or not isinstance(resolution, (str, dict)):\n",
       "    if False:\n",
       "tests/authority/test_leases.py::"
       "test_blocked_needs_resolution_and_bounded_blocked_lease__MW_11_4_c"),
)
