"""The coordinator's ``submit_commands`` step takes the Authority's bounds for "not now", never
"no" (issue 37, item 5): a batch with a ``rate_limited`` verdict raises ``AuthorityUnavailable``
(the step is retried, the Commands it got in answered again by their ids)."""

from __future__ import annotations

import pytest

from missionweave.activities import CoordinatorActivities
from missionweave.authority.client import AuthorityClient, AuthorityUnavailable
from missionweave.authority.core import CommandLimits
from missionweave.authority.core._rates import COORDINATOR_FACTOR, Meter
from missionweave.protocol.temporal_contract import BatchEntry, SubmitCommandsInput
from tests.support.serving import served
from tests.support.world import World


async def test_a_rate_limited_batch_is_retried_not_judged(world: World) -> None:
    """The coordinator's budget in Mission m1 is 10 Commands: a batch of 11 ``work.authorize``
    raises ``AuthorityUnavailable`` naming ``rate_limited``; the first ten are in the log, and
    once the budget is there again the same batch is answered in full, the ten as repeats."""
    w = world
    w.authority.meter = Meter(CommandLimits(commands_per_s=1, burst=1), clock=lambda: 0.0)
    cmds = [
        w.coordinator.command(
            "work.authorize", w.group, w.authorization(f"a{i}"), issued_at_ms=w.clock.now
        )
        for i in range(COORDINATOR_FACTOR + 1)
    ]
    batch = SubmitCommandsInput(group_id=w.group, entries=[BatchEntry(command=c) for c in cmds])
    async with served(w) as url, AuthorityClient(url) as client:
        acts = CoordinatorActivities(client, w.coordinator)
        with pytest.raises(AuthorityUnavailable, match="rate_limited"):
            await acts.submit_commands(batch)
        assert w.authority.work_item(w.group, f"a{COORDINATOR_FACTOR - 1}") is not None
        assert w.authority.work_item(w.group, f"a{COORDINATOR_FACTOR}") is None
        w.authority.meter = Meter(CommandLimits(commands_per_s=1, burst=1), clock=lambda: 0.0)
        result = await acts.submit_commands(batch)
    assert [v.status for v in result.verdicts] == ["accepted"] * (COORDINATOR_FACTOR + 1)
