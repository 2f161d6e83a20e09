"""The Temporal web UI shows a Mission as docs/design.md §5 and issue 5 promise, checked
against the UI server's own HTTP API (``temporal server start-dev``'s UI, started by
``EmbeddedStack``), the same requests the UI's pages make:

* ``GET  {ui}/api/v1/namespaces/{ns}/workflows?query=…`` — the workflow list and its search;
* ``GET  {ui}/api/v1/namespaces/{ns}/workflows/{workflow_id}`` — the workflow's page (describe);
* ``GET  {ui}/api/v1/namespaces/{ns}/workflows/{workflow_id}/history`` — its event history;
* ``POST {ui}/api/v1/namespaces/{ns}/workflows/{workflow_id}/query/__temporal_workflow_metadata``
  — "Current Details"; a POST needs the ``_csrf`` cookie echoed in ``X-CSRF-Token`` (without it
  the UI server answers 400 "missing csrf token in request header").

Payloads come as ``{"metadata": {"encoding": base64}, "data": base64}``, JSON inside.
One Mission of two WorkItems is started with ``missionweave mission start`` (the way a user
starts one), run to the end by an in-process agent, then looked at once; the tests assert on
what the UI's API said.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from missionweave.dev import EmbeddedStack
from missionweave.protocol import AgentCard, SigningKey
from missionweave.protocol.temporal_contract import MissionResult, mission_workflow_id
from tests.support.cli_processes import amw
from tests.support.mission_harness import contract, step_registry

GROUP, MISSION, TITLE = "ui", "ui-1", "Two steps, seen in the web UI"
ITEMS = (f"{MISSION}:first", f"{MISSION}:second")
#: How long the list API may lag behind the workflow (visibility is updated asynchronously).
VISIBILITY_S = 30


def payload(p: dict[str, Any]) -> Any:
    """A Temporal payload as the HTTP API returns it, decoded: ours are ``json/plain``, the
    SDK's own (the workflow metadata query) ``json/protobuf``."""
    encoding = base64.b64decode(p["metadata"]["encoding"]).decode()
    assert encoding in ("json/plain", "json/protobuf"), encoding
    return json.loads(base64.b64decode(p["data"]))


@dataclass
class UiView:
    """What the UI server's API said about the finished Mission."""

    namespace: str
    mission_url: str
    printed_link: str  # the last line `missionweave mission start` printed
    page: httpx.Response  # GET mission_url
    page_api: dict[str, Any]  # GET /api/v1 + the page's path
    unknown_page_api: httpx.Response  # the same for a workflow that does not exist
    searches: dict[str, list[str]]  # list query → workflow ids found
    describe: dict[str, Any]
    metadata_without_csrf: httpx.Response
    metadata: dict[str, Any]  # the __temporal_workflow_metadata query's answer, decoded
    history: list[dict[str, Any]]  # every event of the run


