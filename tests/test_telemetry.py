"""Tracing (issue 5): one trace from the client that starts a Mission through the workflow, an
activity and the Authority's append (reached over HTTP with ``traceparent``); spans around
artifact I/O; and with tracing off, set-up returns ``None`` and everything still works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from missionweave.artifacts import FilesystemStore
from missionweave.protocol.temporal_contract import mission_workflow_id
from missionweave.telemetry import (
    TelemetryError,
    reset_tracing,
    setup_tracing,
    temporal_interceptors,
    tracer,
)
from missionweave.workflows import MissionWorkflow

from .support.mission_harness import contract, mission_stack, step_registry
from .support.world import make_world

_OTEL_VARS = ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
              "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME")  # fmt: skip


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """An in-memory exporter behind a provider used for this test only (the global provider
    can be set once per process, so the test's provider is handed to ``setup_tracing``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert setup_tracing(provider=provider) is provider
    try:
        yield exporter
    finally:
        reset_tracing()
        provider.shutdown()


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _OTEL_VARS:
        monkeypatch.delenv(name, raising=False)
    reset_tracing()


def _one(found: Sequence[ReadableSpan], what: str) -> ReadableSpan:
    assert len(found) == 1, f"{what}: {[s.name for s in found]}"
    return found[0]


async def test_one_trace_from_start_through_workflow_activity_and_append(
    dev_env: WorkflowEnvironment, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    interceptors = temporal_interceptors()  # built after the test's provider is in place
    config = dev_env.client.config()
    config["interceptors"] = interceptors
    client = Client(**config)  # as `mission start` connects: with the tracing interceptor
    async with mission_stack(dev_env, tmp_path, interceptors=interceptors) as ms:
        await ms.agent("ada", step_registry())
        spec = ms.spec("traced", [{"work_item_id": "a", "contract": contract().wire()}])
        handle = await client.start_workflow(
            MissionWorkflow.run,
            args=[spec, None],
            id=mission_workflow_id(spec.mission_id),
            task_queue=ms.task_queue,
        )
        result = await handle.result()
        assert result.status == "completed"
    finished = spans.get_finished_spans()

    start = _one([s for s in finished if s.name.startswith("StartWorkflow:")], "StartWorkflow")
    assert start.context is not None
    trace_id = start.context.trace_id
    traced = [s for s in finished if s.context is not None and s.context.trace_id == trace_id]
    names = {s.name for s in traced}
    assert any(n.startswith("RunWorkflow:") for n in names), names
    assert {"RunActivity:execute_work_item", "RunActivity:submit_commands"} <= names, names
    # every run of the Mission's workflow is in that one trace
    runs = [s for s in finished if s.name.startswith("RunWorkflow:")]
    assert runs and all(s in traced for s in runs)

    by_id = {s.context.span_id: s for s in traced if s.context is not None}

    def parent_of(s: ReadableSpan) -> ReadableSpan | None:
        return by_id.get(s.parent.span_id) if s.parent is not None else None

    # An append reached over HTTP: append → (transaction) → authority.http, whose parent is the
    # activity span on the other side of the connection (the traceparent header).
    over_http = []
    for append in (s for s in traced if s.name == "authority.append"):
        node = parent_of(append)
        while node is not None and not node.name.startswith("authority.http"):
            node = parent_of(node)
        if node is None:
            continue
        caller = parent_of(node)
        if caller is not None and caller.name.startswith("RunActivity:"):
            over_http.append((append, node, caller))
    assert over_http, sorted(names)
    append, http, caller = next(
        t for t in over_http if t[2].name == "RunActivity:execute_work_item"
    )
    # the agent's own Commands: acceptance and start in one batch, then reports one by one
    assert http.name in (
        "authority.http POST /v1/commands",
        "authority.http POST /v1/commands/batch",
    )
    assert http.attributes is not None and http.attributes["http.response.status_code"] == 200
    attrs = dict(append.attributes or {})
    assert attrs["missionweave.group_id"] == ms.group
    assert attrs["missionweave.command.status"] == "accepted"
    assert attrs["missionweave.actor"] == "ada"
    assert str(attrs["missionweave.command.type"]).startswith("work.")
    assert isinstance(attrs["missionweave.event.seq_first"], int)
    assert attrs["missionweave.event.seq_last"] >= attrs["missionweave.event.seq_first"]


def test_merged_requests_keep_their_own_traces(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    """The BatchWriter merges requests into one transaction: each append joins its sender's
    trace, and the transaction links the requests after its first."""
    w = make_world(tmp_path / "authority.db")
    spans.clear()
    contexts = []
    for name in ("request-1", "request-2"):
        with tracer().start_as_current_span(name):
            contexts.append(otel_context.get_current())
    ada, bob = w.workers
    cmds = [
        a.command("progress.report", w.group, {"work_item_id": "nope"}, issued_at_ms=w.clock.now)
        for a in (ada, bob)
    ]
    results = w.authority.submit_many(cmds, trace_contexts=contexts)
    assert [r.status for r in results] == ["rejected", "rejected"]
    finished = spans.get_finished_spans()
    req1, req2 = (_one([s for s in finished if s.name == n], n) for n in ("request-1", "request-2"))
    tx = _one([s for s in finished if s.name == "authority.transaction"], "transaction")
    assert tx.parent is not None and req1.context is not None and req2.context is not None
    assert tx.context is not None
    assert tx.parent.span_id == req1.context.span_id
    assert [link.context.span_id for link in tx.links] == [req2.context.span_id]
    first, second = [s for s in finished if s.name == "authority.append"]
    assert first.parent is not None and first.parent.span_id == tx.context.span_id
    assert second.parent is not None and second.parent.span_id == req2.context.span_id
    assert second.context is not None and second.context.trace_id == req2.context.trace_id
    assert [link.context.span_id for link in second.links] == [tx.context.span_id]
    assert dict(second.attributes or {})["missionweave.command.status"] == "rejected"
    assert dict(second.attributes or {})["missionweave.rejection.code"]
    with pytest.raises(ValueError, match="one entry per command"):
        w.authority.submit_many(cmds, trace_contexts=contexts[:1])
    w.authority.close()


def test_artifact_io_spans(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    ref = store.put(b"hello", "text/plain")
    src = tmp_path / "big.bin"
    src.write_bytes(b"x" * 3_000_000)
    big = store.put_file(src)
    assert store.get(ref.hash) == b"hello"
    store.get_to_file(big.hash, tmp_path / "copy.bin")
    finished = spans.get_finished_spans()
    got = [(s.name, dict(s.attributes or {})) for s in finished]
    # put_file stores through put_stream: still one span
    assert [n for n, _ in got] == ["artifact.put", "artifact.put", "artifact.get", "artifact.get"]
    for (_, attrs), r in zip(got, [ref, big, ref, big], strict=True):
        assert attrs["missionweave.artifact.backend"] == "filesystem"
        assert attrs["missionweave.artifact.hash"] == r.hash
        assert attrs["missionweave.artifact.size"] == r.size
    assert got[1][1]["missionweave.artifact.method"] == "put_file"


def test_disabled_tracing_returns_none_and_nothing_breaks(
    tmp_path: Path, no_otel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert setup_tracing("missionweave-test") is None  # nothing configured: off
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert setup_tracing("missionweave-test") is None
    assert not tracer().start_span("x").is_recording()
    w = make_world(tmp_path / "authority.db")  # appends, traced by no-op spans
    w.authorize("item-1")
    store = FilesystemStore(tmp_path / "artifacts")
    assert store.get(store.put(b"data").hash) == b"data"
    w.authority.close()


def test_exporter_settings_are_checked(no_otel_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "no-such-exporter")
    with pytest.raises(TelemetryError, match="no-such-exporter"):
        setup_tracing()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(TelemetryError, match="http/json"):
        setup_tracing()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert setup_tracing() is None


_CHILD = """
import asyncio, json, sys, tempfile
import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from missionweave.authority import Authority
from missionweave.authority.http import create_app
from missionweave.protocol import SigningKey
from missionweave.telemetry import setup_tracing, tracer

p = setup_tracing("missionweave-child")
assert p is not None and setup_tracing("other") is p and trace.get_tracer_provider() is p
exporters = [type(x.span_exporter).__name__ for x in p._active_span_processor._span_processors]
mem = InMemorySpanExporter()
p.add_span_processor(SimpleSpanProcessor(mem))
with tracer().start_as_current_span("child-span"):
    pass

async def get() -> None:  # with the global provider set, FastAPI's own tracing must stay off
    with tempfile.TemporaryDirectory() as d:
        app = create_app(Authority(d + "/a.db", SigningKey.generate()))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://a") as c:
            assert (await c.get("/healthz")).status_code == 200

asyncio.run(get())
names = [s.name for s in mem.get_finished_spans()]
print(json.dumps({"exporters": exporters, "spans": names}), file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("env", "exporter"),
    [
        ({"OTEL_TRACES_EXPORTER": "console"}, "ConsoleSpanExporter"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "OTLPSpanExporter"),
    ],
)
def test_setup_from_environment_in_a_fresh_process(env: dict[str, str], exporter: str) -> None:
    """Set-up builds the global provider from OTEL_* (a subprocess: the global is set once)."""
    clean = {k: v for k, v in os.environ.items() if k not in _OTEL_VARS}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env={**clean, **env, "OTEL_EXPORTER_OTLP_TIMEOUT": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # the OTLP exporter may log its failed export (nothing listens) after our line
    line = next(x for x in out.stderr.splitlines() if x.startswith('{"exporters"'))
    assert json.loads(line) == {
        "exporters": [exporter],
        "spans": ["child-span", "authority.http GET /healthz"],
    }
    if exporter == "ConsoleSpanExporter":
        first, _ = json.JSONDecoder().raw_decode(out.stdout)
        assert first["name"] == "child-span"
        assert first["resource"]["attributes"]["service.name"] == "missionweave-child"
