"""How ``missionweave mission status|graph`` show a Mission (pure: no server)."""

from __future__ import annotations

from rich.console import Console

from missionweave.protocol import WorkItemState
from missionweave.protocol.temporal_contract import MissionResult, MissionStatus
from missionweave.views import STATE_FILL, render_table, to_mermaid


def _status() -> MissionStatus:
    return MissionStatus.model_validate(
        {
            "mission_id": "m",
            "group_id": "g",
            "status": "running",
            "counts": {"verified": 1, "active": 1, "open": 1},
            "event_range": [3, 40],
            "items": [
                {"work_item_id": "inventory", "state": "verified", "owner": "ada"},
                {
                    "work_item_id": 'verify:"x"<y>',
                    "state": "active",
                    "owner": "bob",
                    "ownership_epoch": 2,
                    "lease_id": "lease_0123456789abcdef",
                    "attempts": 1,
                    "dependencies": ["inventory"],
                },
                {
                    "work_item_id": "sbom",
                    "state": "open",
                    "dependencies": ["inventory", 'verify:"x"<y>', "not-in-this-mission"],
                    "detail": "waiting for dependencies",
                },
            ],
        }
    )


def test_mermaid_has_a_node_per_item_edges_and_a_class_per_state() -> None:
    text = to_mermaid(_status())
    lines = text.splitlines()
    assert lines[:2] == ["%% Mission m (group g): running", "flowchart LR"]
    assert '  w0["inventory<br/>verified · ada"]' in lines
    assert '  w1["verify:#quot;x#quot;#lt;y#gt;<br/>active · bob"]' in lines
    assert '  w2["sbom<br/>open"]' in lines
    assert [ln for ln in lines if "-->" in ln] == ["  w0 --> w1", "  w0 --> w2", "  w1 --> w2"]
    assert {"  class w1 active", "  class w2 open", "  class w0 verified"} <= set(lines)
    for state in ("active", "open", "verified"):
        assert f"  classDef {state} {STATE_FILL[state]}" in lines


def test_every_state_has_a_colour() -> None:
    assert set(STATE_FILL) == {s.value for s in WorkItemState}


def test_table_shows_every_column() -> None:
    console = Console(width=160, record=True)
    console.print(render_table(_status()))
    text = console.export_text()
    for word in (
        "Mission m · group g · running",
        "inventory",
        "verified",
        "ada",
        "bob",
        "01234567…",
        "waiting for dependencies",
        "1 active, 1 open, 1 verified",
        "events 3–40",
    ):
        assert word in text, word


def test_a_closed_missions_graph_keeps_its_edges__MW_10_4_a() -> None:
    """With no coordinator to answer the ``status`` query, ``mission graph`` draws a closed
    Mission from its result: every dependency, edges added at run time included."""
    from missionweave.cli._mission import _result_status

    result = MissionResult.model_validate(
        {
            "mission_id": "m",
            "group_id": "g",
            "status": "completed",
            "event_range": [3, 9],
            "items": [
                {"work_item_id": "a", "state": "verified"},
                {"work_item_id": "b", "state": "verified", "dependencies": ["a"]},
                {
                    "work_item_id": "c",
                    "state": "verified",
                    "dependencies": ["a", "b"],
                    "detail": "submitted",
                },
            ],
        }
    )
    status = _result_status(result)
    assert [i.dependencies for i in status.items] == [[], ["a"], ["a", "b"]]
    assert status.items[2].detail == "submitted"
    edges = [ln for ln in to_mermaid(status).splitlines() if "-->" in ln]
    assert edges == ["  w0 --> w1", "  w0 --> w2", "  w1 --> w2"]
