"""``missionweave worker``: run as a user runs it (a real process); bad input is one line;
Ctrl-C ends it even when the Authority and Temporal are gone."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from missionweave.cli._common import CliError, serve_until_signalled
from missionweave.dev import free_port
from missionweave.protocol import SigningKey
from tests.support.cli_processes import (
    EXE,
    DevStack,
    Process,
    amw,
    children,
    dev_up,
    eventually,
    mission_spec,
    mw,
    processes_mentioning,
)
from tests.support.mission_harness import contract, mission_stack
from tests.support.serving import LiveServer
from tests.support.world import World


def _files(tmp: Path, key: SigningKey, card: str) -> tuple[Path, Path]:
    key_path, card_path = tmp / "agent.pem", tmp / "agent.yaml"
    key.to_file(key_path)
    card_path.write_text(card, encoding="utf-8")
    return key_path, card_path


CARD = "agent_id: worker-0\ncapabilities: [dist.verify@1.2]\nmax_concurrency: 2\n"


def test_worker_bad_input_is_one_line(tmp_path: Path) -> None:
    key_path, card_path = _files(tmp_path, SigningKey.generate(), CARD)
    base = ["--key", str(key_path), "--group", "g1", "--state-dir", str(tmp_path / "s")]
    cases = [
        (
            [
                "--card",
                str(tmp_path / "missing.yaml"),
                "--handlers",
                "tests.support.worker_handlers",
            ],
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
                "tests.support.worker_handlers",
                "--authority-url",
                f"http://127.0.0.1:{free_port()}",
            ],
            "cannot reach the Authority",
        ),
    ]
    bad_card = tmp_path / "bad.yaml"
    bad_card.write_text("agent_id: worker-0\nmax_concurrency: 0\n", encoding="utf-8")
    cases.append(
        (
            ["--card", str(bad_card), "--handlers", "tests.support.worker_handlers"],
            "invalid card: max_concurrency",
        )
    )
    for args, message in cases:
        r = mw("worker", *base, *args)
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    (tmp_path / "not.pem").write_text("nope", encoding="utf-8")
    r = mw(
        "worker",
        "--key",
        str(tmp_path / "not.pem"),
        "--card",
        str(card_path),
        "--handlers",
        "tests.support.worker_handlers",
        "--group",
        "g1",
    )
    assert r.returncode == 2 and "not an unencrypted PEM" in r.stderr


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("tests/support/worker_handlers.py", "did you mean 'tests.support.worker_handlers'"),
        ("no_such_pkg.handlers", "a handler module is named by its dotted path (e.g. "
         "mypkg.handlers) and must be importable from the current directory or PYTHONPATH"),
    ],
)  # fmt: skip
def test_worker_handlers_that_cannot_be_imported_get_a_dotted_path_hint(
    tmp_path: Path, given: str, hint: str
) -> None:
    """``--handlers`` given a file path, or a module Python cannot find, says how a handler
    module is named — one line, before any server is asked."""
    key_path, card_path = _files(tmp_path, SigningKey.generate(), CARD)
    r = mw(
        *("worker", "--key", str(key_path), "--card", str(card_path), "--group", "g1"),
        *("--handlers", given, "--state-dir", str(tmp_path / "s")),
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot import handler module {given!r}" in lines[0], r.stderr
    assert hint in lines[0], lines[0]


async def _ctrl_c_once(proc: asyncio.subprocess.Process, log: Path, *, ready: str) -> list[str]:
    """Once ``proc`` wrote ``ready`` to ``log``, one Ctrl-C (SIGINT); it must exit cleanly (0,
    no traceback) within STOP_BOUND_S. Its stderr lines; ``proc`` is killed if it still runs."""
    try:
        async with asyncio.timeout(STOP_BOUND_S * 2):  # a bound for a loaded machine
            while ready not in (err := await asyncio.to_thread(log.read_text)):
                assert proc.returncode is None, err
                await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(STOP_BOUND_S):
            code = await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    err = await asyncio.to_thread(log.read_text)
    assert code == 0 and "Traceback" not in err, (code, err)
    return err.strip().splitlines()


async def test_ctrl_c_ends_the_worker_with_a_stopped_line(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A working ``missionweave worker`` given Ctrl-C (SIGINT) stops cleanly, and its last line
    says so: ``agent <id> stopped``."""
    async with mission_stack(dev_env, tmp_path) as ms:
        await ms.process_member("stop-1", ["dist.verify@1.2"])
        proc = await ms.agent_process("stop-1", "tests.support.worker_handlers")
        log = tmp_path / "stop-1.log"
        lines = await _ctrl_c_once(proc, log, ready="agent stop-1 working in g1")
    assert "stopping agent stop-1; Ctrl-C again exits at once" in lines, lines
    assert lines[-1] == "agent stop-1 stopped", lines


