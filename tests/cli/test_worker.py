"""``missionweave worker``: run as a user runs it (a real process); bad input is one line;
Ctrl-C ends it even when the Authority and Temporal are gone."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from missionweave.authority.wire._readsig import SignedReads
from missionweave.cli._common import CliError, serve_until_signalled
from missionweave.protocol import SigningKey
from tests import cli_processes
from tests.cli_processes import STARTUP_S, Process, eventually, mw, processes_mentioning
from tests.mission_harness import contract
from tests.serving import LiveServer
from tests.world import World

processes = cli_processes.processes

EXE = str(Path(sys.executable).with_name("missionweave"))
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _files(tmp: Path, key: SigningKey, card: str) -> tuple[Path, Path]:
    key_path, card_path = tmp / "agent.pem", tmp / "agent.yaml"
    key.to_file(key_path)
    card_path.write_text(card, encoding="utf-8")
    return key_path, card_path


CARD = "agent_id: worker-0\ncapabilities: [dist.verify@1.2]\nmax_concurrency: 2\n"


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "worker", *args], capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )


def test_worker_bad_input_is_one_line(tmp_path: Path) -> None:
    key_path, card_path = _files(tmp_path, SigningKey.generate(), CARD)
    base = ["--key", str(key_path), "--group", "g1", "--state-dir", str(tmp_path / "s")]
    cases = [
        (
            ["--card", str(tmp_path / "missing.yaml"), "--handlers", "tests.worker_handlers"],
            "no card file at",
        ),
        (
            ["--card", str(card_path), "--handlers", "tests.no_such_module"],
            "cannot import handler module 'tests.no_such_module'",
        ),
        (
            [
                "--card",
                str(card_path),
                "--handlers",
                "tests.worker_handlers",
                "--authority-url",
                f"http://127.0.0.1:{_free_port()}",
            ],
            "cannot reach the Authority",
        ),
    ]
    bad_card = tmp_path / "bad.yaml"
    bad_card.write_text("agent_id: worker-0\nmax_concurrency: 0\n", encoding="utf-8")
    cases.append(
        (
            ["--card", str(bad_card), "--handlers", "tests.worker_handlers"],
            "invalid card: max_concurrency",
        )
    )
    for args, message in cases:
        r = _worker(*base, *args)
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    (tmp_path / "not.pem").write_text("nope", encoding="utf-8")
    r = _worker(
        "--key",
        str(tmp_path / "not.pem"),
        "--card",
        str(card_path),
        "--handlers",
        "tests.worker_handlers",
        "--group",
        "g1",
    )
    assert r.returncode == 2 and "not an unencrypted PEM" in r.stderr


async def test_worker_unreachable_temporal_is_one_line(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    key_path, card_path = _files(tmp_path, world.workers[0].key, CARD)
    proc = await asyncio.create_subprocess_exec(
        EXE,
        "worker",
        "--card",
        str(card_path),
        "--key",
        str(key_path),
        "--handlers",
        "tests.worker_handlers",
        "--group",
        "g1",
        "--authority-url",
        live.url,
        "--temporal-address",
        f"127.0.0.1:{_free_port()}",
        "--state-dir",
        str(tmp_path / "s"),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2
    assert "error: cannot reach Temporal at 127.0.0.1:" in err.decode()
    assert len(err.decode().strip().splitlines()) == 1


def test_worker_and_coordinator_help_name_their_options_and_variables() -> None:
    """The shared options (one definition in ``cli/_options.py``) say which environment
    variable sets their default, for ``worker`` as for ``coordinator``."""
    shared = (
        "--authority-url",
        "--temporal-address",
        "--namespace",
        "--artifacts",
        "--s3-endpoint",
        "--stop-timeout",
        "env var: MISSIONWEAVE_AUTHORITY_URL",
        "env var: TEMPORAL_ADDRESS",
        "env var: TEMPORAL_NAMESPACE",
    )
    for command, own in (
        ("worker", ("--card", "--key", "--handlers", "--group", "--state-dir")),
        ("coordinator", ("--key", "--agent-id")),
    ):
        r = subprocess.run(
            [EXE, command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
        assert r.returncode == 0, r.stderr
        for word in (*own, *shared):
            assert word in r.stdout, (command, word)


#: How long a worker may take to exit after Ctrl-C: its --stop-timeout (default 20 s) plus a
#: generous margin for a loaded machine. A process wait, not a speed assertion.
STOP_BOUND_S = 30


def _children(pid: int) -> dict[int, str]:
    """The live children of ``pid`` and their command lines (``dev up`` runs the Temporal server
    as one, in a process group of its own, and the Authority's signature verifiers)."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and int((proc / "stat").read_text().rsplit(") ", 1)[1].split()[1]) == pid
            ):
                found[int(proc.name)] = (
                    (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
        except (OSError, IndexError, ValueError):
            continue
    return found


def _stopped_alone(worker: Process, agent: str) -> None:
    """Ctrl-C, then the worker exits within STOP_BOUND_S: cleanly (0), or, when its clean stop
    cannot finish without the servers, by its stop timeout (1, one line); never a traceback."""
    worker.signal(signal.SIGINT)
    try:
        code = worker.proc.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"{agent} still runs {STOP_BOUND_S} s after Ctrl-C: {worker.stderr()}"
        ) from None
    err = worker.stderr()
    assert "Traceback" not in err, err
    assert f"stopping agent {agent}; Ctrl-C again exits at once" in err, err
    if code == 1:
        assert (
            f"error: agent {agent} did not stop within 20 s (are the Authority and Temporal "
            "reachable?); exiting without a clean stop"
        ) in err.splitlines(), err
    else:
        assert code == 0, (code, err)


def test_ctrl_c_stops_a_worker_whose_servers_are_gone(
    tmp_path: Path, processes: list[Process]
) -> None:
    """Two agents each hold a running WorkItem of one Mission; then the servers go away and each
    gets Ctrl-C. ``frozen-1`` while the Authority and Temporal are frozen (SIGSTOP: connections
    stay open, nothing answers — a host that vanished), ``gone-1`` once they are killed. The
    workers read the servers' addresses from TEMPORAL_ADDRESS and MISSIONWEAVE_AUTHORITY_URL,
    as the coordinator does."""
    data, info, stack = _dev_up(tmp_path, processes)
    temporal, authority = info["Temporal"].split()[0], info["Authority"]
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal, "MISSIONWEAVE_AUTHORITY_URL": authority}
    workers: dict[str, Process] = {}
    for agent, capability in (("frozen-1", "test.hold@1.0"), ("gone-1", "test.wait@1.0")):
        key = tmp_path / f"{agent}.pem"
        owner_key = data / "keys" / "coordinator.pem"
        r = mw(
            "group",
            "add",
            "--key",
            str(owner_key),
            "--group",
            "demo",
            "--agent-id",
            agent,
            "--agent-key",
            str(key),
            "--create-key",
            env=env,
        )
        assert r.returncode == 0, r.stderr
        card = tmp_path / f"{agent}.yaml"
        card.write_text(
            f"agent_id: {agent}\ncapabilities: [{capability}]\nmax_concurrency: 1\n",
            encoding="utf-8",
        )
        log = tmp_path / f"{agent}.log"
        workers[agent] = _hold_worker(card, key, tmp_path / "state", data, log, env)
        processes.append(workers[agent])
    spec = {
        "group_id": "demo",
        "mission_id": "hold-1",
        "title": "two WorkItems held until stopped",
        "items": [
            {"work_item_id": f"hold-1:{c}", "contract": contract((f"test.{c}@1.0",)).wire()}
            for c in ("hold", "wait")
        ],
        "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
    }
    r = mw("mission", "start", "-", env=env, stdin=json.dumps(spec))
    assert r.returncode == 0, r.stderr

    def both_started() -> bool:
        reads = SignedReads(SigningKey.from_file(data / "keys" / "coordinator.pem"))
        events = httpx.get(
            f"{authority}/v1/groups/demo/events",
            timeout=5,
            auth=reads,
            params={"after_sequence": 0, "limit": 1000},
        ).json()
        started = {e["work_item_id"] for e in events["events"] if e["type"] == "work.started"}
        return started == {"hold-1:hold", "hold-1:wait"}

    eventually(both_started, "two started WorkItems", stack, timeout_s=60)

    children = _children(stack.proc.pid)
    assert any(" server start-dev " in cmd for cmd in children.values()), children
    servers = [stack.proc.pid, *children]  # dev up (the Authority), Temporal, the verifiers
    for pid in servers:
        os.kill(pid, signal.SIGSTOP)
    _stopped_alone(workers["frozen-1"], "frozen-1")
    for pid in servers:
        os.kill(pid, signal.SIGKILL)
    stack.proc.wait(timeout=30)
    _stopped_alone(workers["gone-1"], "gone-1")
    assert processes_mentioning(str(tmp_path)) == []


