"""The ``missionweave`` CLI, run as a user runs it: a real process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from missionweave.protocol import SigningKey
from tests.support.cli_processes import authority_serve, mw
from tests.support.world import make_world


def test_help_lists_commands() -> None:
    r = mw("--help")
    assert r.returncode == 0
    for word in ("authority", "events", "keys"):
        assert word in r.stdout
    r = mw("events", "verify", "--help")
    assert r.returncode == 0 and "--db" in r.stdout and "--public-key" in r.stdout


def test_command_help_reads_as_prose() -> None:
    """typer prints a command's description as written, paragraph by paragraph: no RST
    markup, and no line broken mid-sentence (on a terminal wide enough not to wrap)."""
    for command in (["coordinator"], ["approve"], ["artifacts", "get"], ["artifacts", "lineage"]):
        r = mw(*command, "--help", env={"COLUMNS": "400"})
        assert r.returncode == 0, r.stderr
        head = r.stdout.split("╭", 1)[0].splitlines()
        usage = next(i for i, line in enumerate(head) if "Usage:" in line)
        text = [line.strip() for line in head[usage + 1 :] if line.strip()]
        assert text, r.stdout
        for line in text:
            assert "``" not in line and line.endswith("."), (command, line)


def test_data_dir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("")
    r = mw("dev", "up", "--data-dir", str(a_file), "--headless")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: --data-dir {a_file} is not a directory"]


def test_events_verify_ok_then_names_first_bad_sequence(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    w.run_to_verified("a", w.workers[0])
    w.authority.close()
    r = mw("events", "verify", "--db", str(tmp_path / "a.db"), "--group", "g1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok   group g1:")
    conn = sqlite3.connect(tmp_path / "a.db")
    seq, data = conn.execute("SELECT seq, data FROM events WHERE type='work.offered'").fetchone()
    conn.execute(
        "UPDATE events SET data=? WHERE group_id='g1' AND seq=?",
        (data.replace('"candidates":["worker-0"]', '"candidates":["worker-1"]'), seq),
    )
    conn.commit()
    conn.close()
    r = mw("events", "verify", "--db", str(tmp_path / "a.db"))
    assert r.returncode == 1
    assert f"sequence {seq}:" in r.stdout and "FAIL group g1" in r.stdout


def test_bad_input_is_one_line_without_traceback(tmp_path: Path) -> None:
    key = str(tmp_path / "member.pem")
    assert mw("keys", "generate", key).returncode == 0
    add = ("group", "add", "--key", key, "--group", "g1", "--agent-id", "ada", "--agent-key")
    link, target = tmp_path / "link.pem", tmp_path / "elsewhere.pem"
    link.symlink_to(target)  # dangling: a new key must not be written through it
    for args, says in (
        (("events", "verify", "--db", str(tmp_path / "missing.db")), "no Authority database"),
        (
            ("events", "tail", "--group", "g1", "--url", "http://127.0.0.1:9", "--key", key),
            "error: cannot reach the Authority at http://127.0.0.1:9",
        ),
        (("keys", "public", str(tmp_path / "nokey.pem")), "no key file"),
        (("events", "tail", "--group", "g1", "--url", "http://127.0.0.1:9"), "reads are signed"),
        ((*add, str(tmp_path / "ada.pem")), "no key file at " + str(tmp_path / "ada.pem")),
        ((*add, str(link), "--create-key"), f"{link}: not a key file"),
    ):
        r = mw(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert says in r.stderr, r.stderr
    assert "(--create-key generates one)" in mw(*add, str(tmp_path / "ada.pem")).stderr
    assert not target.exists()


def test_authority_serve_and_events_tail_over_loopback(tmp_path: Path) -> None:
    w = make_world(tmp_path / "a.db")
    w.authorize("a")
    key_path = tmp_path / "authority.pem"
    w.authority.key.to_file(key_path)
    head = w.authority.head("g1")[0]
    w.authority.close()
    with authority_serve(tmp_path / "a.db", "--key", str(key_path)) as (url, _):
        r = mw("events", "tail", "--group", "g1", "--url", url)
        assert r.returncode == 2 and "reads are signed: pass --key" in r.stderr
        stranger = tmp_path / "stranger.pem"
        SigningKey.generate().to_file(stranger)
        r = mw("events", "tail", "--group", "g1", "--url", url, "--key", str(stranger))
        assert r.returncode == 2 and "not_a_member" in r.stderr
        member = tmp_path / "worker.pem"
        w.workers[0].key.to_file(member)
        r = mw("events", "tail", "--group", "g1", "--url", url, "--key", str(member))
        assert r.returncode == 0, r.stderr
        lines = r.stdout.strip().splitlines()
        assert len(lines) == head
        assert "group.created" in lines[0] and "work.authorized" in lines[-1]
        # a Group the member is not in reads as one that does not exist: nothing to enumerate
        r = mw("events", "tail", "--group", "nope", "--url", url, "--key", str(member))
        assert r.returncode == 2 and "not_a_member" in r.stderr


def test_help_paragraphs_are_reflowed_for_the_terminal() -> None:
    """Docstrings are wrapped for the source; ``--help`` joins each paragraph's lines so the
    terminal wraps them, keeping list items and labels on lines of their own."""
    from missionweave.cli import reflow

    doc = """Run an agent: answer offers.

    The agent opens a session, follows each
    Group's log into local state.

    Exit status 0: recorded.
    Exit status 1: refused,
    and it still waits.
    - one item
    - another
    """
    assert reflow(doc) == (
        "Run an agent: answer offers.\n\n"
        "The agent opens a session, follows each Group's log into local state.\n\n"
        "Exit status 0: recorded.\nExit status 1: refused, and it still waits.\n"
        "- one item\n- another"
    )
