from pathlib import Path

from missionweave.authority import verify_log

from .support.world import make_world


def test_happy_path(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.authorize("b", deps=["a"])
    w.run_to_verified("a", w.workers[0])
    w.run_to_verified("b", w.workers[1])
    assert w.authority.work_item(w.group, "b")["state"] == "verified"
    rep = verify_log(w.authority.store, w.group, w.authority.public_key)
    assert rep.events == w.authority.head(w.group)[0]