def _events(authority: str, data: Path) -> list[dict[str, Any]]:
    reads = SignedReads(SigningKey.from_file(data / "keys" / "coordinator.pem"))
    page = httpx.get(
        f"{authority}/v1/groups/demo/events",
        timeout=5,
        auth=reads,
        params={"after_sequence": 0, "limit": 1000},
    ).json()
    events: list[dict[str, Any]] = page["events"]
    return events


def _hold_worker(
    card: Path, key: Path, state_dir: Path, data: Path, log: Path, env: dict[str, str], *extra: str
) -> Process:
    """``missionweave worker`` in Group ``demo`` with ``tests.hold_handlers``, sharing the dev
    stack's artifact store under ``data``."""
    return Process(
        [
            EXE,
            "worker",
            "--card",
            str(card),
            "--key",
            str(key),
            "--handlers",
            "tests.hold_handlers",
            "--group",
            "demo",
            "--state-dir",
            str(state_dir),
            "--artifacts",
            str(data / "artifacts"),
            *extra,
        ],
        log,
        env=env,
    )


def _dev_up(tmp_path: Path, processes: list[Process]) -> tuple[Path, dict[str, str], Process]:
    """``missionweave dev up`` on free ports under ``tmp_path/data``: the data directory, the
    stack's banner (``Temporal``, ``Authority``, …) and its process."""
    data = tmp_path / "data"
    stack = Process(
        [
            EXE,
            "dev",
            "up",
            "--data-dir",
            str(data),
            "--temporal-port",
            "0",
            "--headless",
            "--authority-port",
            "0",
        ],
        tmp_path / "dev.log",
    )
    processes.append(stack)
    return data, stack.read_until(r"^  Group ", STARTUP_S), stack