async def test_ctrl_c_ends_the_coordinator_with_a_stopped_line(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``missionweave coordinator`` (the process of missionweave.coordinator) serves until
    Ctrl-C and ends, as the worker does, with ``coordinator <id> stopped``."""
    async with mission_stack(dev_env, tmp_path) as ms:
        log = tmp_path / "coordinator.log"
        target = dev_env.client.service_client.config.target_host
        proc = await asyncio.create_subprocess_exec(
            *(EXE, "coordinator", "--key", str(ms.stack.key_file("coordinator"))),
            *("--authority-url", ms.stack.url, "--temporal-address", target),
            *("--artifacts", str(tmp_path / "artifacts"), "--metrics-port", "0"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        ready = "coordinator coordinator on missionweave-coordinator"
        lines = await _ctrl_c_once(proc, log, ready=ready)
    assert lines[-1] == "coordinator coordinator stopped", lines


async def test_worker_unreachable_temporal_is_one_line(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    key_path, card_path = _files(tmp_path, world.workers[0].key, CARD)
    r = await amw(  # the Authority is served on this event loop
        "worker",
        "--card",
        str(card_path),
        "--key",
        str(key_path),
        "--handlers",
        "tests.support.worker_handlers",
        "--group",
        "g1",
        "--authority-url",
        live.url,
        "--temporal-address",
        f"127.0.0.1:{free_port()}",
        "--state-dir",
        str(tmp_path / "s"),
    )
    assert r.returncode == 2
    assert "error: cannot reach Temporal at 127.0.0.1:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_worker_and_coordinator_help_name_their_options_and_variables() -> None:
    """The shared options (one definition in ``cli/_options.py``) say which environment
    variable sets their default, for ``worker`` as for ``coordinator``."""
    shared = (
        "--authority-url",
        "--temporal-address",
        "--namespace",
        "--stop-timeout",
        "env var: MISSIONWEAVE_AUTHORITY_URL",
        "env var: TEMPORAL_ADDRESS",
        "env var: TEMPORAL_NAMESPACE",
    )
    for command, own in (
        ("worker", ("--card", "--key", "--handlers", "--group", "--state-dir")),
        ("coordinator", ("--key", "--agent-id", "--artifacts", "--s3-endpoint")),
    ):
        r = mw(command, "--help", env={"COLUMNS": "200"})
        assert r.returncode == 0, r.stderr
        for word in (*own, *shared):
            assert word in r.stdout, (command, word)


#: How long a worker may take to exit after Ctrl-C: its --stop-timeout (default 20 s) plus a
#: generous margin for a loaded machine. A process wait, not a speed assertion.
STOP_BOUND_S = 30


def _exit(worker: Process, what: str, *, ctrl_c: bool = True) -> tuple[int, str]:
    """(Ctrl-C, then) the worker's exit status within STOP_BOUND_S, and its stderr."""
    if ctrl_c:
        worker.signal(signal.SIGINT)
    try:
        code = worker.proc.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what} still runs: {worker.stderr()}") from None
    return code, worker.stderr()


def _stopped_alone(worker: Process, agent: str) -> None:
    """Ctrl-C, then the worker exits within STOP_BOUND_S: cleanly (0), or, when its clean stop
    cannot finish without the servers, by its stop timeout (1, one line); never a traceback."""
    code, err = _exit(worker, f"{agent} {STOP_BOUND_S} s after Ctrl-C")
    assert "Traceback" not in err, err
    assert f"stopping agent {agent}; Ctrl-C again exits at once" in err, err
    if code == 1:
        assert (
            f"error: agent {agent} did not stop within 20 s (are the Authority and Temporal "
            "reachable?); exiting without a clean stop"
        ) in err.splitlines(), err
    else:
        assert code == 0, (code, err)


