"""The coordinator's process (missionweave.coordinator): its public surface, and that its
Worker registers every step of CoordinatorActivities (a new step needs no edit of the process)."""

from __future__ import annotations

import inspect

import missionweave.coordinator as coordinator
from missionweave.activities import CoordinatorActivities
from missionweave.authority.client import AuthorityClient
from missionweave.protocol import Actor, SigningKey
from tests.support.surface import assert_surface


def test_public_surface() -> None:
    assert_surface(
        coordinator, {"MissionCounts", "count_missions", "coordinator_worker", "run_coordinator"}
    )


def _steps() -> set[str]:
    """Every method of CoordinatorActivities that Temporal knows as an activity."""
    return {
        name
        for name, fn in inspect.getmembers(CoordinatorActivities, inspect.isfunction)
        if hasattr(fn, "__temporal_activity_definition")
    }


async def test_the_worker_registers_every_coordinator_step() -> None:
    async with AuthorityClient("http://127.0.0.1:9") as authority:  # never called
        acts = CoordinatorActivities(authority, Actor("coordinator", SigningKey.generate()))
        registered = {fn.__name__ for fn in acts.activities()}
    assert registered == _steps()
    assert {"submit_commands", "select_candidates", "review_submissions"} <= registered