def test_ctrl_c_on_a_handler_that_never_pauses_reports_it_and_exits_1(
    tmp_path: Path, processes: list[Process]
) -> None:
    """Two agents can take the WorkItem; the one that took it gets Ctrl-C while its handler
    ignores ``should_pause()``. Within ``--stop-timeout`` it cancels the handler, reports the
    execution failed (retryable) to the Authority and exits with status 1 naming the WorkItem;
    the other agent then starts it — long before its 10-minute lease could have expired."""
    data, info, stack = _dev_up(tmp_path, processes)
    temporal, authority = info["Temporal"].split()[0], info["Authority"]
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal, "MISSIONWEAVE_AUTHORITY_URL": authority}
    workers: dict[str, Process] = {}
    for agent in ("ign-1", "ign-2"):
        key = tmp_path / f"{agent}.pem"
        r = mw(
            "group",
            "add",
            "--key",
            str(data / "keys" / "coordinator.pem"),
            "--group",
            "demo",
            "--agent-id",
            agent,
            "--agent-key",
            str(key),
            "--create-key",
            env=env,
        )
        assert r.returncode == 0, r.stderr
        card = tmp_path / f"{agent}.yaml"
        card.write_text(
            f"agent_id: {agent}\ncapabilities: [test.ignore@1.0]\nmax_concurrency: 1\n",
            encoding="utf-8",
        )
        log = tmp_path / f"{agent}.log"
        workers[agent] = _hold_worker(
            card, key, tmp_path / "state", data, log, env, "--stop-timeout", "6"
        )
        processes.append(workers[agent])
    wid = "ign-1:a"
    lease = {"start_deadline_ms": 60_000, "lease_ms": 600_000, "heartbeat_ms": 1_000}
    spec = {
        "group_id": "demo",
        "mission_id": "ign-1",
        "title": "a handler that never pauses",
        "items": [
            {"work_item_id": wid, "contract": contract(("test.ignore@1.0",), timeouts=lease).wire()}
        ],
        "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
    }
    r = mw("mission", "start", "-", env=env, stdin=json.dumps(spec))
    assert r.returncode == 0, r.stderr

    def started_by() -> list[object]:
        return [e["actor"] for e in _events(authority, data) if e["type"] == "work.started"]

    (first,) = eventually(started_by, "a started WorkItem", stack, timeout_s=60)
    other = "ign-2" if first == "ign-1" else "ign-1"
    worker = workers[str(first)]
    worker.signal(signal.SIGINT)
    try:
        code = worker.proc.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{first} still runs after Ctrl-C: {worker.stderr()}") from None
    err = worker.stderr()
    assert code == 1, (code, err)
    assert "Traceback" not in err, err
    assert (
        f"error: agent {first} stopped without a clean stop: the handler of {wid} did not pause "
        "within 3 s; interrupted and reported failed (retryable) to the Authority, which offers "
        "it again"
    ) in err.splitlines(), err
    failed = [e for e in _events(authority, data) if e["type"] == "work.failed"]
    assert [(e["actor"], e["body"]["retryable"]) for e in failed] == [(first, True)]
    assert "interrupted" in failed[0]["body"]["evidence"][0]["summary"]
    eventually(
        lambda: started_by() == [first, other], f"{wid} started by {other}", stack, timeout_s=60
    )
    kinds = [e["type"] for e in _events(authority, data) if e.get("work_item_id") == wid]
    assert not [k for k in kinds if "expired" in str(k)], kinds  # reported, not timed out


