"""The Coordinator's review in the spec's order (MW-13.2-b), end to end on the REAL Temporal dev
server with real agent runtimes, a real Authority and one shared artifact store: a review that
fails at each of its steps — integrity (a corrupted and a missing Artifact, an output violating
its JSON Schema), deterministic (a registered check), semantic (a reviewer agent's ``fail``
Evidence), human (a MissionOwner's rejection) — every step's result kept in the MissionResult
and the decision in the Authority's log; and an Approval with a wrong key refused while the
WorkItem keeps waiting, then granted with the right one (``missionweave approve``).

The WorkItems here allow one attempt, so the first failed review fails the Mission.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from missionweave.artifacts import ArtifactStore
from missionweave.protocol import Event, Evidence, SigningKey
from missionweave.protocol.temporal_contract import (
    ItemResult,
    MissionResult,
    MissionStatus,
    ReviewRequest,
)
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from missionweave.workflows import MissionWorkflow
from tests.support.artifact_servers import corrupt
from tests.support.mission_harness import MW, MissionStack, contract, mission_stack
from tests.support.mission_outcome import result
from tests.support.waits import WAIT_S, until

REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["rows"],
    "properties": {"rows": {"type": "integer", "minimum": 0}},
    "additionalProperties": False,
}
DONE = {"id": "done", "description": "the step is done", "evidence_required": "a check"}
CLEAR = {"id": "clear", "kind": "semantic", "description": "the report reads clearly",
         "evidence_required": "a reviewer's judgement"}  # fmt: skip
SIGNOFF = {"id": "signoff", "kind": "human", "description": "the owner signs the report off",
           "evidence_required": "a MissionOwner's Approval"}  # fmt: skip


# ----------------------------------------------------------------------------- helpers


def one_shot(**over: Any) -> dict[str, Any]:
    """A contract allowing one attempt: the first failed review fails the Mission."""
    return contract(retry={"max_attempts": 1}, **over).wire()


async def start_one(
    ms: MissionStack,
    mission_id: str,
    input: dict[str, Any] | None = None,
    wid: str = "a",
    **over: Any,
) -> WorkflowHandle[Any, MissionResult]:
    """Start a Mission of one one-shot WorkItem ``wid`` (contract fields ``over``)."""
    items = [{"work_item_id": wid, "contract": one_shot(**over), "input": input or {}}]
    return await ms.start(ms.spec(mission_id, items))


def item(res: MissionResult, wid: str) -> ItemResult:
    found = [i for i in res.items if i.work_item_id == wid]
    assert found, f"no {wid} in {res.model_dump_json(indent=1)}"
    return found[0]


def steps(it: ItemResult) -> list[str]:
    """The review's steps in order: each one's name, ``<name>:fail`` for one that failed."""
    return [st["step"] + ("" if st["passed"] else ":fail") for st in it.review]


def step(it: ItemResult, name: str) -> dict[str, Any]:
    return next(st for st in it.review if st["step"] == name)


def last(events: list[Event], type: str) -> Event:
    return [e for e in events if e.type == type][-1]


def evidence_of(ev: Event) -> list[Evidence]:
    return [Evidence.model_validate(e) for e in ev.body["evidence"]]


def worker(store: ArtifactStore | None = None) -> HandlerRegistry:
    """``demo.step``, driven by the WorkItem's input: ``publish`` (text published as a
    ``report@1`` JSON Artifact), ``corrupt_with`` (then written over it behind ``store``'s
    back), ``outputs`` (default: the harness contract's deliverable ``result``) and
    ``artifacts`` (submitted as given); passing Evidence for every criterion."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        refs: list[str] = []
        if "publish" in input:
            ref = await ctx.publish(
                input["publish"].encode(), "application/json", schema_id="report@1"
            )
            refs.append(ref.hash)
            if "corrupt_with" in input:
                assert store is not None
                corrupt(store, ref.hash, input["corrupt_with"].encode())
        return Submission(
            outputs=dict(input.get("outputs", {"result": {"item": ctx.work_item_id}})),
            artifacts=list(input.get("artifacts", [])),
            evidence=[  # Evidence references what the submission names (the Authority checks)
                ctx.evidence(
                    c.id,
                    method="test",
                    summary="done",
                    artifacts=[*refs, *input.get("artifacts", [])],
                )
                for c in ctx.contract.acceptance_criteria
            ],
        )

    return reg


def reviewer(verdict: str) -> HandlerRegistry:
    """``review.semantic@1.0``: gives ``verdict`` on every criterion of the review."""
    reg = HandlerRegistry()

    @reg.handler("review.semantic", version="1.0")
    async def review(ctx: WorkContext, req: ReviewRequest) -> Submission:
        assert req.subject and req.criteria
        return Submission(
            outputs={"review": {c.id: verdict for c in req.criteria}},
            evidence=[
                ctx.evidence(
                    c.id,
                    verdict,
                    method="read the report",
                    subject=req.subject,
                    summary=f"{c.id}: {verdict}",
                    artifacts=req.artifacts,
                )
                for c in req.criteria
            ],
        )

    return reg


async def approve(ms: MissionStack, mission: str, key: Path, *extra: str) -> tuple[int, str, str]:
    """Run ``missionweave approve`` as a user does: (exit code, stdout, stderr)."""
    target = ms.env.client.service_client.config.target_host
    proc = await asyncio.create_subprocess_exec(
        MW,
        "approve",
        "--mission",
        mission,
        "--key",
        str(key),
        "--authority-url",
        ms.stack.url,
        "--temporal-address",
        target,
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def awaiting_approval(handle: WorkflowHandle[Any, MissionResult], wid: str) -> str:
    """Wait until ``wid`` awaits approval; its review digest."""

    async def probe() -> str | None:
        st = await handle.query(MissionWorkflow.status)
        it = next((i for i in st.items if i.work_item_id == wid), None)
        return it.review_digest if it is not None and it.review_stage == "approval" else None

    digest: str = await until(f"{wid} awaiting approval", probe, WAIT_S)
    return digest


# ---------------------------------------------------------------------- step 1: integrity


async def test_integrity_fails_on_corrupted_and_missing_artifacts__MW_13_2_b__MW_13_1_d(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A published Artifact overwritten in the store: the integrity step fails (the
    deterministic one still passes), the verdict fails, and the coordinator's ``work.failed``
    carries the failing integrity Evidence. A submitted hash never published in the WorkItem
    does not reach review: the Authority refuses the submission."""
    ghost = hashlib.sha256(b"never stored").hexdigest()
    report = [{"name": "report", "schema_id": "report@1"}]
    async with mission_stack(dev_env, tmp_path, schemas={"report@1": REPORT_SCHEMA}) as ms:
        await ms.agent("ada", worker(ms.artifacts.for_group(ms.group)))
        bad = {"publish": '{"rows": 3}', "corrupt_with": '{"rows": 4}'}
        res = await result(await start_one(ms, "corrupt", bad, deliverables=report))
        assert res.status == "failed"
        a = item(res, "a")
        assert a.state.value == "failed"
        assert steps(a) == ["integrity:fail", "deterministic", "verdict:fail"]
        (h,) = a.artifacts
        assert "content does not match its hash" in step(a, "integrity")["detail"]
        assert hashlib.sha256(b'{"rows": 4}').hexdigest() in step(a, "integrity")["detail"]
        failed = last(ms.events("a"), "work.failed")
        assert failed.actor == "coordinator"
        bad = [e for e in evidence_of(failed) if e.criterion == "artifact_integrity"]
        assert [(e.subject, e.result, e.artifacts) for e in bad] == [(h, "fail", [h])]
        assert "artifact.published" in [e.type for e in ms.events("a")]

        # an Artifact never published in the WorkItem: the Authority refuses the submission
        # itself, before any review (issue 25 item 9)
        ghostly = {"outputs": {"report": {"rows": 1}}, "artifacts": [ghost]}
        res = await result(await start_one(ms, "missing", ghostly, "b", deliverables=report))
        b = item(res, "b")
        assert res.status == "failed" and b.state.value == "failed"
        assert "work.submitted" not in [e.type for e in ms.events("b")]
        failed = last(ms.events("b"), "work.failed")
        assert "artifact_not_published" in evidence_of(failed)[0].summary


async def test_integrity_fails_on_output_violating_its_schema__MW_13_2_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A JSON Artifact delivered for a deliverable with schema ``report@1`` that violates it."""
    report = [{"name": "report", "schema_id": "report@1"}]
    async with mission_stack(dev_env, tmp_path, schemas={"report@1": REPORT_SCHEMA}) as ms:
        await ms.agent("ada", worker())
        res = await result(
            await start_one(ms, "schema", {"publish": '{"rows": -1}'}, deliverables=report)
        )
        a = item(res, "a")
        assert res.status == "failed"
        assert steps(a) == ["integrity:fail", "deterministic", "verdict:fail"]
        assert "report: -1 is less than the minimum of 0" in step(a, "integrity")["detail"]
        ev = {e["criterion"]: e for e in step(a, "integrity")["evidence"]}
        assert ev["artifact_integrity"]["result"] == "pass"  # the bytes are fine
        assert ev["schema:report"]["result"] == "fail"
        assert ev["schema:report"]["artifacts"] == a.artifacts
        failed = last(ms.events("a"), "work.failed")
        assert any(
            e.criterion == "schema:report" and e.result == "fail" for e in evidence_of(failed)
        )


# ------------------------------------------------------------------ step 2: deterministic


async def test_deterministic_check_failing__MW_13_2_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The contract's criterion names a registered check, which fails on the outputs."""

    def rows_positive(outputs: Any, evidence: list[Evidence]) -> str | None:
        rows = (outputs.get("result") or {}).get("rows", 0)
        return None if rows > 0 else f"rows is {rows}"

    criteria = [{**DONE, "check": "rows_positive"}]
    async with mission_stack(dev_env, tmp_path, checks={"rows_positive": rows_positive}) as ms:
        await ms.agent("ada", worker())
        res = await result(
            await start_one(
                ms, "check", {"outputs": {"result": {"rows": 0}}}, acceptance_criteria=criteria
            )
        )
        a = item(res, "a")
        assert res.status == "failed"
        assert steps(a) == ["integrity", "deterministic:fail", "verdict:fail"]
        assert step(a, "deterministic")["detail"] == "done: check rows_positive: rows is 0"
        failed = last(ms.events("a"), "work.failed")
        mine = [
            (e.criterion, e.result) for e in evidence_of(failed) if e.method == "coordinator review"
        ]
        assert mine == [("review", "fail"), ("done", "fail")]


# ----------------------------------------------------------------------- step 3: semantic


async def test_semantic_review_by_reviewer_agent_fails__MW_13_2_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A ``semantic`` criterion is judged by a review WorkItem ``a:review``, offered only to an
    agent with the reviewer capability *and* role that is not the submitter; its ``fail``
    Evidence joins the record and fails the review."""
    criteria = [DONE, CLEAR]
    both = ("demo.step@1.0", "review.semantic@1.0")
    async with mission_stack(dev_env, tmp_path) as ms:
        # ada could review but is the submitter; walt has the capability but not the role
        await ms.agent("ada", worker(), capabilities=both, roles=("worker", "reviewer"))
        await ms.agent("walt", reviewer("pass"), capabilities=("review.semantic@1.0",))
        await ms.agent(
            "rita",
            reviewer("fail"),
            capabilities=("review.semantic@1.0",),
            roles=("worker", "reviewer"),
        )
        res = await result(await start_one(ms, "semantic", acceptance_criteria=criteria))
        a, r = item(res, "a"), item(res, "a:review")
        assert res.status == "failed"
        assert a.state.value == "failed"
        assert last(ms.events("a"), "work.submitted").actor == "ada"
        assert steps(a) == ["integrity", "deterministic", "semantic:fail", "verdict:fail"]
        assert "clear: reviewer rita says fail" in step(a, "semantic")["detail"]
        (rev,) = step(a, "semantic")["evidence"]
        assert (rev["producer"], rev["subject"], rev["criterion"], rev["result"]) == (
            "rita",
            "a",
            "clear",
            "fail",
        )
        # the review WorkItem itself was carried out and verified
        assert (r.review_of, r.state.value, r.owner) == ("a", "verified", "rita")
        review_log = ms.events("a:review")
        offers = [e.body["candidates"] for e in review_log if e.type == "work.offered"]
        assert offers and all(c == ["rita"] for c in offers)
        assert last(review_log, "work.authorized").body["contract"]["required_capabilities"] == [
            "review.semantic@1.0"
        ]
        failed = last(ms.events("a"), "work.failed")
        assert any(
            e.producer == "rita" and e.criterion == "clear" and e.result == "fail"
            for e in evidence_of(failed)
        )


# ---------------------------------------------------------------- step 5: human Approval


async def test_approval_wrong_key_refused_then_granted__MW_13_2_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """All five steps: the reviewer passes the semantic criterion, the verdict passes, and the
    WorkItem waits for a MissionOwner. A worker's key (not a mission_owner) and an impostor's
    key (bad signature) are refused by the Authority and the WorkItem keeps waiting; the owner's
    key approves, ``approval.result_granted`` names the review digest, and the result is
    accepted."""
    criteria = [DONE, CLEAR, SIGNOFF]
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.stack.add_agent(
            "olivia", ("mission_owner",), open_session=False, publish_card=False
        )
        await ms.agent("ada", worker())
        await ms.agent(
            "rita",
            reviewer("pass"),
            capabilities=("review.semantic@1.0",),
            roles=("worker", "reviewer"),
        )
        handle = await start_one(ms, "signoff", acceptance_criteria=criteria)
        digest = await awaiting_approval(handle, "a")

        code, _, err = await approve(ms, "signoff", ms.stack.key_file("ada"))
        assert code == 1 and "role_not_allowed" in err and "still awaits approval" in err
        impostor = tmp_path / "impostor" / "olivia.pem"
        SigningKey.generate().to_file(impostor)
        code, _, err = await approve(ms, "signoff", impostor)
        assert code == 1 and "bad_signature" in err
        assert err.strip().splitlines()[-1].startswith("error: ")
        st: MissionStatus = await handle.query(MissionWorkflow.status)
        (a_st,) = [i for i in st.items if i.work_item_id == "a"]
        assert (a_st.state.value, a_st.review_stage, a_st.review_digest) == (
            "submitted",
            "approval",
            digest,
        )
        assert not [e for e in ms.events("a") if e.type.startswith("approval.")]

        code, out, err = await approve(ms, "signoff", ms.stack.key_file("olivia"))
        assert code == 0, err
        assert out.startswith("approved a of Mission signoff")
        res = await result(handle)
        a = item(res, "a")
        assert res.status == "completed" and a.state.value == "verified"
        assert steps(a) == ["integrity", "deterministic", "semantic", "verdict", "approval"]
        (ok,) = step(a, "approval")["evidence"]
        assert (ok["producer"], ok["criterion"], ok["result"]) == ("olivia", "signoff", "pass")
        events = ms.events("a")
        granted = last(events, "approval.result_granted")
        assert granted.actor == "olivia"
        assert f"event seq {granted.seq})" in out  # where the Approval landed in the log
        assert granted.body["approver"] == "olivia" and granted.body["review_digest"] == digest
        accepted = last(events, "work.result_accepted")
        assert accepted.seq > granted.seq
        assert {(e.criterion, e.producer) for e in evidence_of(accepted)} >= {
            ("clear", "rita"),
            ("signoff", "olivia"),
        }


async def test_approval_rejected_fails_the_review__MW_13_2_b(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The MissionOwner rejects (``--reject --reason``): ``approval.result_denied`` with the
    reason, the approval step fails, and the coordinator fails the WorkItem."""
    criteria = [DONE, SIGNOFF]
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.stack.add_agent(
            "olivia", ("mission_owner",), open_session=False, publish_card=False
        )
        await ms.agent("ada", worker())
        handle = await start_one(ms, "denied", acceptance_criteria=criteria)
        digest = await awaiting_approval(handle, "a")
        code, out, err = await approve(
            ms,
            "denied",
            ms.stack.key_file("olivia"),
            "--item",
            "a",
            "--reject",
            "--reason",
            "totals do not add up",
        )
        assert code == 0, err
        assert out.startswith("rejected a of Mission denied")
        res = await result(handle)
        a = item(res, "a")
        assert res.status == "failed" and a.state.value == "failed"
        assert steps(a) == ["integrity", "deterministic", "verdict", "approval:fail"]
        assert "totals do not add up" in step(a, "approval")["detail"]
        events = ms.events("a")
        denied = last(events, "approval.result_denied")
        assert (denied.actor, denied.body["review_digest"], denied.body["reason"]) == (
            "olivia",
            digest,
            "totals do not add up",
        )
        failed = last(events, "work.failed")
        assert failed.seq > denied.seq and failed.actor == "coordinator"
        assert any(
            e.criterion == "signoff" and e.result == "fail" and e.producer == "olivia"
            for e in evidence_of(failed)
        )
