"""The ``execute_work_item`` activity, run for real in ``ActivityEnvironment`` against a real
Authority served on loopback: every outcome, lease loss, the guard, idempotency keys and the
late-result path."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import traceback
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio import activity
from temporalio.activity import ActivityCancellationDetails
from temporalio.testing import ActivityEnvironment

from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor
from missionweave.protocol.temporal_contract import ExecuteWorkItemInput, OutcomeKind
from missionweave.worker import (
    LeaseLost,
    PermanentFailure,
    Submission,
    WorkContext,
)
from missionweave.worker._execute import WorkItemExecutor
from tests.support.executor_harness import Handler, VerifyInput, grant, registry_of, run
from tests.support.waits import WAIT_S, until
from tests.support.world import World

#: The contract's deliverable ``report``, inline.
REPORT = {"report": {"files": 1}}


@pytest.fixture
def worker(world: World) -> Actor:
    """``worker-0``: the agent whose activity runs."""
    return world.workers[0]


@pytest.fixture
def work(world: World, worker: Actor) -> ExecuteWorkItemInput:
    """WorkItem ``a`` on the default contract, granted to :func:`worker`: the activity's input."""
    return grant(world, "a", worker)


@dataclass
class Sleeper:
    """A handler (:attr:`handler`) that uses :attr:`tool_calls` and sleeps a minute:
    :attr:`started` is set once it runs, :attr:`cancelled` once it is cancelled."""

    tool_calls: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    handler: Handler = field(init=False)

    def __post_init__(self) -> None:
        async def sleep(ctx: WorkContext, inp: VerifyInput) -> Any:
            if self.tool_calls:
                ctx.usage.add(tool_calls=self.tool_calls)
            self.started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return Submission()

        self.handler = sleep


