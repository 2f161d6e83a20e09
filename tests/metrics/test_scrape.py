"""``GET /metrics`` of ``dev up`` (the Authority and the coordinator) and of ``missionweave
worker``, scraped as Prometheus does during a small Mission run from the CLI (issue 29, "Metrics
for operators"): each named series moves, labels carry no id, and every query of
``dashboards/*.json`` names a series the scrape found.

The Mission's one WorkItem runs ``tests.support.gate_handlers``' ``test.gate@1.0``, which waits
until the test opens its gate: the agent's busy slot is read while the handler runs, not guessed.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from missionweave.dev import free_port
from missionweave.metrics import series
from tests.support.cli_processes import EXE, DevStack, Process, dev_up, eventually, mission_spec, mw
from tests.support.mission_harness import contract

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
#: A series name in a PromQL query: ours or the Temporal SDK's, not a function call.
_NAME = re.compile(r"\b((?:missionweave|temporal)_[a-z0-9_]+)\b(?!\s*\()")

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(url: str) -> Samples:
    """Every sample of ``url``'s Prometheus text, by sample name (``…_total``, ``…_bucket``)."""
    r = httpx.get(url, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    found: Samples = defaultdict(list)
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            found[sample.name].append((dict(sample.labels), sample.value))
    return found


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        value
        for have, value in samples.get(name, [])
        if all(have.get(k) == v for k, v in labels.items())
    )


def _gate_worker(up: DevStack, tmp_path: Path, metrics_port: int) -> Process:
    """Agent ``gate-1`` (``test.gate@1.0``, one slot) added to Group ``demo`` and running."""
    key, card = tmp_path / "gate-1.pem", tmp_path / "gate-1.yaml"
    assert up.add_agent("gate-1", key).returncode == 0
    card.write_text(
        "agent_id: gate-1\ncapabilities: [test.gate@1.0]\nmax_concurrency: 1\n", encoding="utf-8"
    )
    args = ["--card", str(card), "--key", str(key), "--handlers", "tests.support.gate_handlers"]
    args += ["--group", "demo", "--state-dir", str(tmp_path / "state")]
    args += ["--metrics-port", str(metrics_port), "--log-level", "info"]
    return Process([EXE, "worker", *args], tmp_path / "worker.log", env=up.env)


