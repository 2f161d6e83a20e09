"""The coordinator's activities: what the Mission workflow calls.

Activities are methods on :class:`CoordinatorActivities`, which holds the Authority client, the
coordinator's signing identity and the review checks. Signing happens here, never in the
workflow (DESIGN §5).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..authority.client import AuthorityClient, CursorTooOldError
from ..protocol import Actor, Command, Evidence, SelectionBasis, sign_command
from ..protocol.mission import (
    Candidate,
    ReviewInput,
    ReviewResult,
    ReviewStep,
    SelectCandidatesBatch,
    SelectCandidatesBatchResult,
    SelectCandidatesInput,
    SelectCandidatesResult,
    SubmitCommandsInput,
    SubmitCommandsResult,
)

log = logging.getLogger(__name__)

#: A deterministic check: given the submitted outputs and Evidence, ``None`` when it passes or
#: a short reason when it fails. Registered by name; contracts cite it in ``criterion.check``.
Check = Callable[[Mapping[str, Any], list[Evidence]], str | None]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def capability_matches(offered: list[str], required: list[str]) -> list[str] | None:
    """The card capabilities that satisfy ``required`` (``id@semver``: same id, same major
    version, minor ≥), or ``None`` when one is missing."""
    out = []
    for req in required:
        rid, _, rver = req.partition("@")
        rmaj, _, rmin = rver.partition(".")
        hit = None
        for cap in offered:
            cid, _, cver = cap.partition("@")
            cmaj, _, cmin = cver.partition(".")
            if cid == rid and cmaj == rmaj and _int(cmin) >= _int(rmin):
                hit = cap
                break
        if hit is None:
            return None
        out.append(hit)
    return out


def _int(s: str) -> int:
    head = s.split(".")[0]
    return int(head) if head.isdigit() else 0


class CoordinatorActivities:
    """The Mission workflow's activities.

    Args:
        authority: the Authority client.
        coordinator: the coordinator's identity (its key signs every coordinator Command).
        checks: deterministic review checks by name (MW-13.2-b step 2).
        schemas: JSON Schemas by id, for deliverables that name a ``schema_id`` (step 1).
    """

    def __init__(
        self,
        authority: AuthorityClient,
        coordinator: Actor,
        *,
        checks: Mapping[str, Check] | None = None,
        schemas: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        self.authority = authority
        self.coordinator = coordinator
        self.checks = dict(checks or {})
        self.schemas = dict(schemas or {})

    def _sign(self, group_id: str, intent: Any) -> Command:
        cmd = Command(
            command_id=intent.command_id, group_id=group_id, type=intent.type,
            actor=self.coordinator.agent_id, issued_at_ms=intent.issued_at_ms,
            membership_epoch=self.coordinator.membership_epochs.get(group_id, 1),
            body=intent.body,
        )  # fmt: skip
        return sign_command(cmd, self.coordinator.key)

    @activity.defn(name="submit_commands")
    async def submit_commands(self, inp: SubmitCommandsInput) -> SubmitCommandsResult:
        """Sign the workflow's intents and submit the whole batch, in order, in one request.

        The workflow fixes each intent's id and issue time, so a retried activity re-signs
        byte-identical Commands and the Authority answers them idempotently. A
        ``stale_membership_epoch`` refusal of an intent is corrected once (the refusal names the
        current epoch) and that Command is sent again.

        This runs as a *local* activity: one that ran in a workflow task that then failed (an
        ``UnhandledCommand`` race, a crashed coordinator) runs again in the retried task, where
        ``workflow.now()`` — the intent's issue time — has moved on. The re-signed Command then
        differs from the one the Authority already applied (``idempotency_conflict``); the
        original, found in the Group log, is sent again instead so that the workflow gets the
        verdict the Authority actually gave (:meth:`_originals`).

        Raises:
            AuthorityUnavailable: the Authority cannot be reached (Temporal retries).
        """
        cmds = [
            e.command if e.command is not None else self._sign(inp.group_id, e.intent)
            for e in inp.entries
        ]
        results = [r.verdict() for r in await self.authority.submit_many(cmds)]
        redo = [
            i for i, (e, v) in enumerate(zip(inp.entries, results, strict=True))
            if e.intent is not None and v.rejection is not None
            and v.rejection.code == "stale_membership_epoch"
        ]  # fmt: skip
        if redo:
            current = results[redo[0]].rejection.detail.get("current")  # type: ignore[union-attr]
            if isinstance(current, int):
                self.coordinator.membership_epochs[inp.group_id] = current
                again = await self.authority.submit_many(
                    [self._sign(inp.group_id, inp.entries[i].intent) for i in redo]
                )
                for i, r in zip(redo, again, strict=True):
                    results[i] = r.verdict()
        conflicts = {
            cmds[i].command_id: i for i, (e, v) in enumerate(zip(inp.entries, results, strict=True))
            if e.intent is not None and v.rejection is not None
            and v.rejection.code == "idempotency_conflict"
        }  # fmt: skip
        if conflicts:
            found = await self._originals(
                inp.group_id, {cid: cmds[i] for cid, i in conflicts.items()}
            )
            if found:
                repeated = await self.authority.submit_many(list(found.values()))
                for cid, r in zip(found, repeated, strict=True):
                    results[conflicts[cid]] = r.verdict()
        return SubmitCommandsResult(verdicts=results)

    async def _originals(
        self, group_id: str, wanted: Mapping[str, Command], *, pages: int = 20, page: int = 1000
    ) -> dict[str, Command]:
        """The signed Commands the Authority accepted under ``wanted``'s ids, read from the
        newest ``pages`` × ``page`` Events of the Group log (an accepted Command's first Event
        carries it whole). Only the same decision is taken for the original: same actor, type,
        WorkItem and Mission (the bodies may differ in times, e.g. review Evidence)."""
        found: dict[str, Command] = {}
        upper, _ = await self.authority.head(group_id)
        for _ in range(pages):
            if upper <= 0 or len(found) == len(wanted):
                break
            after = max(0, upper - page)
            try:
                events = await self.authority.events(group_id, after, upper - after)
            except CursorTooOldError:
                break
            for ev in events:
                new = wanted.get(ev.command_id or "")
                if new is None or ev.command is None or ev.command_id in found:
                    continue
                old = Command.model_validate(ev.command)
                if (old.actor, old.type) == (new.actor, new.type) and all(
                    old.body.get(k) == new.body.get(k) for k in ("work_item_id", "mission_id")
                ):
                    found[new.command_id] = old
            upper = after
        if len(found) < len(wanted):
            log.warning("idempotency conflict unresolved: %s", sorted(set(wanted) - set(found)))
        return found

    @activity.defn(name="select_candidates")
    async def select_candidates(self, inp: SelectCandidatesBatch) -> SelectCandidatesBatchResult:
        """Rank agents for each request (MW-10.3-b/f): capability match (same id, same major
        version), the worker role, Presence (free slots first), per-capability reliability from
        past outcomes (Laplace-smoothed success rate), then expected cost. Returns the
        structured selection basis that the offer records; no prose.
        """
        by_group: dict[str, Any] = {}
        out = []
        for req in inp.requests:
            if req.group_id not in by_group:
                agents = await self.authority.agents(req.group_id)
                presence = await self.authority.presence(req.group_id)
                by_group[req.group_id] = (agents, presence)
            agents, presence = by_group[req.group_id]
            out.append(self._rank(req, agents, presence))
        return SelectCandidatesBatchResult(results=out)

    @staticmethod
    def _rank(req: SelectCandidatesInput, agents: list[Any], presence: Mapping[str, Any]
              ) -> SelectCandidatesResult:  # fmt: skip
        scored = []
        for a in agents:
            if "worker" not in a.roles or a.agent_id in req.exclude or a.card is None:
                continue
            if a.session_epoch == 0:
                continue  # never started a runtime: it could not start the work
            caps = capability_matches(list(a.card.capabilities), req.required_capabilities)
            if caps is None:
                continue
            rel = {c: a.reliability.get(c) for c in req.required_capabilities}
            ok = sum(r.ok for r in rel.values() if r is not None)
            fail = sum(r.fail for r in rel.values() if r is not None)
            p = presence.get(a.agent_id)
            free = p.free_slots if p is not None else None
            score = (
                0 if free is None or free > 0 else 1,       # available first
                -((ok + 1) * 1000 // (ok + fail + 2)),      # then reliability (smoothed)
                a.card.cost_per_item_minor_units,           # then cheaper
                a.agent_id,                                 # deterministic tie-break
            )  # fmt: skip
            basis = SelectionBasis(
                capability_matches=caps, authorization_eligible=True,
                availability_estimate_ms=0 if free else None,
                expected_cost_minor_units=a.card.cost_per_item_minor_units,
                reliability={f"{c}:ok": r.ok if r else 0 for c, r in rel.items()}
                | {f"{c}:fail": r.fail if r else 0 for c, r in rel.items()},
                policy_rules=["capability-major-version-match", "worker-role", "has-session",
                              "presence-first", "reliability-smoothed", "cost-ascending"],
            )  # fmt: skip
            scored.append((score, a.agent_id, basis))
        scored.sort(key=lambda x: x[0])
        return SelectCandidatesResult(candidates=[
            Candidate(agent_id=aid, basis=b.model_copy(update={"rank": i + 1}))
            for i, (_, aid, b) in enumerate(scored[: req.limit])])  # fmt: skip

    @activity.defn(name="review_submission")
    async def review_submission(self, inp: ReviewInput) -> ReviewResult:
        """Review a submission in the spec's order (MW-13.2-b) and keep every step's result:
        (1) output integrity and required output schemas; (2) Evidence for every acceptance
        criterion and the contract's registered deterministic checks; (3) the combined
        verdict. Reviewer-agent Evidence for semantic criteria and the human Approval are
        added by the artifacts-and-review work.

        Raises:
            ApplicationError: a criterion names a check that is not registered (non-retryable).
        """
        steps = [self._integrity(inp), self._deterministic(inp)]
        return ReviewResult(steps=steps, passed=all(s.passed for s in steps))

    def _integrity(self, inp: ReviewInput) -> ReviewStep:
        problems = []
        for d in inp.contract.deliverables:
            if d.name not in inp.outputs and not inp.artifacts:
                problems.append(f"deliverable {d.name!r} missing")
                continue
            if d.schema_id and d.name in inp.outputs:
                schema = self.schemas.get(d.schema_id)
                if schema is None:
                    problems.append(f"schema {d.schema_id!r} is not registered")
                    continue
                try:
                    jsonschema.validate(inp.outputs[d.name], schema)
                except jsonschema.ValidationError as exc:
                    problems.append(f"{d.name}: {exc.message}")
        return ReviewStep(
            step="integrity",
            passed=not problems,
            detail="; ".join(problems) or "deliverables present and valid",
        )

    def _deterministic(self, inp: ReviewInput) -> ReviewStep:
        problems = []
        by_criterion = {e.criterion: e for e in inp.evidence}
        for c in inp.contract.acceptance_criteria:
            ev = by_criterion.get(c.id)
            if ev is None:
                problems.append(f"{c.id}: no Evidence")
            elif ev.result != "pass":
                problems.append(f"{c.id}: Evidence says {ev.result}")
            if c.check:
                check = self.checks.get(c.check)
                if check is None:
                    raise ApplicationError(
                        f"check {c.check!r} is not registered",
                        type="UnknownCheck",
                        non_retryable=True,
                    )
                why = check(inp.outputs, inp.evidence)
                if why:
                    problems.append(f"{c.id}: check {c.check}: {why}")
        evidence = [Evidence(
            subject=inp.work_item_id, criterion=c.id, method="coordinator review",
            result="fail" if any(p.startswith(f"{c.id}:") for p in problems) else "pass",
            producer=self.coordinator.agent_id, timestamp_ms=_now_ms(),
        ) for c in inp.contract.acceptance_criteria]  # fmt: skip
        return ReviewStep(step="deterministic", passed=not problems,
                          detail="; ".join(problems) or "every criterion has passing Evidence",
                          evidence=evidence)  # fmt: skip