async def test_submission_is_reported_and_accepted__MW_11_3_c(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:
    seen: list[VerifyInput] = []

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        seen.append(inp)
        await ctx.guard()
        ctx.usage.add(tool_calls=2)
        await ctx.report("hashing", milestones=["listed"], estimate_remaining_ms=1000)
        return Submission(
            outputs={"report": {"files": len(inp.files)}},
            evidence=[
                ctx.evidence("hashes", method="sha256 compare"),
                ctx.evidence("schema", method="json-schema"),
            ],
        )

    beats: list[Any] = []
    out = await run(client, worker, work, verify, beats)
    assert out.kind is OutcomeKind.SUBMITTED
    assert out.verdict is not None and out.verdict.status == "accepted"
    assert [e.type for e in out.verdict.events] == ["lease.released", "work.submitted"]
    assert out.outputs == {"report": {"files": 2}} and len(out.evidence) == 2
    assert seen == [VerifyInput(files=["a.tar", "b.tar"])]  # validated into the handler's model
    assert world.item("a")["state"] == "submitted"
    assert world.item("a")["usage"].count('"tool_calls":2') == 1  # charged once
    assert beats and beats[0]["lease_id"] == work.lease.lease_id


async def test_save_then_pause_requeues_with_checkpoint__MW_11_3_g(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        await ctx.save({"done": ["a.tar"]})
        assert ctx.checkpoint == {"done": ["a.tar"]}
        return ctx.pause({"done": ["a.tar"], "next": "b.tar"})

    beats: list[Any] = []
    out = await run(client, worker, work, verify, beats)
    assert out.kind is OutcomeKind.PAUSED and out.verdict and out.verdict.accepted
    assert out.checkpoint == {"done": ["a.tar"], "next": "b.tar"}
    item = world.item("a")
    assert item["state"] == "queued" and item["owner"] == worker.agent_id
    assert item["checkpoint"] == '{"done":["a.tar"],"next":"b.tar"}'
    saved = [
        e for e in world.authority.all_events(world.group) if e.type == "work.progress_reported"
    ]
    assert saved[-1].body["checkpoint"] == {"done": ["a.tar"]}  # the durable resume point
    assert any(b["checkpoint"] == {"done": ["a.tar"]} for b in beats)  # and a heartbeat hint
    r = world.ok(worker, "work.start", {"work_item_id": "a", "ownership_epoch": 1})
    assert r.reply["checkpoint"] == {"done": ["a.tar"], "next": "b.tar"}


async def test_block_reports_resolution__MW_11_4_c(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        ctx.block({"needs": "mirror credentials"}, {"at": "start"})

    out = await run(client, worker, work, verify)
    assert out.kind is OutcomeKind.BLOCKED and out.verdict and out.verdict.accepted
    assert out.resolution == {"needs": "mirror credentials"}
    assert world.item("a")["state"] == "blocked"


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (RuntimeError("mirror returned 500"), True),
        (PermanentFailure("archive format unsupported"), False),
    ],
)
async def test_raising_handler_fails_with_evidence__MW_11_4_f(
    world: World,
    client: AuthorityClient,
    work: ExecuteWorkItemInput,
    worker: Actor,
    exc: Exception,
    retryable: bool,
) -> None:

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        raise exc

    out = await run(client, worker, work, verify)
    assert out.kind is OutcomeKind.FAILED and out.verdict and out.verdict.accepted
    assert out.retryable is retryable
    (ev,) = out.evidence
    assert (ev.criterion, ev.method, ev.result) == ("execution", "handler", "fail")
    assert str(exc) in ev.summary and str(exc) in (out.error or "")
    failed = [e for e in world.authority.all_events(world.group) if e.type == "work.failed"]
    assert failed[-1].body["retryable"] is retryable
    assert world.item("a")["state"] == "failed"


@pytest.mark.parametrize(
    ("outputs", "criteria", "said"),
    [
        (REPORT, ["hashes"], "evidence_missing: every acceptance criterion needs Evidence "
         "(missing=schema)"),
        ({}, ["hashes", "schema"], "deliverable_missing: a deliverable of the contract has no "
         "non-empty output and no submitted Artifact (deliverable=report"),
    ],
)  # fmt: skip
async def test_a_refused_submission_is_logged_with_what_it_lacks(
    client: AuthorityClient,
    work: ExecuteWorkItemInput,
    worker: Actor,
    caplog: pytest.LogCaptureFixture,
    outputs: dict[str, Any],
    criteria: list[str],
    said: str,
) -> None:
    """A ``work.submit`` the Authority refuses is a WARNING in the worker's log naming the code,
    the reason and what is missing (which criterion lacks Evidence, which deliverable), and
    the failure it becomes says the same."""

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        return Submission(
            outputs=outputs, evidence=[ctx.evidence(c, method="check") for c in criteria]
        )

    with caplog.at_level("WARNING", logger="missionweave.worker"):
        out = await run(client, worker, work, verify)
    assert out.kind is OutcomeKind.FAILED and out.verdict and out.verdict.accepted
    assert said in (out.error or "")
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.levelname == "WARNING" and said in r.getMessage()
    ]
    assert logged == [f"a: {out.error}"], caplog.text


async def test_revoked_lease_cancels_handler__MW_11_3_f(
    world: World, client: AuthorityClient, worker: Actor
) -> None:
    work = grant(world, "a", worker, timeouts={"heartbeat_ms": 50, "lease_ms": 30_000})
    verify = Sleeper()
    beats: list[Any] = []
    task = asyncio.create_task(run(client, worker, work, verify.handler, beats))
    await verify.started.wait()
    # Another process of the same agent opens a session: the Authority revokes the lease.
    other = Actor(worker.agent_id, worker.key)
    assert world.authority.submit(other.command("session.open", None, {})).accepted
    out = await task
    assert out.kind is OutcomeKind.LEASE_LOST
    assert verify.cancelled.is_set()
    assert out.verdict is not None and out.verdict.rejection is not None
    assert out.verdict.rejection.code == "stale_session_epoch"
    assert world.item("a")["state"] == "queued"  # requeued by the revocation, not failed
    assert not [e for e in world.authority.all_events(world.group) if e.type == "work.submitted"]
    assert beats  # heartbeats went out while it ran


