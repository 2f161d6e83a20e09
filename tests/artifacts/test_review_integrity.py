"""Review step 1 (MW-13.2-b) on its own: a submitted Artifact counts only when its bytes verify
(MW-13.1-d) and a manifest of it names this Group, Mission and WorkItem and is signed by its
producer's key; a manifest missing from the index is found in the Group log. The Authority is a
small stand-in answering the three reads the step makes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from missionweave.activities._review import SubmissionReview
from missionweave.artifacts import FilesystemStore, ManifestIndex
from missionweave.authority.client import AgentInfo
from missionweave.protocol import Actor, AgentCard, SigningKey, sign_manifest
from missionweave.protocol.temporal_contract import ReviewInput
from tests.support.artifact_servers import manifest, signed
from tests.support.mission_harness import contract


class FakeAuthority:
    """``agents`` (the producers' cards), ``head`` and ``events`` (a Group log of
    ``artifact.published`` Events)."""

    def __init__(self, agents: list[Actor], published: list[dict[str, Any]]) -> None:
        self._agents = agents
        self._events = [
            SimpleNamespace(seq=i + 1, type="artifact.published", body=b)
            for i, b in enumerate(published)
        ]

    async def agents(self, group_id: str) -> list[AgentInfo]:
        return [
            AgentInfo(
                agent_id=a.agent_id,
                roles=["worker"],
                membership_epoch=1,
                session_epoch=1,
                card=AgentCard(agent_id=a.agent_id, public_key=a.public_key),
            )
            for a in self._agents
        ]

    async def head(self, group_id: str) -> tuple[int, str]:
        return len(self._events), ""

    async def events(self, group_id: str, after: int, limit: int) -> list[Any]:
        return self._events[after : after + limit]


def review(store: FilesystemStore, authority: FakeAuthority) -> SubmissionReview:
    """The review over the store whose Group ``g1`` namespace is ``store``."""
    return SubmissionReview(
        authority,
        "coordinator",
        artifact_store=FilesystemStore(store.root.parent.parent),  # type: ignore[arg-type]
        checks={},
        schemas={},
    )


def submission(*hashes: str) -> ReviewInput:
    return ReviewInput(
        group_id="g1",
        mission_id="m1",
        work_item_id="a",
        contract=contract(deliverables=[{"name": "report"}]),
        outputs={"report": {"rows": 1}},
        artifacts=list(hashes),
    )


async def test_manifest_must_name_this_item_and_be_signed_by_its_producer__MW_13_2_b(
    tmp_path: Path,
) -> None:
    store = FilesystemStore(tmp_path / "artifacts").for_group("g1")
    ada = Actor.generate("ada")
    index = ManifestIndex(store)
    good = store.put(b'{"rows": 1}', "application/json").hash
    other_item = store.put(b'{"rows": 2}', "application/json").hash
    forged = store.put(b'{"rows": 3}', "application/json").hash
    index.add(signed(ada, good))
    index.add(signed(ada, other_item, work_item_id="b"))
    # claims ada produced it, signed with another key (verifies under the key it carries)
    index.add(sign_manifest(manifest(forged, producer="ada"), SigningKey.generate()))
    step = await review(store, FakeAuthority([ada], [])).integrity(
        submission(good, other_item, forged)
    )
    assert not step.passed
    assert {e.subject: e.result for e in step.evidence} == {
        good: "pass",
        other_item: "fail",
        forged: "fail",
    }
    assert f"artifact {other_item[:12]}: no manifest names Mission m1 / WorkItem a" in step.detail
    assert f"artifact {forged[:12]}: manifest not signed by its producer ada" in step.detail
    assert good[:12] not in step.detail

    ok = await review(store, FakeAuthority([ada], [])).integrity(submission(good))
    assert ok.passed and ok.detail == "artifacts verified; deliverables present and valid"


async def test_manifest_missing_from_the_index_is_read_from_the_group_log__MW_13_2_b(
    tmp_path: Path,
) -> None:
    store = FilesystemStore(tmp_path / "artifacts").for_group("g1")
    ada = Actor.generate("ada")
    h = store.put(b'{"rows": 1}', "application/json").hash
    m = signed(ada, h)
    authority = FakeAuthority([ada], [{"artifact_hash": h, "manifest": m.wire()}])
    step = await review(store, authority).integrity(submission(h))
    assert step.passed, step.detail
    assert ManifestIndex(store).get(h) == [m]  # the index is repaired from the log
