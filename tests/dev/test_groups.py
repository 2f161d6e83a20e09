"""Group set-up as ``dev up``, ``demo`` and ``group add`` do it (``missionweave.dev``): a
member is added once, gains missing roles, and is never silently re-keyed."""

from __future__ import annotations

from pathlib import Path

import pytest

from missionweave.dev import GroupSetupError, ensure_member
from missionweave.protocol import SigningKey
from tests.support.temporal_env import authority_stack


async def test_a_member_with_another_key_is_an_error_not_present(tmp_path: Path) -> None:
    async with authority_stack(tmp_path) as stack:
        key = SigningKey.generate().public_key
        owner, client = stack.coordinator, stack.client
        assert await ensure_member(client, owner, "g1", "ada", key) == "added"
        assert await ensure_member(client, owner, "g1", "ada", key) == "present"
        assert await ensure_member(client, owner, "g1", "ada", key, ("worker", "reviewer")) == (
            "updated"
        )
        other = SigningKey.generate().public_key
        with pytest.raises(GroupSetupError, match="another public key"):
            await ensure_member(client, owner, "g1", "ada", other)
        (ada,) = [a for a in await client.agents("g1") if a.agent_id == "ada"]
        assert ada.public_key == key and sorted(ada.roles) == ["reviewer", "worker"]