async def test_guard_refuses_once_the_lease_is_lost__MW_11_5_d(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:
    side_effects: list[str] = []

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        await ctx.guard()
        side_effects.append("first upload")
        other = Actor(worker.agent_id, worker.key)  # the lease is revoked meanwhile
        assert world.authority.submit(other.command("session.open", None, {})).accepted
        try:
            await ctx.guard()
        except LeaseLost:
            side_effects.append("refused")
            raise
        side_effects.append("second upload")
        return Submission()

    out = await run(client, worker, work, verify)
    assert side_effects == ["first upload", "refused"]
    assert out.kind is OutcomeKind.LEASE_LOST


async def test_no_effect_once_the_lease_is_known_lost__MW_11_5_d(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:
    """A progress report refused for the revoked lease marks it lost; a reversible external
    effect afterwards is refused at once, though the lease and its token are unexpired by the
    local clock (which alone would let it go ahead without a round trip)."""
    refused: list[LeaseLost] = []

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        other = Actor(worker.agent_id, worker.key)  # the lease is revoked
        assert world.authority.submit(other.command("session.open", None, {})).accepted
        with pytest.raises(LeaseLost):
            await ctx.report("hashing")
        with pytest.raises(LeaseLost) as exc:
            await ctx.effect("upload", reversible=True)
        refused.append(exc.value)
        raise exc.value

    out = await run(client, worker, work, verify)
    assert [e.code for e in refused] == ["stale_session_epoch"]
    assert out.kind is OutcomeKind.LEASE_LOST


async def test_idempotency_keys_differ_per_ownership_epoch__MW_16_f(
    world: World, client: AuthorityClient, worker: Actor
) -> None:
    keys: list[tuple[int, str, str, str]] = []

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        keys.append(
            (
                ctx.ownership_epoch,
                ctx.idempotency_key("upload"),
                ctx.idempotency_key("upload"),
                ctx.attempt_key("upload", 2),
            )
        )
        raise RuntimeError("transient")

    first = await run(client, worker, grant(world, "a", worker), verify)
    assert first.kind is OutcomeKind.FAILED
    second = await run(client, worker, grant(world, "a", worker), verify)  # epoch 2
    assert second.kind is OutcomeKind.FAILED
    (e1, k1, k1_again, a1), (e2, k2, _, a2) = keys
    assert (e1, e2) == (1, 2)
    assert k1 == k1_again  # stable within the epoch (a retried call reuses it)
    assert k1 != k2 and a1 != a2 and a1 != k1  # a new owner epoch never reuses a key


async def test_late_result_is_recorded_not_applied__MW_11_5_b(
    world: World, client: AuthorityClient, worker: Actor
) -> None:
    old, new = world.workers
    work = grant(world, "a", old)

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        # The old owner stalls past its lease; the Coordinator reassigns (MW-11.5-a).
        world.clock.advance(31_000)
        offer_id = world.offer("a", new)
        assert world.accept(new, "a", offer_id).accepted
        return Submission(
            outputs=REPORT,
            evidence=[ctx.evidence("hashes", method="m"), ctx.evidence("schema", method="m")],
        )

    out = await run(client, old, work, verify)
    assert out.kind is OutcomeKind.LEASE_LOST
    assert out.verdict is not None and out.verdict.status == "recorded"
    assert [e.type for e in out.verdict.events] == ["work.late_result_recorded"]
    item = world.item("a")
    assert item["owner"] == new.agent_id and item["state"] == "queued"


async def test_budget_overrun_on_renewal_stops_and_fails__MW_11_5_j(
    world: World, client: AuthorityClient, worker: Actor
) -> None:
    work = grant(
        world,
        "a",
        worker,
        budget={"tool_calls": 3},
        timeouts={"heartbeat_ms": 50, "lease_ms": 30_000},
    )
    verify = Sleeper(tool_calls=5)  # over the contract's budget: the renewal is refused
    out = await run(client, worker, work, verify.handler)
    assert verify.cancelled.is_set()
    assert out.kind is OutcomeKind.FAILED and out.retryable is False
    assert "budget exceeded" in (out.error or "") and "tool_calls" in (out.error or "")
    assert world.item("a")["state"] == "failed"
    assert '"tool_calls":0' in world.item("a")["usage"]  # no partial charge (MW-11.5-j)


async def test_a_hung_handler_is_stopped_by_its_wall_clock_budget__MW_11_5_j(
    world: World, client: AuthorityClient, worker: Actor
) -> None:
    """A handler that never returns is cancelled once its running time passes
    ``budget.wall_clock_ms`` (measured by the runtime, charged with each renewal), and the
    WorkItem fails for good with a reason that names the dimension, usage and limit."""
    timeouts = {"heartbeat_ms": 50, "lease_ms": 30_000}
    work = grant(world, "a", worker, budget={"wall_clock_ms": 300}, timeouts=timeouts)
    cancelled = asyncio.Event()

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        try:
            await asyncio.Event().wait()  # hangs: nothing will ever set it
        except asyncio.CancelledError:
            cancelled.set()
            raise

    out = await run(client, worker, work, verify)
    assert cancelled.is_set()
    assert out.kind is OutcomeKind.FAILED and out.retryable is False
    error = out.error or ""
    assert error.startswith("budget exceeded: wall_clock_ms "), error
    assert error.endswith(" of 300 ms (budget.wall_clock_ms)"), error
    used = int(error.removeprefix("budget exceeded: wall_clock_ms ").split()[0])
    assert used > 300
    assert world.item("a")["state"] == "failed"


async def test_temporal_cancel_stops_the_handler(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:
    verify = Sleeper()
    registry = registry_of(verify.handler)
    env = ActivityEnvironment()
    task = asyncio.create_task(
        env.run(WorkItemExecutor(worker, client, registry).execute_work_item, work)
    )
    await verify.started.wait()
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert verify.cancelled.is_set()
    assert world.item("a")["state"] == "active"  # nothing reported: the workflow decides


def _events(world: World, wid: str, type: str) -> list[Any]:
    return [
        e for e in world.authority.events(world.group) if e.work_item_id == wid and e.type == type
    ]


async def _timed_out_by_temporal(
    world: World, client: AuthorityClient, worker: Actor, work: ExecuteWorkItemInput, fn: Handler
) -> BaseException | None:
    """Run ``work`` and, once its lease was renewed, cancel the activity as Temporal's SDK does
    when the heartbeat timeout passed (an agent cut off from Temporal only); the exception the
    activity ended with."""
    env = ActivityEnvironment()
    task = asyncio.create_task(
        env.run(WorkItemExecutor(worker, client, registry_of(fn)).execute_work_item, work)
    )
    await until("a renewal", lambda: _events(world, "a", "lease.renewed"))  # the handler runs
    env.cancel(ActivityCancellationDetails(timed_out=True))
    try:
        await asyncio.wait_for(task, WAIT_S)
    except BaseException as exc:  # how the activity ended is the subject
        return exc
    return None


async def test_a_temporal_timeout_of_an_owner_whose_lease_is_live_never_drops_its_result__MW_11_5_b(
    world: World, client: AuthorityClient, worker: Actor
) -> None:
    """Temporal timed the activity out (its heartbeats were lost) but the Authority confirms
    the lease: the handler is not cancelled; it finishes and its submission is accepted."""
    work = grant(world, "a", worker, timeouts={"heartbeat_ms": 100, "lease_ms": 30_000})
    cancelled = asyncio.Event()

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        try:
            await activity.wait_for_cancelled()  # Temporal gave up on it
            await asyncio.sleep(1.5)  # longer than the 1 s the code of 2026-12-03 gave it
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Submission(
            outputs=REPORT,
            evidence=[ctx.evidence("hashes", method="m"), ctx.evidence("schema", method="m")],
        )

    exc = await _timed_out_by_temporal(world, client, worker, work, verify)
    assert isinstance(exc, asyncio.CancelledError)  # Temporal's verdict on the attempt stands
    assert not cancelled.is_set()
    assert world.item("a")["state"] == "submitted"  # the Authority holds the result
    assert [e.actor for e in _events(world, "a", "work.submitted")] == [worker.agent_id]


async def test_a_temporal_timeout_then_a_lost_lease_records_the_result_as_late__MW_11_5_b(
    world: World, client: AuthorityClient
) -> None:
    """The same, but the lease is reassigned while the handler finishes: its result is
    recorded as a late result (MW-11.5-b), never silently dropped."""
    old, new = world.workers
    work = grant(world, "a", old, timeouts={"heartbeat_ms": 100, "lease_ms": 30_000})

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        await activity.wait_for_cancelled()  # Temporal gave up on it
        await asyncio.sleep(1.5)
        world.clock.advance(31_000)  # the owner stalled past its lease: reassigned
        assert world.accept(new, "a", world.offer("a", new)).accepted
        return Submission(
            outputs=REPORT,
            evidence=[ctx.evidence("hashes", method="m"), ctx.evidence("schema", method="m")],
        )

    exc = await _timed_out_by_temporal(world, client, old, work, verify)
    assert isinstance(exc, asyncio.CancelledError)
    (late,) = _events(world, "a", "work.late_result_recorded")
    assert late.actor == old.agent_id
    assert world.item("a")["owner"] == new.agent_id


async def test_a_refused_submission_records_which_criteria_need_evidence(
    world: World, client: AuthorityClient, work: ExecuteWorkItemInput, worker: Actor
) -> None:
    """Newcomer friction (issue 36): the Authority's refusal of ``work.submit`` is recorded
    with its facts — here the criteria without Evidence — in the ``work.fail`` error the
    Mission's status shows, not as the bare code and reason."""

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Submission:
        return Submission(
            outputs={"report": {"files": 2}},
            evidence=[ctx.evidence("hashes", method="sha256 compare")],
        )

    out = await run(client, worker, work, verify)
    assert out.kind is OutcomeKind.FAILED
    assert "work.submit rejected: evidence_missing" in (out.error or "")
    assert "(missing=schema)" in (out.error or "").split("\n", 1)[0]
    failed = [e for e in world.authority.all_events(world.group) if e.type == "work.failed"]
    assert "(missing=schema)" in str(failed[-1].body)  # the Group log keeps it too


def _read_settings() -> bytes:
    """Raises ``FileNotFoundError`` naming an absolute path, from a frame of this file (an
    absolute host path in the traceback too)."""
    with open("/nonexistent/missionweave-secrets/settings.toml", "rb") as f:
        return f.read()


async def test_failure_evidence_carries_no_traceback_or_host_path__MW_11_4_f(
    world: World,
    client: AuthorityClient,
    work: ExecuteWorkItemInput,
    worker: Actor,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every member replays ``work.failed``: its Evidence says the exception's type (the code)
    and message with the path redacted; the traceback, with this file's path, is in the
    agent's own log only."""
    caplog.set_level(logging.WARNING, logger="missionweave.worker._execute")

    async def verify(ctx: WorkContext, inp: VerifyInput) -> Any:
        return _read_settings()

    out = await run(client, worker, work, verify)
    assert out.kind is OutcomeKind.FAILED and out.verdict and out.verdict.accepted
    (failed,) = [e for e in world.authority.all_events(world.group) if e.type == "work.failed"]
    (ev,) = failed.body["evidence"]
    said = "FileNotFoundError: [Errno 2] No such file or directory: '<path>'"
    assert ev["summary"] == said and out.error == said
    logged = json.dumps(failed.model_dump(mode="json"))
    assert "Traceback" not in logged and "settings.toml" not in logged
    assert __file__ not in logged and not re.search(r"""["' ]/\w""", ev["summary"])
    (record,) = [r for r in caplog.records if r.exc_info]
    assert record.exc_info is not None and record.exc_info[2] is not None  # the worker's own log
    assert __file__ in "".join(traceback.format_tb(record.exc_info[2]))