async def _search(ui: httpx.AsyncClient, ns: str, query: str) -> list[str]:
    """The workflow ids the list API finds for ``query``, once it finds any (it lags)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + VISIBILITY_S
    while True:
        r = await ui.get(f"/api/v1/namespaces/{ns}/workflows", params={"query": query})
        assert r.status_code == 200, r.text
        found = [e["execution"]["workflowId"] for e in r.json().get("executions", [])]
        if found or loop.time() > deadline:
            return found
        await asyncio.sleep(0.5)


async def _history(ui: httpx.AsyncClient, ns: str, wid: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    token = ""
    while True:
        r = await ui.get(
            f"/api/v1/namespaces/{ns}/workflows/{wid}/history",
            params={"nextPageToken": token} if token else {},
        )
        assert r.status_code == 200, r.text
        events += r.json()["history"]["events"]
        token = r.json().get("nextPageToken") or ""
        if not token:
            return events


async def _look(data: Path) -> UiView:
    key = SigningKey.generate()
    card = AgentCard(
        agent_id="ada", public_key=key.public_key, capabilities=["demo.step@1.0"], max_concurrency=1
    )
    async with EmbeddedStack(
        data, temporal_port=0, ui_port=0, authority_port=0, group=GROUP
    ) as stack:
        assert stack.ui_url is not None
        await stack.start_agent(card, key, step_registry())
        spec = {
            "group_id": GROUP,
            "mission_id": MISSION,
            "title": TITLE,
            "items": [
                {"work_item_id": ITEMS[0], "contract": contract().wire()},
                {
                    "work_item_id": ITEMS[1],
                    "contract": contract().wire(),
                    "dependencies": [ITEMS[0]],
                },
            ],
            "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
        }
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": stack.temporal_target,
            "TEMPORAL_NAMESPACE": stack.namespace,
            "MISSIONWEAVE_UI_URL": stack.ui_url,
        }
        started = await amw("mission", "start", "-", env=env, stdin=json.dumps(spec))
        assert started.returncode == 0, started.stderr
        wid = mission_workflow_id(MISSION)
        result = await stack.client.get_workflow_handle(wid, result_type=MissionResult).result()
        assert result.status == "completed", result
        ns, url = stack.namespace, stack.mission_url(MISSION)
        assert url is not None
        async with httpx.AsyncClient(base_url=stack.ui_url, timeout=15) as ui:
            searches = {
                q: await _search(ui, ns, q)
                for q in (
                    f'MissionId="{MISSION}"',
                    f'GroupId="{GROUP}"',
                    f'MissionStatus="completed" AND MissionId="{MISSION}"',
                    "OpenWorkItems=0",
                )
            }
            page = await ui.get(url)
            page_api = await ui.get(f"/api/v1{urlsplit(url).path}")
            assert page_api.status_code == 200, page_api.text
            unknown = await ui.get(f"/api/v1/namespaces/{ns}/workflows/mission-no-such-one")
            describe = await ui.get(f"/api/v1/namespaces/{ns}/workflows/{wid}")
            assert describe.status_code == 200, describe.text
            query = f"/api/v1/namespaces/{ns}/workflows/{wid}/query/__temporal_workflow_metadata"
            body = {
                "execution": {"workflowId": wid},
                "query": {"queryType": "__temporal_workflow_metadata"},
            }
            bare = await ui.post(query, json=body)
            if "_csrf" not in ui.cookies:  # the UI's pages get it with their first request
                await ui.get("/api/v1/settings")
            answer = await ui.post(query, json=body, headers={"X-CSRF-Token": ui.cookies["_csrf"]})
            assert answer.status_code == 200, answer.text
            return UiView(
                namespace=ns,
                mission_url=url,
                printed_link=started.stdout.strip().splitlines()[-1],
                page=page,
                page_api=page_api.json(),
                unknown_page_api=unknown,
                searches=searches,
                describe=describe.json(),
                metadata_without_csrf=bare,
                metadata=payload(answer.json()["queryResult"]["payloads"][0]),
                history=await _history(ui, ns, wid),
            )


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> UiView:
    return asyncio.run(_look(tmp_path_factory.mktemp("ui") / "data"))


def test_the_mission_is_found_by_its_search_attributes(view: UiView) -> None:
    wid = mission_workflow_id(MISSION)
    for query, found in view.searches.items():
        assert found == [wid], (query, found)
    attributes = view.describe["workflowExecutionInfo"]["searchAttributes"]["indexedFields"]
    assert {
        k: payload(attributes[k])
        for k in ("MissionId", "GroupId", "MissionStatus", "OpenWorkItems")
    } == {
        "MissionId": MISSION,
        "GroupId": GROUP,
        "MissionStatus": "completed",
        "OpenWorkItems": 0,
    }


def test_the_mission_shows_its_summary_and_current_details(view: UiView) -> None:
    assert payload(view.describe["executionConfig"]["userMetadata"]["summary"]) == TITLE
    started = view.history[0]
    assert started["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    assert payload(started["userMetadata"]["summary"]) == TITLE
    # set_current_details, as the UI's "Current Details" reads it
    assert view.metadata["currentDetails"] == "**completed** — verified: 2"
    assert view.metadata["definition"]["type"] == "Mission"
    assert {q["name"] for q in view.metadata["definition"]["queryDefinitions"]} >= {"status"}
    # a POST without the CSRF header is refused by the UI server, not by Temporal
    assert view.metadata_without_csrf.status_code == 400
    assert "csrf" in view.metadata_without_csrf.text


def test_mission_url_is_a_page_of_the_ui_for_that_workflow(view: UiView) -> None:
    assert view.printed_link == view.mission_url  # what `mission start` prints
    assert view.page.status_code == 200
    assert view.page.headers["content-type"].startswith("text/html")
    # The UI serves its single-page app for any path, so a 200 alone proves little: the page's
    # own API path must name our workflow, and an unknown workflow's must not exist.
    execution = view.page_api["workflowExecutionInfo"]["execution"]
    assert execution["workflowId"] == mission_workflow_id(MISSION)
    assert view.page_api["workflowExecutionInfo"]["type"]["name"] == "Mission"
    assert view.unknown_page_api.status_code == 404


def _scheduled(view: UiView) -> list[tuple[str, str, str]]:
    """Every activity of the history as the UI lists it: (type, summary, its WorkItem) for the
    regular activities (the agents' ``execute_work_item``, the coordinator's reads of the log and
    large batches; their input shown), and (type, summary, "") for the coordinator's other
    steps — local activities, shown as markers with their summary (issue 26)."""
    found = []
    for event in view.history:
        summary = payload(event["userMetadata"]["summary"]) if "userMetadata" in event else ""
        if event["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
            attrs = event["activityTaskScheduledEventAttributes"]
            kind = attrs["activityType"]["name"]
            arg = payload(attrs["input"]["payloads"][0])
            # the agents' offers; and the coordinator's reads of the log (work_item_events) and
            # batches of more than LOCAL_STEP_MAX_ITEMS WorkItems, which are regular too
            found.append((kind, summary, arg.get("work_item_id", "")))
        elif event["eventType"] == "EVENT_TYPE_MARKER_RECORDED":
            marker = event["markerRecordedEventAttributes"]
            if marker["markerName"] != "core_local_activity":  # e.g. a workflow.patched() marker
                continue
            details = marker["details"]
            kind = payload(details["data"]["payloads"][0])["activity_type"]
            found.append((kind, summary, ""))
    return found


def test_each_work_item_activity_names_its_work_item(view: UiView) -> None:
    scheduled = _scheduled(view)
    per_item = [(k, s, i) for k, s, i in scheduled if k == "execute_work_item"]
    assert {i for _, _, i in per_item} == set(ITEMS)
    for kind, summary, item in per_item:
        assert item in summary, (kind, summary)  # "offer a to ada"
    reads = [s for k, s, _ in scheduled if k == "work_item_events"]
    assert all(any(w in s for w in ITEMS) for s in reads), reads
    reviewed = {w for k, s, _ in scheduled if k == "review_submissions" for w in ITEMS if w in s}
    assert reviewed == set(ITEMS)


def test_each_batch_activity_names_its_work_items(view: UiView) -> None:
    steps = [(k, s) for k, s, _ in _scheduled(view) if k != "execute_work_item"]
    kinds = {k for k, _ in steps}
    assert {"submit_commands", "select_candidates", "review_submissions"} <= kinds, kinds
    for kind, summary in steps:
        # "rank agents for and offer ui-1:first", "review ui-1:first, offer ui-1:second",
        # "3 command(s) to the Authority for ui-1:first, ui-1:second": what it carries
        if kind in ("select_candidates", "review_submissions"):
            assert any(w in summary for w in ITEMS), (kind, summary)
        assert summary, kind
