"""The runnable examples work end to end, as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_authority_walkthrough_runs_and_its_log_verifies(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "authority_walkthrough.py"),
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok   group walkthrough:" in r.stdout
    assert "work.late_result_recorded" in r.stdout  # the frozen worker's result, audit only
    assert "stale_lease (as it should be)" in r.stdout
    assert (tmp_path / "authority.db").is_file()