def _agent(up: DevStack, tmp_path: Path, agent: str, capability: str) -> tuple[Path, Path]:
    """``agent`` added to Group ``demo`` (its key created) with a card for ``capability`` (one
    WorkItem at a time): its key and card files."""
    key, card = tmp_path / f"{agent}.pem", tmp_path / f"{agent}.yaml"
    r = up.add_agent(agent, key)
    assert r.returncode == 0, r.stderr
    card.write_text(
        f"agent_id: {agent}\ncapabilities: [{capability}]\nmax_concurrency: 1\n",
        encoding="utf-8",
    )
    return key, card


def _hold_worker(
    up: DevStack, card: Path, key: Path, state_dir: Path, log: Path, *extra: str
) -> Process:
    """``missionweave worker`` in Group ``demo`` with ``tests.support.hold_handlers``, sharing the
    dev stack's artifact store; it reads the servers' addresses from the environment."""
    return Process(
        [
            EXE,
            "worker",
            "--card",
            str(card),
            "--key",
            str(key),
            "--handlers",
            "tests.support.hold_handlers",
            "--group",
            "demo",
            "--state-dir",
            str(state_dir),
            *extra,
        ],
        log,
        env=up.env,
    )


def test_ctrl_c_stops_a_worker_whose_servers_are_gone(
    tmp_path: Path, processes: list[Process]
) -> None:
    """Two agents each hold a running WorkItem of one Mission; then the servers go away and each
    gets Ctrl-C. ``frozen-1`` while the Authority and Temporal are frozen (SIGSTOP: connections
    stay open, nothing answers — a host that vanished), ``gone-1`` once they are killed. The
    workers read the servers' addresses from TEMPORAL_ADDRESS and MISSIONWEAVE_AUTHORITY_URL,
    as the coordinator does."""
    up = dev_up(tmp_path, processes)
    stack = up.process
    workers: dict[str, Process] = {}
    for agent, capability in (("frozen-1", "test.hold@1.0"), ("gone-1", "test.wait@1.0")):
        key, card = _agent(up, tmp_path, agent, capability)
        log = tmp_path / f"{agent}.log"
        workers[agent] = _hold_worker(up, card, key, tmp_path / "state", log)
        processes.append(workers[agent])
    items = [
        {"work_item_id": f"hold-1:{c}", "contract": contract((f"test.{c}@1.0",)).wire()}
        for c in ("hold", "wait")
    ]
    spec = mission_spec("hold-1", "two WorkItems held until stopped", items)
    r = mw("mission", "start", "-", env=up.env, stdin=json.dumps(spec))
    assert r.returncode == 0, r.stderr

    def both_started() -> bool:
        started = {e["work_item_id"] for e in up.events() if e["type"] == "work.started"}
        return started == {"hold-1:hold", "hold-1:wait"}

    eventually(both_started, "two started WorkItems", stack)

    # dev up runs the Temporal server as a child, in a process group of its own, and the
    # Authority's signature verifiers
    assert children(stack.proc.pid, " server start-dev ")
    servers = [stack.proc.pid, *children(stack.proc.pid)]  # dev up (the Authority) and those
    for pid in servers:
        os.kill(pid, signal.SIGSTOP)
    _stopped_alone(workers["frozen-1"], "frozen-1")
    for pid in servers:
        os.kill(pid, signal.SIGKILL)
    stack.proc.wait(timeout=30)
    _stopped_alone(workers["gone-1"], "gone-1")
    assert processes_mentioning(str(tmp_path)) == []


