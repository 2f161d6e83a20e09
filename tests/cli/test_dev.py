"""``missionweave dev up`` and ``missionweave mission …``, run as a user runs them (real processes).

One test starts the embedded stack in a temporary data directory on free ports, adds an example
agent with ``group add``, runs it with ``missionweave worker``, and drives two Missions through
the CLI: one completes (``start``, ``watch`` exit 0, ``status``, ``graph``), one is cancelled
(``cancel``, ``watch`` exit 1). Then Ctrl-C stops the stack cleanly, no process is left, and the
Group's log verifies. The others check that bad input is one line and a non-zero exit.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml

from missionweave.dev import free_port
from tests.support.cli_processes import (
    EXE,
    ROOT,
    Process,
    dev_up,
    eventually,
    listening_port,
    mission_spec,
    mw,
    one_line_error,
    processes_mentioning,
)
from tests.support.mission_harness import contract


def _spec(mission_id: str, capability: str) -> dict[str, Any]:
    """A one-item Mission for the example agent ``counter-1`` (``text.stats``)."""
    c = contract(
        (capability,),
        deliverables=[{"name": "stats"}],
        acceptance_criteria=[
            {
                "id": "counted",
                "description": "the words are counted",
                "evidence_required": "the counts",
            }
        ],
    )
    item = {
        "work_item_id": f"{mission_id}:count",
        "contract": c.wire(),
        "input": {"text": "one two three\nfour\n"},
    }
    return mission_spec(mission_id, f"count words ({mission_id})", [item])


@pytest.mark.timeout(360)  # three Missions through real processes, on a loaded machine too
def test_dev_up_runs_missions_from_the_cli_and_stops_cleanly(
    tmp_path: Path, processes: list[Process]
) -> None:
    up = dev_up(tmp_path, processes, "--group", "demo", ui=True)
    data, info, stack = up.data, up.info, up.process
    temporal, authority = up.temporal, up.authority
    ui, coordinator_key = info["Temporal UI"], up.coordinator_key
    assert info["Group"] == "demo" and info["Data dir"] == str(data)
    assert coordinator_key.is_file() and (data / "authority.db").is_file()
    assert (data / "temporal.db").is_file() and (data / "artifacts").is_dir()
    env = {**up.env, "MISSIONWEAVE_UI_URL": ui}

    # The Group exists already (dev up made it); another key cannot claim it.
    r = mw("group", "create", "--key", str(coordinator_key), "--group", "demo", env=env)
    assert r.returncode == 0 and "group demo exists (owner coordinator)" in r.stdout, r.stderr
    assert mw("keys", "generate", str(tmp_path / "other.pem")).returncode == 0
    r = mw("group", "create", "--key", str(tmp_path / "other.pem"), "--group", "demo", env=env)
    one_line_error(r, "group 'demo' exists and this key")

    # The banner's "Next" commands, run as printed: each example agent joins the Group
    # (idempotently) and starts working, and the example Mission they serve completes.
    printed = stack.lines_until(r"mission start", 10)
    hint = [shlex.split(line.removesuffix(" &")) for line in printed[1:]]
    exe = ".venv/bin/missionweave"
    group_adds = [c for c in hint if c[:3] == [exe, "group", "add"]]
    worker_cmds = [c for c in hint if c[:2] == [exe, "worker"]]
    (mission_file,) = [c[3] for c in hint if c[:3] == [exe, "mission", "start"]]
    assert (ROOT / mission_file).is_file()
    agents = [c[c.index("--agent-id") + 1] for c in group_adds]
    assert agents == ["counter-1", "checker-1"] and len(worker_cmds) == 2
    for group_add in group_adds:
        agent_key = Path(group_add[group_add.index("--agent-key") + 1])
        assert agent_key.parent == data / "keys"
        agent = group_add[group_add.index("--agent-id") + 1]
        r = mw(*group_add[1:], env=env)
        assert r.returncode == 0 and f"{agent} added in group demo" in r.stdout, r.stderr
    r = mw(*group_adds[0][1:], env=env)
    assert r.returncode == 0 and "counter-1 present in group demo" in r.stdout, r.stderr
    workers = []
    for n, worker_cmd in enumerate(worker_cmds):
        flags = dict(zip(worker_cmd[2::2], worker_cmd[3::2], strict=False))
        assert flags["--authority-url"] == authority and flags["--temporal-address"] == temporal
        workers.append(
            Process(
                [EXE, *worker_cmd[1:], "--state-dir", str(tmp_path / f"state-{n}")],
                tmp_path / f"worker-{n}.log",
                env=env,
            )
        )
        processes.append(workers[-1])
    worker = workers[0]

    def agents_ready() -> bool:
        return {  # reads are a member's
            a["agent_id"]
            for a in up.read("agents")["agents"]
            if a["session_epoch"] > 0 and a["card"]
        } >= set(agents)

    eventually(agents_ready, "the agents' sessions and cards", worker, timeout_s=120)
    r = mw("mission", "start", str(ROOT / mission_file), env=env)
    assert r.returncode == 0, r.stderr
    r = mw("mission", "watch", "hello-1", "--interval", "0.2", env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("mission hello-1 completed"), r.stdout

    # A Mission that completes.
    spec_file = tmp_path / "t1.json"
    spec_file.write_text(json.dumps(_spec("t1", "text.stats@1.0")), encoding="utf-8")
    r = mw("mission", "start", str(spec_file), env=env)
    assert r.returncode == 0, r.stderr
    assert "started mission t1 in group demo: workflow mission-t1" in r.stdout
    link = f"{ui}/namespaces/default/workflows/mission-t1"
    assert r.stdout.strip().splitlines()[-1] == link
    assert httpx.get(link, timeout=10).status_code == 200
    r = mw("mission", "watch", "t1", "--interval", "0.2", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("mission t1 completed")
    r = mw("mission", "status", "t1", env=env)
    assert r.returncode == 0, r.stderr
    assert "t1:count" in r.stdout and "verified" in r.stdout and "counter-1" in r.stdout
    assert '{"stats":{' in r.stdout  # its outputs, not only in the workflow's result
    r = mw("mission", "status", "mission-t1", "--json", env=env)
    status = json.loads(r.stdout)
    assert status["status"] == "completed"
    assert [(i["work_item_id"], i["state"], i["owner"]) for i in status["items"]] == [
        ("t1:count", "verified", "counter-1")
    ]
    assert set(status["items"][0]["outputs"]) == {"stats"}
    r = mw("mission", "graph", "t1", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "flowchart LR"
    assert 'w0["t1:count<br/>verified · counter-1"]' in r.stdout
    assert "class w0 verified" in r.stdout and "classDef verified fill:" in r.stdout

    # A Mission nobody can serve, read from stdin as YAML, then cancelled.
    r = mw("mission", "start", "-", env=env, stdin=yaml.safe_dump(_spec("t2", "no.one@1.0")))
    assert r.returncode == 0 and "workflow mission-t2" in r.stdout, r.stderr
    r = mw("mission", "status", "t2", "--json", env=env)
    assert json.loads(r.stdout)["status"] == "running"
    r = mw("mission", "cancel", "t2", "--reason", "nobody serves it", env=env)
    assert r.returncode == 0 and r.stdout.strip() == "mission t2 cancelled", r.stderr
    r = mw("mission", "watch", "t2", env=env)
    assert r.returncode == 1 and r.stdout.strip().endswith("mission t2 cancelled"), r.stdout
    one_line_error(
        mw("mission", "cancel", "t2", env=env), "mission 't2' is not running (mission cancelled)"
    )
    one_line_error(mw("mission", "status", "nope", env=env), "no mission 'nope'")
    one_line_error(mw("mission", "start", str(spec_file), env=env), "already exists")

    # Ctrl-C: the agents first, then the stack; nothing is left running.
    for w in workers:
        w.interrupt()
    assert stack.interrupt() == 0, stack.stderr()
    log = stack.stderr()
    assert "stopped" in log and "Traceback" not in log, log
    assert processes_mentioning(str(tmp_path)) == []
    r = mw("events", "verify", "--db", str(data / "authority.db"))
    assert r.returncode == 0 and "ok   group demo" in r.stdout, r.stdout + r.stderr


def test_mission_bad_input_is_one_line(tmp_path: Path) -> None:
    one_line_error(mw("mission", "start", str(tmp_path / "missing.yaml")), "no mission file at")
    bad = _spec("b1", "text.stats@1.0")
    del bad["items"][0]["contract"]["objective"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    one_line_error(
        mw("mission", "start", str(path)),
        "invalid MissionSpec: items.0.contract.objective: Field required",
    )
    cyclic = _spec("b2", "text.stats@1.0")
    cyclic["items"][0]["dependencies"] = ["b2:count"]
    one_line_error(mw("mission", "start", "-", stdin=json.dumps(cyclic)), "invalid MissionSpec")
    one_line_error(
        mw("mission", "start", "-", stdin="group_id: [unclosed"), "stdin: neither JSON nor YAML"
    )
    one_line_error(mw("mission", "start", "-", stdin="[1, 2]"), "a MissionSpec is a mapping")
    empty = {**_spec("b4", "text.stats@1.0"), "items": []}
    one_line_error(
        mw("mission", "start", "-", stdin=json.dumps(empty)),
        "items: a Mission needs at least one WorkItem",
    )
    spec = tmp_path / "ok.json"
    spec.write_text(json.dumps(_spec("b3", "text.stats@1.0")), encoding="utf-8")
    nowhere = f"127.0.0.1:{free_port()}"
    for args in (
        ["start", str(spec)],
        ["status", "b3"],
        ["watch", "b3"],
        ["cancel", "b3"],
        ["graph", "b3"],
    ):
        one_line_error(
            mw("mission", *args, "--temporal-address", nowhere),
            f"cannot reach Temporal at {nowhere}",
        )


def test_dev_up_with_a_taken_port_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    with listening_port() as port:
        r = mw(
            "dev",
            "up",
            "--data-dir",
            str(tmp_path / "data"),
            "--temporal-port",
            "0",
            "--headless",
            "--authority-port",
            str(port),
            "--metrics-port",  # any free one: not 9465, which a `make dev` beside may hold
            "0",
        )
    one_line_error(r, f"cannot listen on 127.0.0.1:{port}")
    assert processes_mentioning(str(tmp_path)) == []


def test_help_of_the_new_commands() -> None:
    for args, words in (
        (
            ["dev", "up"],
            [
                "--data-dir",
                "--temporal-port",
                "--ui-port",
                "--authority-port",
                "--headless",
                "--group",
            ],
        ),
        (["mission", "start"], ["FILE", "--temporal-address", "--namespace", "--ui-url"]),
        (["mission", "status"], ["--json"]),
        (["mission", "watch"], ["--interval"]),
        (["mission", "cancel"], ["--reason"]),
        (["mission", "graph"], ["Mermaid"]),
        (["group", "add"], ["--agent-key", "--public-key", "--role", "--create-key"]),
    ):
        r = mw(*args, "--help", env={"COLUMNS": "200"})
        assert r.returncode == 0, r.stderr
        for word in words:
            assert word in r.stdout, (args, word)


def test_the_banner_starts_every_agent_its_example_mission_needs(tmp_path: Path) -> None:
    """Followed as printed, the "Next" hint serves every capability the example Mission's
    WorkItems require (issue 36: it once started only ``counter-1``, and ``hello.yaml`` never
    completed)."""
    from missionweave.cli._dev import _describe

    key = tmp_path / "keys" / "coordinator.pem"
    stack: Any = SimpleNamespace(
        coordinator_key_path=key, ui_url=None, temporal_target="127.0.0.1:1",
        namespace="default", authority_url="http://127.0.0.1:2", files=SimpleNamespace(
            artifacts=tmp_path / "artifacts"), data_dir=tmp_path,
        coordinator=SimpleNamespace(agent_id="coordinator"), group="demo",
    )  # fmt: skip
    banner = _describe(stack, None)
    assert "  Metrics       (none)" in banner
    hint = [shlex.split(line.removesuffix(" &")) for line in banner.splitlines()]
    (mission,) = [c[3] for c in hint if c[1:3] == ["mission", "start"]]
    needed = {
        cap.split("@")[0]
        for item in yaml.safe_load((ROOT / mission).read_text(encoding="utf-8"))["items"]
        for cap in item["contract"]["required_capabilities"]
    }
    enrolled = {c[c.index("--agent-id") + 1] for c in hint if c[1:3] == ["group", "add"]}
    served: set[str] = set()
    for c in hint:
        if c[1:2] == ["worker"]:
            card = yaml.safe_load((ROOT / c[c.index("--card") + 1]).read_text(encoding="utf-8"))
            assert card["agent_id"] in enrolled
            assert Path(c[c.index("--key") + 1]) == key.parent / f"{card['agent_id']}.pem"
            served |= {cap.split("@")[0] for cap in card["capabilities"]}
    assert needed and needed <= served, (needed, served)


def test_metrics_port_0_is_any_free_port_and_no_metrics_is_none(tmp_path: Path) -> None:
    """``--metrics-port 0`` picks a free port as every other port does (served and scraped:
    ``tests/metrics/test_scrape.py``); ``--no-metrics`` is the one way to serve none, said so
    in ``--help`` (issue 36)."""
    from missionweave.cli._common import CliError, start_metrics

    assert start_metrics(None, "127.0.0.1", 9465, off=True) is None
    assert start_metrics(None, "127.0.0.1", None) is None  # the worker: none by default
    with pytest.raises(CliError, match="--metrics-port and --no-metrics"):
        start_metrics(0, "127.0.0.1", 9465, off=True)
    for command in (["dev", "up"], ["coordinator"], ["authority", "serve"]):
        r = mw(*command, "--help", env={"COLUMNS": "200"})
        assert r.returncode == 0, r.stderr
        text = " ".join(r.stdout.replace("│", " ").split())  # a wrapped cell's lines
        assert "0: any free one" in text and "--no-metrics" in text, (command, r.stdout)
    r = mw("worker", "--help", env={"COLUMNS": "200"})
    assert "0: any free one" in " ".join(r.stdout.split()), r.stdout
    r = mw("dev", "up", "--data-dir", str(tmp_path / "d"), "--metrics-port", "0", "--no-metrics")
    one_line_error(r, "--metrics-port and --no-metrics: give one of them")
