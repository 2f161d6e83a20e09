"""The coordinator's ``select_candidates`` activity against a real Authority on loopback HTTP:
ranking spreads a batch over the free slots Presence reports, and the offers it makes record
their selection basis (MW-10.3-b, MW-10.3-f); a retried batch whose ranking changed meanwhile
is answered with the offers the Authority first recorded, never with a second offer.

The activity is a plain coroutine method: these tests call it directly, without a Worker.
"""

from __future__ import annotations

from pathlib import Path

from missionweave.activities import CoordinatorActivities
from missionweave.activities._ranking import ASSUMED_ITEM_MS
from missionweave.protocol.temporal_contract import (
    OfferSlot,
    SelectCandidatesBatch,
    SelectCandidatesBatchResult,
    SelectCandidatesInput,
)
from tests.support.mission_harness import contract
from tests.support.temporal_env import AuthorityStack, authority_stack

CAP = "bench.step@1.0"


async def _setup(stack: AuthorityStack, items: list[str]) -> None:
    await stack.ok(stack.coordinator, "mission.create", {"mission_id": "m1", "title": "t"})
    for wid in items:
        await stack.ok(
            stack.coordinator,
            "work.authorize",
            {
                "work_item_id": wid,
                "mission_id": "m1",
                "contract": contract([CAP]).wire(),
                "dependencies": [],
            },
        )


def _batch(items: list[str], now: int) -> SelectCandidatesBatch:
    return SelectCandidatesBatch(
        requests=[
            SelectCandidatesInput(
                group_id="g1",
                work_item_id=wid,
                required_capabilities=[CAP],
                limit=1,
                offer=OfferSlot(
                    command_id=f"mission-m1/c{n}", issued_at_ms=now, expires_at_ms=now + 30_000
                ),
            )
            for n, wid in enumerate(items)
        ]
    )


def _offered(res: SelectCandidatesBatchResult) -> list[list[str]]:
    out = []
    for r in res.results:
        assert r.verdict is not None and r.verdict.accepted, r.verdict
        (ev,) = [e for e in r.verdict.events if e.type == "work.offered"]
        out.append(list(ev.body["candidates"]))
    return out


async def test_a_batch_spreads_offers_over_free_slots__MW_10_3_b__MW_10_3_f(
    tmp_path: Path,
) -> None:
    async with authority_stack(tmp_path) as stack:
        ada = await stack.add_agent("ada", capabilities=[CAP], max_concurrency=2)
        bob = await stack.add_agent("bob", capabilities=[CAP], max_concurrency=2)
        items = ["w1", "w2", "w3", "w4"]
        await _setup(stack, items)
        await stack.client.put_presence(ada, "g1", 2, 0)
        await stack.client.put_presence(bob, "g1", 1, 0)
        acts = CoordinatorActivities(stack.client, stack.coordinator)
        res = await acts.select_candidates(_batch(items, stack.clock()))
        # ada's two free slots, then bob's one; then nobody is free: the best-ranked again
        assert _offered(res) == [["ada"], ["ada"], ["bob"], ["ada"]]
        assert [r.candidates[0].agent_id for r in res.results] == ["ada", "ada", "bob", "ada"]
        # the log records each offer with its structured basis (MW-10.3-f)
        offers = [e for e in stack.authority.events("g1") if e.type == "work.offered"]
        assert [e.work_item_id for e in offers] == items
        basis = offers[2].body["selection_basis"]["bob"]
        assert basis["rank"] == 1 and "presence-first" in basis["policy_rules"]


async def test_a_retried_batch_gets_the_first_offers_back(tmp_path: Path) -> None:
    async with authority_stack(tmp_path) as stack:
        ada = await stack.add_agent("ada", capabilities=[CAP], max_concurrency=2)
        bob = await stack.add_agent("bob", capabilities=[CAP], max_concurrency=2)
        await _setup(stack, ["w1"])
        await stack.client.put_presence(ada, "g1", 2, 0)
        await stack.client.put_presence(bob, "g1", 0, 0)
        acts = CoordinatorActivities(stack.client, stack.coordinator)
        batch = _batch(["w1"], stack.clock())
        first = await acts.select_candidates(batch)
        assert _offered(first) == [["ada"]]
        # Presence changed before the retry: the ranking now prefers bob
        await stack.client.put_presence(ada, "g1", 0, 0)
        await stack.client.put_presence(bob, "g1", 2, 0)
        again = await acts.select_candidates(batch)
        assert again.results[0].candidates[0].agent_id == "bob"
        assert _offered(again) == [["ada"]]  # the Authority's answer: the first offer
        offers = [e for e in stack.authority.events("g1") if e.type == "work.offered"]
        assert len(offers) == 1


async def test_no_offer_to_an_agent_without_room__MW_10_3_b(tmp_path: Path) -> None:
    """An agent with no free slot takes offers into its queue up to as many as it has slots;
    past that it would only decline them, so it is not offered the work: the result says
    ``saturated`` (offer again later), and nothing is written."""
    async with authority_stack(tmp_path) as stack:
        ada = await stack.add_agent("ada", capabilities=[CAP], max_concurrency=1)
        items = ["w1", "w2"]
        await _setup(stack, items)
        await stack.client.put_presence(ada, "g1", 0, 0)  # busy, nothing queued: room 1
        acts = CoordinatorActivities(stack.client, stack.coordinator)
        res = await acts.select_candidates(_batch(items, stack.clock()))
        first, second = res.results
        assert [c.agent_id for c in first.candidates] == ["ada"] and not first.saturated
        # queued, not free: one round of its slot (MW-10.3-f: estimated, never left out)
        assert first.candidates[0].basis.availability_estimate_ms == ASSUMED_ITEM_MS
        assert second.candidates == [] and second.saturated and second.verdict is None
        offers = [e for e in stack.authority.events("g1") if e.type == "work.offered"]
        assert [e.work_item_id for e in offers] == ["w1"]
        # no capable agent at all is not "saturated"
        other = (
            _batch(["w2"], stack.clock())
            .requests[0]
            .model_copy(update={"required_capabilities": ["nobody.has@1.0"]})
        )
        none = await acts.select_candidates(SelectCandidatesBatch(requests=[other]))
        assert none.results[0].candidates == [] and not none.results[0].saturated


async def test_the_recorded_basis_is_complete_for_a_busy_agent__MW_10_3_f(tmp_path: Path) -> None:
    """Every fact of MW-10.3-f is recorded, none assumed: the availability of an agent with no
    free slot is an estimate (not absent), and the Authority accepts the basis as complete."""
    async with authority_stack(tmp_path) as stack:
        ada = await stack.add_agent("ada", capabilities=[CAP], max_concurrency=2)
        await _setup(stack, ["w1"])
        await stack.client.put_presence(ada, "g1", 0, 1)  # busy: no free slot, one waiting
        acts = CoordinatorActivities(stack.client, stack.coordinator)
        res = await acts.select_candidates(_batch(["w1"], stack.clock()))
        assert _offered(res) == [["ada"]]
        (offer,) = [e for e in stack.authority.events("g1") if e.type == "work.offered"]
        basis = offer.body["selection_basis"]["ada"]
        assert basis["availability_estimate_ms"] == ASSUMED_ITEM_MS  # one round of its 2 slots
        assert basis["authorization_eligible"] is True
        assert basis["capability_matches"] == [CAP]
        assert basis["expected_cost_minor_units"] is not None
        assert basis["reliability"] == {f"{CAP}:ok": 0, f"{CAP}:fail": 0}
        assert offer.body["authority_checks"]
