"""``missionweave mission start`` with inputs a Mission could not carry inline (issue 24,
finding 4): over 64 KiB they go to the artifact store by reference; past the total bound the
spec is refused before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

from missionweave.artifacts import FilesystemStore
from missionweave.cli._inputs import by_reference
from missionweave.protocol import (
    INPUT_ARTIFACT_KEY,
    MAX_CARRIED_INPUT_BYTES,
    MAX_INLINE_INPUT_BYTES,
    input_json,
)
from missionweave.protocol.temporal_contract import MissionSpec
from tests.support.cli_processes import mw
from tests.support.contracts import contract


def _spec(inputs: list[dict[str, object]]) -> MissionSpec:
    c = contract(["demo.step@1.0"]).wire()
    return MissionSpec.model_validate(
        {
            "group_id": "g1",
            "mission_id": "big",
            "items": [
                {"work_item_id": f"w{i}", "contract": c, "input": inp}
                for i, inp in enumerate(inputs)
            ],
        }
    )


def test_a_large_input_is_stored_and_passed_by_reference(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "artifacts")
    big = {"blob": "x" * (MAX_INLINE_INPUT_BYTES + 1)}
    spec = by_reference(_spec([{"n": 1}, big]), lambda: store)
    small, ref = spec.items
    assert small.input == {"n": 1}
    assert set(ref.input) == {INPUT_ARTIFACT_KEY}
    assert store.get(ref.input[INPUT_ARTIFACT_KEY]) == input_json(big)

    def no_store() -> FilesystemStore:
        raise AssertionError("no store is opened when every input fits")

    assert by_reference(_spec([{"n": 1}]), no_store).items[0].input == {"n": 1}


def test_start_refuses_inline_inputs_past_the_total_in_one_line(tmp_path: Path) -> None:
    each = MAX_INLINE_INPUT_BYTES - 100
    n = MAX_CARRIED_INPUT_BYTES // each + 1
    path = tmp_path / "mission.json"
    path.write_text(_spec([{"b": "y" * each}] * n).model_dump_json())
    # refused before Temporal is asked (nothing listens on port 9)
    r = mw("mission", "start", str(path), "--temporal-address", "127.0.0.1:9")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith("error: invalid MissionSpec: mission_inputs_too_large:")
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    # a large input with no store to put it in: one line too
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("a file, not a directory")
    path.write_text(json.dumps(_spec([{"b": "z" * (2 * MAX_INLINE_INPUT_BYTES)}]).model_dump()))
    r = mw(
        "mission",
        "start",
        str(path),
        "--store",
        str(not_a_dir),
        "--temporal-address",
        "127.0.0.1:9",
    )
    assert r.returncode == 2 and r.stderr == f"error: {not_a_dir} is not a directory\n", r.stderr
