"""``missionweave worker``: run as a user runs it (a real process); bad input is one line."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

from missionweave.protocol import SigningKey

from . import serving
from .serving import LiveServer
from .world import World

live = serving.live
world = serving.world

EXE = str(Path(sys.executable).with_name("missionweave"))
ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _files(tmp: Path, key: SigningKey, card: str) -> tuple[Path, Path]:
    key_path, card_path = tmp / "agent.pem", tmp / "agent.yaml"
    key.to_file(key_path)
    card_path.write_text(card, encoding="utf-8")
    return key_path, card_path


CARD = "agent_id: worker-0\ncapabilities: [dist.verify@1.2]\nmax_concurrency: 2\n"


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, "worker", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, check=False)  # fmt: skip


def test_worker_bad_input_is_one_line(tmp_path: Path) -> None:
    key_path, card_path = _files(tmp_path, SigningKey.generate(), CARD)
    base = ["--key", str(key_path), "--group", "g1", "--state-dir", str(tmp_path / "s")]
    cases = [
        (["--card", str(tmp_path / "missing.yaml"), "--handlers", "tests.worker_handlers"],
         "no card file at"),
        (["--card", str(card_path), "--handlers", "tests.no_such_module"],
         "cannot import handler module 'tests.no_such_module'"),
        (["--card", str(card_path), "--handlers", "tests.worker_handlers",
          "--authority-url", f"http://127.0.0.1:{_free_port()}"], "cannot reach the Authority"),
    ]  # fmt: skip
    bad_card = tmp_path / "bad.yaml"
    bad_card.write_text("agent_id: worker-0\nmax_concurrency: 0\n", encoding="utf-8")
    cases.append((["--card", str(bad_card), "--handlers", "tests.worker_handlers"],
                  "invalid card: max_concurrency"))  # fmt: skip
    for args, message in cases:
        r = _worker(*base, *args)
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    (tmp_path / "not.pem").write_text("nope", encoding="utf-8")
    r = _worker("--key", str(tmp_path / "not.pem"), "--card", str(card_path), "--handlers",
                "tests.worker_handlers", "--group", "g1")  # fmt: skip
    assert r.returncode == 2 and "not an unencrypted PEM" in r.stderr


async def test_worker_unreachable_temporal_is_one_line(
    world: World, live: LiveServer, tmp_path: Path
) -> None:
    key_path, card_path = _files(tmp_path, world.workers[0].key, CARD)
    proc = await asyncio.create_subprocess_exec(
        EXE, "worker", "--card", str(card_path), "--key", str(key_path), "--handlers",
        "tests.worker_handlers", "--group", "g1", "--authority-url", live.url,
        "--temporal-address", f"127.0.0.1:{_free_port()}", "--state-dir", str(tmp_path / "s"),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 2
    assert "error: cannot reach Temporal at 127.0.0.1:" in err.decode()
    assert len(err.decode().strip().splitlines()) == 1


def test_worker_help_names_its_options() -> None:
    r = subprocess.run([EXE, "worker", "--help"], capture_output=True, text=True, timeout=60,
                       check=False)  # fmt: skip
    assert r.returncode == 0
    for option in ("--card", "--key", "--handlers", "--group", "--authority-url",
                   "--temporal-address", "--namespace", "--state-dir"):  # fmt: skip
        assert option in r.stdout
