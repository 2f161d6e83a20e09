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

#: MUST rows, or the part of one, that no code can enforce (the agent's own conduct): row id →
#: heading anchor of its reading in docs/spec/READINGS.md. A row with no mutation and a reading
#: is shown ``reading``; one with both shows its mutations' status and links the reading.
READINGS: dict[str, str] = {
    "MW-13.2-d": "mw-132-d--private-chain-of-thought-in-an-evidence-summary",
}

# fmt: off
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
       "    missing = [f for f in REQUIRED_FIELDS if raw.get(f) is None]\n",
       "    missing: list[str] = []\n",
       "tests/authority/test_offers.py::"
       "test_an_incomplete_or_untrue_selection_basis_is_refused__MW_10_3_f"),
    _m("MW-10.3-f", _AUTH + "_selection.py",
       "    if not basis.authorization_eligible:\n",
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
       "test_a_hold_never_outlives_the_start_deadline__MW_11_3_a"),
    _m("MW-11.3-a", _AUTH + "_items.py",
       "    if deadline is not None:\n        expires = min(expires, int(deadline))\n",
       "    if False:\n        expires = min(expires, int(deadline))\n",
       "tests/authority/test_queued_ownership.py::"
       "test_a_hold_never_outlives_the_start_deadline__MW_11_3_a"),
    _m("MW-11.3-c", _AUTH + "_fence.py",
       '    if _current_lease_id(ctx, item, lease) != lease_id or lease["status"] != "active":\n',
       "    if False:\n",
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
    _m("MW-11.1-b", _WORKER + "_state.py",
       "            self._projector.project(event)\n",
       "            pass\n",
       "tests/worker/test_state.py::test_per_group_state_rebuilt_by_replay__MW_11_1_b"),
    _m("MW-11.3-g", _WORKER + "_scheduler.py",
       "victims = [r for r in running if r.interruptible and r not in out]",
       "victims = [r for r in running if r not in out]",
       "tests/worker/test_admission.py::test_starving_group_triggers_cooperative_preemption__MW_11_3_g"),
    _m("MW-11.4-e", _PROTO + "_ids.py",
       'canonical_bytes(["mw-attempt-v1", key, attempt])',
       'canonical_bytes(["mw-attempt-v1", key, 1])',
       "tests/protocol/test_ids.py::test_attempt_keys_deterministic_and_distinct__MW_11_4_e"),
    _m("MW-11.5-b", _AUTH + "_handlers_results.py",
       "            _late(ctx, item, r)\n            return False\n",
       "            _late(ctx, item, r)\n            return True\n",
       "tests/authority/test_leases.py::"
       "test_lease_timeout_reassign_and_late_result_only_audited__MW_11_5_a__MW_11_5_b"),
    _m("MW-11.5-b", _AUTH + "_handlers_results.py",
       "            if check is not None:\n                check()\n",
       "            pass\n",
       "tests/authority/test_submit_artifacts.py::"
       "test_a_late_result_is_checked_before_it_is_recorded__MW_11_5_b"),
    _m("MW-11.5-d", _WORKER + "_fence.py",
       "        if self.irreversible(reversible):\n            await session.confirm()\n",
       "        if False:\n            await session.confirm()\n",
       "tests/worker/test_offline_context.py::"
       "test_mw_11_5_d_an_irreversible_effect_waits_for_a_confirmed_lease"),
    _m("MW-11.5-d", _WORKER + "_fence.py",
       "        if session.lost is not None:\n            raise session.lost\n"
       "        if self.irreversible(reversible):\n",
       "        if self.irreversible(reversible):\n",
       "tests/worker/test_execute.py::test_no_effect_once_the_lease_is_known_lost__MW_11_5_d"),
    _m("MW-11.5-e", _WORKER + "_lease.py",
       "        await self.reconcile()\n"
       "        try:\n            result = await self.client.submit(",
       "        try:\n            result = await self.client.submit(",
       "tests/worker/test_offline_context.py::"
       "test_mw_11_5_c_progress_buffered_durably_and_reconciled_first"),
    _m("MW-11.5-e", _WORKER + "_offline.py",
       "        if len(buffer):\n            try:\n                done = await reconcile(",
       "        if False:\n            try:\n                done = await reconcile(",
       "tests/worker/test_offline_reconnect.py::"
       "test_progress_of_an_execution_ended_offline_reconciled_on_reconnection__MW_11_5_e",
       "tests/worker/test_offline_e2e.py::"
       "test_agent_restarted_while_offline_reconciles_its_buffer__MW_11_5_e"),
    _m("MW-11.5-e", _WORKER + "_fence.py",
       "    if session.offline or (session.buffer is not None and len(session.buffer)):\n",
       "    if session.offline:\n",
       "tests/worker/test_offline_context.py::"
       "test_no_slot_acts_before_anothers_buffer_is_reconciled__MW_11_5_e"),
    _m("MW-11.5-f", _AUTH + "_dispatch.py",
       "        if unsupported is not None:\n",
       "        if False:\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_mw_11_5_f_unknown_critical_extension_rejected_writing_nothing"),
    _m("MW-11.5-f", _AUTH + "_dispatch.py",
       "        if BOUNDED_OFFLINE_EXECUTION not in cmd.critical_extensions:\n",
       "        if False:\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_mw_11_5_f_binding_is_critical_and_recorded_in_the_log"),
    _m("MW-11.5-g", _WORKER + "_offline.py",
       "        issued_at_ms=now_ms,\n",
       "        issued_at_ms=command.issued_at_ms,\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_rebase_keeps_binding_and_id_with_current_epochs__MW_11_5_g"),
    _m("MW-11.5-h", _AUTH + "_handlers_offline.py",
       '    if not (\n        lease["started_at_ms"] <= b.disconnected_at_ms',
       '    if False and not (\n        lease["started_at_ms"] <= b.disconnected_at_ms',
       "tests/authority/test_offline_reconcile.py::"
       "test_progress_buffered_past_the_grace_deadline_rejected__MW_11_5_h"),
    _m("MW-11.5-h", _AUTH + "_handlers_offline.py",
       '    if item["owner"] != cmd.actor or item["ownership_epoch"] != b.ownership_epoch:\n',
       "    if False:\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_progress_from_a_former_owner_rejected__MW_11_5_h"),
    _m("MW-11.5-h", _AUTH + "_handlers_offline.py",
       "    if not active and not _superseded_by_own_session(ctx, lease, item):\n",
       "    if False:\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_progress_after_the_lease_was_closed_rejected__MW_11_5_h"),
    _m("MW-11.5-h", _AUTH + "_handlers_offline.py",
       "    _refuse_without_role(ctx)\n",
       "    pass\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_progress_refused_after_the_owner_lost_the_worker_role__MW_11_5_h"),
    _m("MW-11.5-h", _AUTH + "_handlers_offline.py",
       "    _refuse_lapsed(ctx, item, lease, grace)\n",
       "    pass\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_progress_refused_once_the_ownership_lapsed__MW_11_5_h"),
    _m("MW-10.2-c", _AUTH + "_handlers_children.py",
       "    if not verified:  # Implements MW-10.2-c: completed with no work is no result\n",
       "    if False:\n",
       "tests/authority/test_children.py::"
       "test_a_child_result_is_held_to_accept_results_rules__MW_10_2_c"),
    _m("MW-10.2-c", _AUTH + "_handlers_children.py",
       '    if any(c.kind == "human" for c in contract.acceptance_criteria) and not any(',
       '    if False and not any(',
       "tests/authority/test_children.py::"
       "test_a_child_result_is_held_to_accept_results_rules__MW_10_2_c"),
    _m("MW-11.5-j", _AUTH + "_budgets.py",
       "    if open_dims:  # Implements MW-11.5-j: an unbounded child could overrun the parent\n",
       "    if False:\n",
       "tests/activities/test_child_usage.py::"
       "test_a_child_in_another_group_cannot_overrun_its_parents_budget__MW_11_5_j"),
    _m("MW-11.5-j", _AUTH + "_budgets.py",
       "        budget = _within(budget or Budget(wall_clock_ms=None), allowance)\n",
       "        pass\n",
       "tests/activities/test_child_usage.py::"
       "test_a_child_in_another_group_cannot_overrun_its_parents_budget__MW_11_5_j"),
    _m("MW-11.5-i", _AUTH + "_handlers_offline.py",
       "    if b.usage != ResourceUsage():\n",
       "    if False:\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_mw_11_5_i_reconciliation_charges_ancestry_and_names_both_sessions"),
    _m("MW-11.5-i", _AUTH + "_budgets.py",
       '        mission = parent.get("mission_id")\n    return totals\n',
       "        break\n    return totals\n",
       "tests/authority/test_children.py::"
       "test_child_charge_reaches_its_parent_in_the_same_group__MW_11_5_i"),
    _m("MW-11.5-j", _AUTH + "_budgets.py",
       "    over = total.over(contract_of(item).budget)\n    if over:\n",
       "    over = total.over(contract_of(item).budget)\n    if False:\n",
       "tests/authority/test_leases.py::test_budget_overrun_rejects_charge_and_progress__MW_11_5_j"),
    _m("MW-11.5-j", _AUTH + "_budgets.py",
       "            if over:\n                raise Reject(\n",
       "            if False:\n                raise Reject(\n",
       "tests/authority/test_offline_reconcile.py::"
       "test_mw_11_5_j_mission_budget_overrun_rejects_charge_and_progress"),
    _m("MW-13.1-a", "missionweave/artifacts/_fs.py",
       "        h = hashlib.sha256(data).hexdigest()\n"
       "        if not self._present(h, len(data)):\n",
       "        h = hashlib.sha256(data).hexdigest()\n        if False:\n",
       "tests/artifacts/test_store.py::test_put_get_by_our_sha256__MW_13_1_a"),
    _m("MW-13.1-b", _PROTO + "_artifacts.py",
       "    classification: Classification\n",
       "    classification: Classification | None = None\n",
       "tests/artifacts/test_manifest.py::test_every_manifest_field_is_required__MW_13_1_b"),
    _m("MW-13.1-b", _PROTO + "_artifacts.py",
       "    return signed.verified_by(public_key)\n",
       "    return True\n",
       "tests/artifacts/test_manifest.py::test_manifest_sign_verify_and_tamper__MW_13_1_b"),
    _m("MW-13.1-d", "missionweave/artifacts/_fs.py",
       "        if actual != content_hash:\n",
       "        if False:\n",
       "tests/artifacts/test_store.py::test_read_verifies_hash__MW_13_1_d"),
    _m("MW-13.2-a", _AUTH + "_submission.py",
       "    if missing:\n        raise Reject(\n            RejectionCode.EVIDENCE_MISSING,",
       "    if False:\n        raise Reject(\n            RejectionCode.EVIDENCE_MISSING,",
       "tests/authority/test_leases.py::test_submission_needs_evidence_for_every_criterion__MW_13_2_a"),
    _m("MW-13.2-c", _PROTO + "_records.py",
       "    method: str = Field(min_length=1)\n    result: str = Field(",
       '    method: str = ""\n    result: str = Field(',
       "tests/authority/test_approval.py::"
       "test_evidence_has_every_field_and_no_transcript__MW_13_2_c__MW_13_2_d"),
    _m("MW-13.2-d", _PROTO + "_records.py",
       "    model_config = _STRICT\n    subject: str = Field(min_length=1)\n",
       '    model_config = ConfigDict(extra="allow", frozen=True)\n'
       "    subject: str = Field(min_length=1)\n",
       "tests/authority/test_approval.py::"
       "test_evidence_has_every_field_and_no_transcript__MW_13_2_c__MW_13_2_d"),
    _m("MW-13.2-d", "missionweave/agents/_conversation.py",
       "ModelMessagesTypeAdapter.dump_json(without_private_reasoning(messages))",
       "ModelMessagesTypeAdapter.dump_json(messages)",
       "tests/agents/test_durable_conversation.py::"
       "test_private_reasoning_never_leaves_the_process__MW_13_2_d"),
    _m("MW-13.3-a", _AUTH + "_handlers_context.py",
       '    if member is None or not verify_context_package(signed, member["public_key"]):\n',
       "    if member is None:\n",
       "tests/authority/test_context_packages.py::test_broken_chain_rejected__MW_13_3_c"),
    _m("MW-13.3-d", _AUTH + "_handlers_context.py",
       "        if verdict is not True and verdict.code != RejectionCode.UNKNOWN_ARTIFACT:\n",
       "        if False:\n",
       "tests/authority/test_mission_content.py::"
       "test_contract_inputs_of_another_mission_refused__MW_13_3_d"),
    _m("MW-13.3-d", _AUTH + "_possession.py",
       "    if not possession(ctx, item, h):\n        raise Reject(",
       "    if False:\n        raise Reject(",
       "tests/artifacts/test_possession.py::"
       "test_a_squat_is_refused_and_the_producer_publishes__MW_13_3_d"),
    _m("MW-13.3-d", _AUTH + "_artifact_access.py",
       "    return None if ok else unreadable(group_id, artifact_hash)\n",
       "    return None\n",
       "tests/artifacts/test_possession.py::"
       "test_a_squat_is_refused_and_the_producer_publishes__MW_13_3_d"),
    _m("MW-13.3-d", _AUTH + "_artifact_access.py",
       "        if operator:\n            return None\n        return _refusal(",
       "        if True:\n            return None\n        return _refusal(",
       "tests/artifacts/test_possession.py::"
       "test_a_squat_is_refused_and_the_producer_publishes__MW_13_3_d"),
    _m("MW-13.3-e", _WORKER + "_scheduler.py",
       "    estimate_ms: int = 60_000\n",
       '    estimate_ms: int = 60_000\n    objective: str = ""\n',
       "tests/worker/test_scheduler.py::test_the_scheduler_sees_metadata_only__MW_13_3_e"),
    _m("MW-16-a", "missionweave/authority/client/_sequencer.py",
       "        if event.seq <= self.cursor or event.event_id in self._done_ids:\n",
       "        if False:\n",
       "tests/authority/test_subscriber.py::test_duplicates_dropped_by_event_id__MW_16_a"),
    _m("MW-16-a", _WORKER + "_state.py",
       "            if event.seq <= applied:\n",
       "            if False:\n",
       "tests/worker/test_state.py::test_redelivered_event_is_applied_once__MW_16_a"),
    _m("MW-16-b", "missionweave/authority/client/_sequencer.py",
       "        ev = self._pending.get(self.cursor + 1)\n",
       "        ev = min(self._pending.values(), key=lambda e: e.seq, default=None)\n",
       "tests/authority/test_subscriber.py::"
       "test_out_of_order_buffered_and_cursor_never_crosses_gap__MW_16_b"),
    _m("MW-16-b", "missionweave/authority/client/_sequencer.py",
       "        first = self._pending.get(self.cursor + 1)\n",
       "        first = min(self._pending.values(), key=lambda e: e.seq, default=None)\n",
       "tests/authority/test_subscriber_forgeries.py::"
       "test_a_fresh_subscriber_applies_nothing_across_a_gap__MW_16_b"),
    _m("MW-16-c", _AUTH + "_reads.py",
       '            self.store.run("cursors.advance", group_id, agent_id, seq, self.clock())\n',
       '            self.store.run("cursors.advance", group_id, agent_id, seq, self.clock())\n'
       '            self.store.run("events.delete_archived", group_id, seq)\n',
       "tests/authority/test_log.py::test_ack_never_deletes_history__MW_16_c"),
    _m("MW-16-f", _PROTO + "_ids.py",
       "canonical_bytes([tag, mission_id, work_item_id, ownership_epoch, operation_id])",
       "canonical_bytes([tag, mission_id, work_item_id, 0, operation_id])",
       "tests/protocol/test_ids.py::test_pinned_regression_vector__MW_16_f"),
    _m("MW-16-f", _PROTO + "_ids.py",
       "data = canonical_bytes([tag, group_id, mission_id,",
       'data = canonical_bytes([tag, "", mission_id,',
       "tests/protocol/test_ids.py::test_two_groups_never_derive_one_key__MW_16_f"),
)
# fmt: on
