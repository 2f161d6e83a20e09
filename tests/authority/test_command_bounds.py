"""Bounds no single member can exhaust (issue 37, item 5), on the Authority itself: each
member's Command budget per Group (a token bucket of Commands and one of bytes, 429
``rate_limited``), the coordinator's budget per Mission, the disk reserve (507
``insufficient_storage``: new work refused, renewals and endings committed) and the Groups one
``session.open`` opens (``too_many_groups``). Every refusal writes nothing.

The buckets' clock is the test's (:class:`_Seconds`): a bucket refills only when a test says so.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from missionweave.authority import Authority, AuthorityConfig
from missionweave.authority.core import CommandLimits, reserve_status
from missionweave.authority.core._rates import COORDINATOR_FACTOR, Meter
from missionweave.protocol import Actor, RejectionCode, SigningKey
from tests.support.contracts import contract
from tests.support.disks import fill, small_disk
from tests.support.world import World, another_group, make_world

RATE_LIMITED = RejectionCode.RATE_LIMITED


class _Seconds:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _metered(tmp_path: Path, limits: CommandLimits, **config: Any) -> tuple[World, _Seconds]:
    """A World whose members are metered by ``limits`` (the Authority's config) from now on,
    on a clock the test moves."""
    settings = AuthorityConfig(command_limits=limits, **config)
    w = make_world(tmp_path / "a.db")  # the set-up's Commands unmetered
    seconds = _Seconds()
    w.authority.meter = Meter(settings.command_limits, settings.group_command_limits, seconds)
    return w, seconds


def _proposal(w: World, wid: str, **over: Any) -> dict[str, Any]:
    return {"work_item_id": wid, "mission_id": w.mission, "contract": contract(**over).wire()}


def _flood(w: World, worker: Actor, prefix: str, n: int, **over: Any) -> list[str]:
    """``worker`` proposes ``n`` WorkItems; the verdicts' codes (``ok`` when accepted)."""
    out = []
    for i in range(n):
        r = w.submit(worker, "work.propose", _proposal(w, f"{prefix}{i}", **over))
        out.append("ok" if r.accepted else str(r.rejection and r.rejection.code))
    return out


def test_a_flooding_member_is_refused_while_others_and_its_renewals_are_served(
    tmp_path: Path,
) -> None:
    """worker-0 holds a lease and floods ``work.propose``: past its burst it is refused 429
    ``rate_limited`` with ``retry_after_ms``, nothing written; worker-1's proposal and
    worker-0's own ``lease.renew`` are accepted; once the wait has passed it may propose
    again."""
    limits = CommandLimits(commands_per_s=1, burst=10)
    w, seconds = _metered(tmp_path, limits)
    w.authorize("a")
    w.lease("a", w.workers[0])  # accept_offer and start: two of worker-0's ten
    flooder, other = w.workers
    assert _flood(w, flooder, "p", 10) == ["ok"] * 8 + [RATE_LIMITED] * 2
    refused = w.judged(RATE_LIMITED, flooder, "work.propose", _proposal(w, "late"))
    assert refused.rejection is not None
    detail = refused.rejection.detail
    assert detail["limit"] == "commands" and 0 < detail["retry_after_ms"] <= 1_001
    assert detail["burst"] == 10 and detail["mission_id"] is None
    assert w.authority.work_item(w.group, "late") is None
    w.judged(None, other, "work.propose", _proposal(w, "theirs"))
    w.judged(None, flooder, "lease.renew", w.leased("a"))
    seconds.now += detail["retry_after_ms"] / 1000
    w.judged(None, flooder, "work.propose", _proposal(w, "late"))
    w.judged(RATE_LIMITED, flooder, "work.propose", _proposal(w, "later"))


def test_a_member_sending_large_proposals_runs_out_of_bytes(tmp_path: Path) -> None:
    """900 KB proposals against a 4 MiB byte burst refilled at 512 KiB/s: four pass, the fifth
    is refused ``rate_limited`` (``limit``: ``bytes``) although Commands remain; after the
    wait it names, one more passes. Small Commands of another member still pass."""
    limits = CommandLimits(commands_per_s=100, burst=100, bytes_burst=4 << 20)
    w, seconds = _metered(tmp_path, limits)
    big = {"objective": "x" * 900_000}
    assert _flood(w, w.workers[0], "big", 6, **big) == ["ok"] * 4 + [RATE_LIMITED] * 2
    r = w.judged(RATE_LIMITED, w.workers[0], "work.propose", _proposal(w, "big9", **big))
    assert r.rejection is not None and r.rejection.detail["limit"] == "bytes"
    w.judged(None, w.workers[1], "work.propose", _proposal(w, "small"))
    seconds.now += r.rejection.detail["retry_after_ms"] / 1000
    w.judged(None, w.workers[0], "work.propose", _proposal(w, "big9", **big))


def test_the_coordinator_is_metered_per_mission(tmp_path: Path) -> None:
    """The coordinator's one key serves every Mission of the Group: each Mission has its own
    budget (:data:`COORDINATOR_FACTOR` times a member's), so one busy Mission does not stop
    another's Commands."""
    w, _ = _metered(tmp_path, CommandLimits(commands_per_s=1, burst=2))
    per_mission = 2 * COORDINATOR_FACTOR
    verdicts = []
    for i in range(per_mission + 1):
        r = w.submit(w.coordinator, "work.authorize", w.authorization(f"a{i}"))
        verdicts.append("ok" if r.accepted else str(r.rejection and r.rejection.code))
    assert verdicts == ["ok"] * per_mission + [RATE_LIMITED]
    last = w.submit(w.coordinator, "work.authorize", w.authorization("a99"))
    assert last.rejection is not None and last.rejection.detail["mission_id"] == "m1"
    w.ok(w.coordinator, "mission.create", {"mission_id": "m2", "title": "another"})
    w.judged(None, w.coordinator, "work.authorize", w.authorization("b0", mission="m2"))


def test_naming_new_missions_mints_no_budget(tmp_path: Path) -> None:
    """A coordinator is metered per Mission only for a Mission that exists: ``mission.create``
    of fresh ids (or any unknown ``mission_id``) charges its member bucket, so naming new
    Missions does not mint new budgets (found by attack: 120 creations all accepted)."""
    w, _ = _metered(tmp_path, CommandLimits(commands_per_s=1, burst=3))
    verdicts = []
    for i in range(6):
        r = w.submit(w.coordinator, "mission.create", {"mission_id": f"n{i}", "title": "t"})
        verdicts.append("ok" if r.accepted else str(r.rejection and r.rejection.code))
    assert verdicts == ["ok"] * 3 + [RATE_LIMITED] * 3
    created = {e.body.get("mission_id") for e in w.authority.events(w.group)}
    assert {"n0", "n1", "n2"} <= created and not created & {"n3", "n4", "n5"}
    w.judged(None, w.coordinator, "work.authorize", w.authorization("a0"))  # m1's own budget


def test_padded_renewals_spend_bytes_while_honest_renewals_pass(tmp_path: Path) -> None:
    """The Commands that keep or end work are never counted, but their bytes past
    ``UPKEEP_FREE_BYTES`` come out of a byte bucket of their own: a lease holder padding
    ``lease.renew`` with 900 KB is refused ``rate_limited`` (``bytes``) once that bucket is
    spent, nothing written, while its plain renewals still pass (found by attack: ten padded
    renewals grew the log 9 MB past a 1 MiB budget)."""
    limits = CommandLimits(commands_per_s=1, burst=5, bytes_per_s=1024, bytes_burst=2 << 20)
    w, _ = _metered(tmp_path, limits)
    w.authorize("a")
    w.lease("a", w.workers[0])
    owner = w.workers[0]
    head = w.authority.head(w.group)
    verdicts = []
    for _ in range(4):
        r = w.submit(owner, "lease.renew", w.leased("a", pad="x" * 900_000))
        verdicts.append("ok" if r.accepted else str(r.rejection and r.rejection.code))
    assert verdicts == ["ok"] * 2 + [RATE_LIMITED] * 2
    after = w.authority.head(w.group)
    refused = w.judged(RATE_LIMITED, owner, "lease.renew", w.leased("a", pad="x" * 900_000))
    assert refused.rejection is not None and refused.rejection.detail["limit"] == "bytes"
    assert w.authority.head(w.group) == after != head  # the refusals wrote nothing
    for _ in range(5):  # an honest renewal, however many, is never refused
        w.judged(None, owner, "lease.renew", w.leased("a"))


def test_a_repeated_command_id_is_answered_not_charged(tmp_path: Path) -> None:
    """A retried Command (the same id and signature) gets its first verdict even when the
    actor's budget is spent: retries after an outage are never refused by the budget."""
    w, _ = _metered(tmp_path, CommandLimits(commands_per_s=1, burst=1))
    cmd = w.workers[0].command(
        "work.propose", w.group, _proposal(w, "once"), issued_at_ms=w.clock.now
    )
    assert w.authority.submit(cmd).accepted
    again = w.authority.submit(cmd)
    assert again.accepted and again.duplicate


def test_a_rolled_back_transaction_gives_its_tokens_back() -> None:
    """What a transaction took is given back when it rolls back (a retried transaction charges
    each Command once); a committed one keeps it."""
    seconds = _Seconds()
    meter = Meter(CommandLimits(commands_per_s=1, burst=1), clock=seconds)
    limits = meter.limits("g")
    assert limits is not None
    key = ("g", "w", None)
    meter.begin()
    assert meter.charge(key, limits, 10) is None
    meter.rollback()
    meter.begin()
    assert meter.charge(key, limits, 10) is None  # given back: the one token is there again
    refused = meter.charge(key, limits, 10)
    assert refused is not None and refused["limit"] == "commands"
    assert meter.limits("g", coordinator=True) == limits.scaled(COORDINATOR_FACTOR)
    assert Meter(None).limits("g") is None
    config = AuthorityConfig(command_limits=CommandLimits(burst=5))
    assert Authority(":memory:", SigningKey.generate(), config).meter.limits("g") == CommandLimits(
        burst=5
    )


def test_group_limits_override_the_default(tmp_path: Path) -> None:
    """A Group named in ``group_command_limits`` has its own budget; the others the default."""
    w, _ = _metered(
        tmp_path,
        CommandLimits(commands_per_s=1, burst=1),
        group_command_limits={"g2": CommandLimits(commands_per_s=1, burst=3)},
    )
    g2 = another_group(w, "g2")
    w.authority.meter._buckets.clear()  # another_group's Commands
    assert _flood(g2, w.workers[0], "x", 4) == ["ok"] * 3 + [RATE_LIMITED]
    assert _flood(w, w.workers[0], "y", 2) == ["ok", RATE_LIMITED]


# ------------------------------------------------------------------------------ disk reserve


def test_below_the_disk_reserve_new_work_is_refused_and_renewals_commit(tmp_path: Path) -> None:
    """The Authority's database on a 16 MiB filesystem with a 4 MiB reserve, the disk filled to
    2 MiB free: ``work.propose`` and ``work.authorize`` are refused 507
    ``insufficient_storage`` (naming the directory, its free space and the reserve), nothing
    written; the owner's ``lease.renew`` and ``work.submit`` commit. Space freed, proposals are
    accepted again. Where no tmpfs can be mounted (not root), the free-space probe stands in
    for the full disk (:func:`tests.support.disks.small_disk`)."""
    reserve = 4 << 20
    with small_disk(tmp_path / "disk", 16) as (disk, kind):
        w = make_world(disk / "a.db", config=AuthorityConfig(disk_reserve_bytes=reserve))
        try:
            w.authorize("a")
            w.lease("a", w.workers[0])
            if kind == "tmpfs":
                filler = fill(disk, 2 << 20)
            else:
                w.authority.disk_reserve.probe = lambda _: SimpleNamespace(free=2 << 20)
            assert reserve_status(w.authority.disk_reserve) is not None
            r = w.judged(
                RejectionCode.INSUFFICIENT_STORAGE,
                w.workers[1],
                "work.propose",
                _proposal(w, "new"),
            )
            assert r.rejection is not None
            assert r.rejection.detail["reserve_bytes"] == reserve
            assert r.rejection.detail["free_bytes"] < reserve
            assert r.rejection.detail["path"] == str(disk.resolve())
            w.judged(
                RejectionCode.INSUFFICIENT_STORAGE,
                w.coordinator,
                "work.authorize",
                w.authorization("b"),
            )
            w.judged(None, w.workers[0], "lease.renew", w.leased("a"))
            w.judged(None, w.workers[0], "work.submit", w.leased("a", **_report(w, "a")))
            if kind == "tmpfs":
                filler.unlink()
            else:
                w.authority.disk_reserve.probe = shutil.disk_usage
            assert reserve_status(w.authority.disk_reserve) is None
            w.judged(None, w.workers[1], "work.propose", _proposal(w, "new"))
        finally:
            w.authority.close()


def _report(w: World, wid: str) -> dict[str, Any]:
    """The submission of ``wid`` without publishing anything new (its inline deliverable)."""
    from tests.support.world import evidence

    return {"outputs": {"report": {"files": 3}}, "evidence": evidence("worker-0", wid)}


# --------------------------------------------------------------------------- session.open


def test_session_open_opens_at_most_the_configured_groups(tmp_path: Path) -> None:
    """``session.open`` writes an Event in each of the agent's Groups and answers all of them:
    an agent in more Groups than ``max_session_groups`` is refused ``too_many_groups``
    (naming both numbers), its Session Epoch unchanged; at the bound it opens, one Event per
    Group."""
    w = make_world(tmp_path / "a.db", config=AuthorityConfig(max_session_groups=3))
    worker = w.workers[0]
    for g in ("g2", "g3"):
        another_group(w, g, mission=None)

    def open_session() -> Any:
        return w.authority.submit(
            worker.command("session.open", None, {}, issued_at_ms=w.clock.now)
        )

    opened = open_session()
    assert opened.accepted and len(opened.events) == 3
    epoch = opened.reply["session_epoch"]
    another_group(w, "g4", mission=None)
    refused = open_session()
    assert refused.rejection is not None
    assert refused.rejection.code == RejectionCode.TOO_MANY_GROUPS
    assert refused.rejection.detail == {"groups": 4, "max_groups": 3}
    row = w.authority.store.one("agents.session_epoch_by_agent_id", worker.agent_id)
    assert row is not None and row[0] == epoch


def test_session_open_of_an_agent_in_many_groups_is_refused_whole(tmp_path: Path) -> None:
    """An agent in 60 Groups, over a bound of 50: one Command, refused before any of its
    Events is written — no Group's head moves."""
    groups = 60
    w = make_world(tmp_path / "a.db", config=AuthorityConfig(max_session_groups=50))
    worker = w.workers[0]
    for i in range(groups - 1):
        another_group(w, f"h{i}", mission=None)
    heads = {f"h{i}": w.authority.head(f"h{i}") for i in range(groups - 1)}
    r = w.authority.submit(worker.command("session.open", None, {}, issued_at_ms=w.clock.now))
    assert r.rejection is not None and r.rejection.code == RejectionCode.TOO_MANY_GROUPS
    assert r.rejection.detail == {"groups": groups, "max_groups": 50}
    assert {g: w.authority.head(g) for g in heads} == heads


def test_group_limits_file_of_authority_serve(tmp_path: Path) -> None:
    """``--group-limits FILE``: each Group's fields over the defaults of the flags; a file that
    is not an object of valid limits is a one-line CLI error."""
    from missionweave.cli._authority_bounds import bounds_config
    from missionweave.cli._common import CliError

    path = tmp_path / "limits.json"
    path.write_text('{"g2": {"burst": 3}}')
    settings = bounds_config((2.0, 50, 64, 1), path, 16, 8, 10)
    assert settings["command_limits"] == CommandLimits(2.0, 50, 64 * 1024, 1 << 20)
    assert settings["group_command_limits"] == {"g2": CommandLimits(2.0, 3, 64 * 1024, 1 << 20)}
    assert (settings["disk_reserve_bytes"], settings["max_upload_bytes"]) == (16 << 20, 8 << 20)
    assert settings["max_session_groups"] == 10
    assert bounds_config((0.0, 50, 64, 1), None, 0, 8, 10)["command_limits"] is None
    for bad in ('{"g2": {"burst": 0}}', '{"g2": {"speed": 1}}', "[1]", "{"):
        path.write_text(bad)
        with pytest.raises(CliError, match="--group-limits"):
            bounds_config((2.0, 50, 64, 1), path, 16, 8, 10)
