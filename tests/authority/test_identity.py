"""One identity per look at creation (issue 38 item 5; ``authority/core/_identity.py``): a new
id not in NFKC is refused, never normalized; its UTS #39 skeleton may not be one registered
first in its scope — Group and agent ids across the Authority, Mission ids within their Group,
WorkItem ids within their Mission; a refusal never names another Group's id."""

from __future__ import annotations

from typing import Any

import pytest

from missionweave.protocol import Actor
from tests.support.world import World, another_group

#: The skeleton index is Store SQL (a table, an upsert that ignores a conflict): both backends.
pytestmark = pytest.mark.both_backends

PAYPAL_CYRILLIC = "\u0440\u0430\u0443\u0440\u0430\u04cf"  # раураӏ, with U+04CF palochka
PAYPAL_FULLWIDTH = "\uff50\uff41\uff59\uff50\uff41\uff4c"  # ｐａｙｐａｌ


def _member(w: World, agent_id: str, code: str | None) -> Any:
    """``member.add`` of a fresh agent named ``agent_id``, judged ``code``."""
    body = {"agent_id": agent_id, "public_key": Actor.generate(agent_id).public_key,
            "roles": ["worker"]}  # fmt: skip
    return w.judged(code, w.coordinator, "member.add", body)


def _group(w: World, group_id: str) -> Any:
    c = w.coordinator
    body = {"public_key": c.public_key, "roles": ["owner"]}
    return w.authority.submit(c.command("group.create", group_id, body, issued_at_ms=w.clock.now))


def test_palochka_paypal_is_refused_after_paypal__MW_11_3_b(world: World) -> None:
    """``confusables.txt`` maps U+04CF to ``i``; the supplement draws it as ``l``, as fonts do."""
    _member(world, "paypal", None)
    r = _member(world, PAYPAL_CYRILLIC, "confusable_id")
    assert "confusable_with" not in r.rejection.detail  # an agent id is the Authority's


def test_fullwidth_paypal_is_refused_and_blocks_nobody__MW_11_3_b(world: World) -> None:
    r = _member(world, PAYPAL_FULLWIDTH, "unnormalized_id")
    assert r.rejection.detail == {"field": "agent_id"} and "U+FF50" in r.rejection.reason
    rg = _group(world, PAYPAL_FULLWIDTH)
    assert rg.rejection is not None and rg.rejection.code == "unnormalized_id"
    _member(world, "paypal", None)  # the refused spelling registered nothing
    assert _group(world, "paypal").accepted


def test_a_group_or_agent_look_alike_is_refused_without_naming_its_twin__MW_11_3_b(
    world: World,
) -> None:
    """``g1`` and ``worker-1`` exist (in Group g1); Group ``gl`` and, in another Group, agent
    ``worker-l`` are refused, and neither refusal says what they look like."""
    r = _group(world, "gl")
    assert r.rejection is not None and r.rejection.code == "confusable_id"
    assert "g1" not in r.rejection.reason and "confusable_with" not in r.rejection.detail
    other = another_group(world, "g2")
    r = _member(other, "worker-l", "confusable_id")
    assert "worker-1" not in r.rejection.reason and "confusable_with" not in r.rejection.detail


def _mission(w: World, mission_id: str, code: str | None) -> Any:
    return w.judged(code, w.coordinator, "mission.create", {"mission_id": mission_id, "title": "t"})


def test_a_mission_id_like_one_of_its_group_is_refused(world: World) -> None:
    """A Cyrillic ``а`` (U+0430) or a fullwidth letter in a Mission id; another Group may use
    the look-alike (Mission ids are a Group's own)."""
    _mission(world, "alpha", None)
    r = _mission(world, "\u0430lpha", "confusable_id")
    assert r.rejection.detail == {"field": "mission_id", "confusable_with": "alpha"}
    _mission(world, "\uff41lpha", "unnormalized_id")
    other = another_group(world, "g2", mission=None)
    _mission(other, "\u0430lpha", None)


def _item(w: World, wid: str, code: str | None, mission: str | None = None) -> Any:
    body = w.authorization(wid, mission=mission)
    return w.judged(code, w.coordinator, "work.authorize", body)


@pytest.mark.parametrize("kind", ["work.authorize", "work.propose"])
def test_a_work_item_id_like_one_of_its_mission_is_refused(world: World, kind: str) -> None:
    """``a1`` in Mission m1: ``а1`` (Cyrillic) and ``al`` are refused, naming ``a1``; fullwidth
    ``ａ1`` is refused as not NFKC; in Mission m2 ``al`` is another Mission's business."""
    _item(world, "a1", None)
    for twin in ("\u04301", "al"):
        body = world.authorization(twin)
        r = world.judged("confusable_id", world.coordinator, kind, body)
        assert r.rejection.detail == {"field": "work_item_id", "confusable_with": "a1"}
    world.judged("unnormalized_id", world.coordinator, kind, world.authorization("\uff411"))
    _mission(world, "m2", None)
    _item(world, "al", None, mission="m2")


def test_ids_created_before_the_index_are_indexed_on_first_use(world: World) -> None:
    """A database from before the check (no skeletons kept) still refuses a look-alike of its
    older ids, and those ids still act: the check runs at creation only."""
    _item(world, "a1", None)
    _mission(world, "alpha", None)
    store = world.authority.store
    store.begin()
    store.conn.execute("DELETE FROM id_skeletons")  # type: ignore[attr-defined]  # as before
    store.commit()
    _item(world, "\u04301", "confusable_id")
    _mission(world, "\u0430lpha", "confusable_id")
    _member(world, "worker-l", "confusable_id")
    world.offer("a1", world.workers[0])  # the older id acts