def test_ctrl_c_on_a_handler_that_never_pauses_reports_it_and_exits_1(
    tmp_path: Path, processes: list[Process]
) -> None:
    """Two agents can take the WorkItem; the one that took it gets Ctrl-C while its handler
    ignores ``should_pause()``. Within ``--stop-timeout`` it cancels the handler, reports the
    execution failed (retryable) to the Authority and exits with status 1 naming the WorkItem;
    the other agent then starts it — long before its 10-minute lease could have expired."""
    up = dev_up(tmp_path, processes)
    stack = up.process
    workers: dict[str, Process] = {}
    for agent in ("ign-1", "ign-2"):
        key, card = _agent(up, tmp_path, agent, "test.ignore@1.0")
        log = tmp_path / f"{agent}.log"
        workers[agent] = _hold_worker(up, card, key, tmp_path / "state", log, "--stop-timeout", "6")
        processes.append(workers[agent])
    wid = "ign-1:a"
    lease = {"start_deadline_ms": 60_000, "lease_ms": 600_000, "heartbeat_ms": 1_000}
    item = {"work_item_id": wid, "contract": contract(("test.ignore@1.0",), timeouts=lease).wire()}
    spec = mission_spec("ign-1", "a handler that never pauses", [item])
    r = mw("mission", "start", "-", env=up.env, stdin=json.dumps(spec))
    assert r.returncode == 0, r.stderr

    def started_by() -> list[object]:
        return [e["actor"] for e in up.events() if e["type"] == "work.started"]

    (first,) = eventually(started_by, "a started WorkItem", stack)
    other = "ign-2" if first == "ign-1" else "ign-1"
    code, err = _exit(workers[str(first)], f"{first} after Ctrl-C")
    assert code == 1, (code, err)
    assert "Traceback" not in err, err
    assert (
        f"error: agent {first} stopped without a clean stop: the handler of {wid} did not pause "
        "within 3 s; interrupted and reported failed (retryable) to the Authority, which offers "
        "it again"
    ) in err.splitlines(), err
    failed = [e for e in up.events() if e["type"] == "work.failed"]
    assert [(e["actor"], e["body"]["retryable"]) for e in failed] == [(first, True)]
    assert "interrupted" in failed[0]["body"]["evidence"][0]["summary"]
    eventually(lambda: started_by() == [first, other], f"{wid} started by {other}", stack)
    kinds = [e["type"] for e in up.events() if e.get("work_item_id") == wid]
    assert not [k for k in kinds if "expired" in str(k)], kinds  # reported, not timed out

    # dev up stopped while the Mission's activity is in flight: a clean stop, and nothing
    # printed by workflow coroutines closed after their loop is gone (workflows Board.spawn)
    assert stack.interrupt() == 0, stack.stderr()
    log = stack.stderr()
    assert "Exception ignored" not in log and "Traceback" not in log, log


def test_a_replaced_worker_names_the_process_that_took_over(
    tmp_path: Path, processes: list[Process]
) -> None:
    """A second worker with the same agent id and key opens a newer session: the first stops,
    saying which session replaced it, when, and which process (its pid and host)."""
    up = dev_up(tmp_path, processes)
    key, card = _agent(up, tmp_path, "twin-1", "test.hold@1.0")

    def worker(name: str, key: Path = key) -> Process:
        return _hold_worker(up, card, key, tmp_path / name, tmp_path / f"{name}.log")

    # Another key for the same agent id: the session is refused, one line, never "working".
    assert mw("keys", "generate", str(tmp_path / "impostor.pem")).returncode == 0
    impostor = worker("impostor", tmp_path / "impostor.pem")
    processes.append(impostor)
    code, err = _exit(impostor, "the worker with another key", ctrl_c=False)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "session.open rejected" in lines[0] and "working in" not in err, err

    first = worker("first")
    processes.append(first)
    eventually(lambda: "agent twin-1 working in demo" in first.stderr(), "a working agent", first)
    second = worker("second")
    processes.append(second)
    code, err = _exit(first, "the first worker", ctrl_c=False)
    assert code == 0 and "Traceback" not in err, (code, err)
    said = [line for line in err.splitlines() if "agent twin-1 was replaced" in line]
    assert len(said) == 1, err
    assert f" by pid {second.proc.pid} on host {socket.gethostname()} " in said[0], said
    assert " was opened at 20" in said[0] and "Z by pid" in said[0], said
    assert said[0].endswith("; stopping"), said
    opened = [
        e["body"]["session_epoch"]
        for e in up.events()
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