def test_a_replaced_worker_names_the_process_that_took_over(
    tmp_path: Path, processes: list[Process]
) -> None:
    """A second worker with the same agent id and key opens a newer session: the first stops,
    saying which session replaced it, when, and which process (its pid and host)."""
    data, info, _ = _dev_up(tmp_path, processes)
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": info["Temporal"].split()[0],
        "MISSIONWEAVE_AUTHORITY_URL": info["Authority"],
    }
    key, card = tmp_path / "twin.pem", tmp_path / "twin.yaml"
    r = mw(
        "group",
        "add",
        "--key",
        str(data / "keys" / "coordinator.pem"),
        "--group",
        "demo",
        "--agent-id",
        "twin-1",
        "--agent-key",
        str(key),
        "--create-key",
        env=env,
    )
    assert r.returncode == 0, r.stderr
    card.write_text(
        "agent_id: twin-1\ncapabilities: [test.hold@1.0]\nmax_concurrency: 1\n", encoding="utf-8"
    )

    def worker(name: str) -> Process:
        return _hold_worker(card, key, tmp_path / name, data, tmp_path / f"{name}.log", env)

    first = worker("first")
    processes.append(first)
    eventually(lambda: "agent twin-1 working in demo" in first.stderr(), "a working agent", first)
    second = worker("second")
    processes.append(second)
    try:
        code = first.proc.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the first worker still runs: {first.stderr()}") from None
    err = first.stderr()
    assert code == 0 and "Traceback" not in err, (code, err)
    said = [line for line in err.splitlines() if "agent twin-1 was replaced" in line]
    assert len(said) == 1, err
    assert f" by pid {second.proc.pid} on host {socket.gethostname()} " in said[0], said
    assert " was opened at 20" in said[0] and "Z by pid" in said[0], said
    assert said[0].endswith("; stopping"), said
    opened = [
        e["body"]["session_epoch"]
        for e in _events(info["Authority"], data)
        if e["type"] == "agent.session_opened" and e["body"]["agent_id"] == "twin-1"
    ]
    assert f"agent twin-1 was replaced: session {opened[-1]} was opened" in said[0], said
    assert f"(this process had session {opened[-2]})" in said[0], said
    assert second.proc.poll() is None  # the new one goes on working


async def test_ctrl_c_bounds_the_stop_of_a_served_command() -> None:
    """``serve_until_signalled`` (``worker`` and ``coordinator``), in-process with real signals:
    Ctrl-C calls ``stop()`` and a server that stops ends the command; one that does not is ended
    by the stop timeout (status 1), or at once by a second Ctrl-C (status 130)."""
    loop = asyncio.get_running_loop()

    def ctrl_c(after_s: float) -> None:
        loop.call_later(after_s, os.kill, os.getpid(), signal.SIGINT)

    stopped = asyncio.Event()
    ctrl_c(0.05)
    await serve_until_signalled(stopped.wait(), stopped.set, what="agent a", stop_timeout=60)
    assert stopped.is_set()

    ctrl_c(0.05)
    with pytest.raises(CliError) as stuck:
        await serve_until_signalled(
            asyncio.Event().wait(), lambda: None, what="agent b", stop_timeout=1
        )
    assert stuck.value.exit_code == 1
    assert str(stuck.value).startswith("agent b did not stop within 1 s")

    ctrl_c(0.05)
    ctrl_c(0.3)
    with pytest.raises(CliError) as twice:
        await serve_until_signalled(
            asyncio.Event().wait(), lambda: None, what="agent c", stop_timeout=60
        )
    assert twice.value.exit_code == 130
    assert str(twice.value) == "interrupted again: agent c exits without a clean stop"