def test_each_named_series_moves_during_a_mission_and_the_dashboards_name_scraped_series(
    tmp_path: Path, processes: list[Process]
) -> None:
    up = dev_up(tmp_path, processes, "--metrics-port", "0")  # any free port: the banner says
    stack_url = up.info["Metrics"]
    assert stack_url.startswith("http://127.0.0.1:") and stack_url.endswith("/metrics")
    assert not stack_url.endswith(":0/metrics")
    worker = _gate_worker(up, tmp_path, agent_port := free_port())
    processes.append(worker)
    agent_url = f"http://127.0.0.1:{agent_port}/metrics"

    def ready() -> bool:
        return any(
            a["agent_id"] == "gate-1" and a["session_epoch"] > 0 and a["card"]
            for a in up.read("agents")["agents"]
        )

    eventually(ready, "the agent's session and card", worker)
    stack0, agent0 = scrape(stack_url), scrape(agent_url)
    # counters of known label values are there, at 0, before anything happened
    assert ("reason", "lease_expired") in {
        kv
        for labels, _ in stack0[series.AUTHORITY_LEASE_EXPIRIES.prometheus]
        for kv in labels.items()
    }
    assert total(agent0, series.AGENT_SLOTS.prometheus) == 1
    assert total(agent0, series.AGENT_SLOTS_BUSY.prometheus) == 0

    gate = tmp_path / "gate"
    item = {
        "work_item_id": "m1:gate",
        "contract": contract(("test.gate@1.0",)).wire(),
        "input": {"gate": str(gate)},
    }
    spec = mission_spec("m1", "one gated WorkItem", [item])
    r = mw("mission", "start", "-", env=up.env, stdin=json.dumps(spec))
    assert r.returncode == 0, r.stderr

    # while the handler waits at the gate, its slot is busy
    busy = series.AGENT_SLOTS_BUSY.prometheus
    eventually(lambda: total(scrape(agent_url), busy) == 1, "a busy slot", worker)
    gate.write_text("open", encoding="utf-8")
    r = mw("mission", "watch", "m1", "--interval", "0.2", env=up.env)
    assert r.returncode == 0 and r.stdout.strip().endswith("mission m1 completed"), r.stdout

    stack1 = scrape(stack_url)
    agent1 = eventually(  # the handler's duration is recorded as its activity ends
        lambda: (
            got
            if total(got := scrape(agent_url), series.AGENT_HANDLER_DURATION.prometheus + "_count")
            else None
        ),
        "a handler duration",
        worker,
    )

    def moved(samples0: Samples, samples1: Samples, name: str, **labels: str) -> float:
        return total(samples1, name, **labels) - total(samples0, name, **labels)

    # the coordinator's offer, accepted by the Authority
    assert moved(stack0, stack1, series.COORDINATOR_OFFERS.prometheus, status="accepted") >= 1
    # Commands accepted, by type: the offer, the agent's acceptance, start and submission
    commands = series.AUTHORITY_COMMANDS.prometheus
    for command in ("work.offer", "work.accept_offer", "work.start", "work.submit"):
        assert moved(stack0, stack1, commands, type=command, status="accepted") >= 1, command
    assert moved(stack0, stack1, series.AUTHORITY_APPENDS.prometheus, type="work.started") >= 1
    assert moved(stack0, stack1, series.AUTHORITY_COMMIT.prometheus + "_count") >= 4
    assert moved(stack0, stack1, series.COORDINATOR_REVIEWS.prometheus, outcome="passed") == 1
    # the agent's handler: one run, submitted; its slot free again
    duration = series.AGENT_HANDLER_DURATION.prometheus
    assert total(agent1, duration + "_count", outcome="submitted") == 1
    assert total(agent1, duration + "_sum") > 0
    assert total(agent1, busy) == 0
    # the Temporal SDK's own series are served beside ours
    assert any(name.startswith("temporal_") for name in stack1)
    assert any(name.startswith("temporal_") for name in agent1)

    # labels carry no Group, Mission, agent or WorkItem id
    ids = {"demo", "m1", "m1:gate", "gate-1", "coordinator", "mission-m1"}
    for samples in (stack1, agent1):
        for name, rows in samples.items():
            if name.startswith("missionweave_"):
                for labels, _ in rows:
                    assert not ids & set(labels.values()), (name, labels)

    # every series of a dashboard query is one the scrape found
    scraped = set(stack1) | set(agent1)
    queries = dashboard_queries()
    assert {p.name for p in DASHBOARDS.glob("*.json")} == {
        "agents.json",
        "authority.json",
        "missions.json",
    }
    for board, expr in queries:
        for name in _NAME.findall(expr):
            assert name in scraped, (board, expr, name)

    # the handler's ctx.logger line reached the worker's log, naming its WorkItem
    assert "waiting at the gate gate [m1:gate]" in worker.stderr()
    worker.interrupt()
    assert up.process.interrupt() == 0, up.process.stderr()


def dashboard_queries() -> list[tuple[str, str]]:
    """``(dashboard file, PromQL)`` of every panel target; each dashboard is a Grafana
    dashboard model (title, uid, panels with a type, a title and the Prometheus data source)."""
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        assert board["title"].startswith("MissionWeave") and board["uid"], path
        assert isinstance(board["schemaVersion"], int) and board["panels"], path
        for panel in board["panels"]:
            assert panel["type"] and panel["title"], (path, panel)
            for target in panel.get("targets", []):
                assert panel["datasource"]["uid"] == "prometheus", (path, panel["title"])
                found.append((path.name, target["expr"]))
    assert found
    return found


def test_every_catalog_series_is_documented_and_every_dashboard_series_is_in_the_catalog() -> None:
    """docs/metrics.md lists each series of the catalog by its Prometheus name; a dashboard
    names only catalog series (or the Temporal SDK's)."""
    doc = (DASHBOARDS.parent / "docs" / "metrics.md").read_text(encoding="utf-8")
    for s in series.ALL:
        assert f"`{s.prometheus}`" in doc, s.prometheus
    ours = {s.prometheus for s in series.ALL}
    stems = ours | {f"{n}_{suffix}" for n in ours for suffix in ("bucket", "sum", "count")}
    for board, expr in dashboard_queries():
        for name in _NAME.findall(expr):
            assert name in stems or name.startswith(series.TEMPORAL_PREFIX), (board, name)
