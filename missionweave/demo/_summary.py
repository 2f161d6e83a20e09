"""What the audit found and proved, from the Mission's result, the artifact store and the Group
log: distributions and files checked, problems, Artifacts, offers and declines, the event range
and the offline verification of the log's hash chain."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import Event
from ..protocol.mission import ItemResult, MissionResult
from ._progress import kind_of
from ._record import DistReport
from ._spec import short_id

if TYPE_CHECKING:
    from rich.console import Console

    from ..artifacts import ArtifactStore

#: Reports listed one by one in the printed summary (all of them are in the Mission result).
SHOWN_REPORTS = 8


@dataclass
class Problem:
    """A verify WorkItem that did not pass: the distribution, what is wrong, which files."""

    work_item_id: str
    distribution: str
    summary: str
    files: list[str] = field(default_factory=list)


@dataclass
class LogStats:
    """Offers, declines and executions of the Mission, read from the Group log."""

    offers: int = 0
    declines: Counter[tuple[str, str]] = field(default_factory=Counter)
    executions: Counter[str] = field(default_factory=Counter)
    peak_parallel: int = 0


@dataclass
class Summary:
    """The audit's figures; see :func:`summarize`."""

    mission_id: str
    status: str
    distributions: int = 0
    verified: int = 0
    files_checked: int = 0
    files_hashed: int = 0
    bytes_hashed: int = 0
    unlisted: int = 0
    problems: list[Problem] = field(default_factory=list)
    inventory: str | None = None
    sbom: str | None = None
    reports: dict[str, str] = field(default_factory=dict)
    reviews: dict[str, str] = field(default_factory=dict)
    sbom_path: Path | None = None
    event_range: tuple[int, int] | None = None
    chain: str = "not verified"
    chain_ok: bool = False
    stats: LogStats = field(default_factory=LogStats)
    failed_items: list[str] = field(default_factory=list)


def _report(store: ArtifactStore, item: ItemResult) -> DistReport | None:
    h = item.outputs.get("report")
    if not isinstance(h, str):
        return None
    try:
        return DistReport.model_validate_json(store.get(h))
    except Exception:  # a missing or corrupt report is shown as such, not fatal here
        return None


def _problem(mission_id: str, item: ItemResult, report: DistReport | None) -> Problem:
    name = str(item.outputs.get("name") or short_id(mission_id, item.work_item_id))
    if report is not None and not report.files_match:
        files = report.problem_files()
        found = (("missing", report.missing), ("modified", report.modified),
                 ("unsupported", report.unsupported))  # fmt: skip
        kinds = [f"{len(v)} {k}" for k, v in found if v]
        what = ", ".join(kinds) or report.record_error or "no RECORD"
        return Problem(item.work_item_id, f"{report.name} {report.version}", what, files)
    fails = [e.summary for e in item.evidence if e.result == "fail" and e.summary]
    return Problem(item.work_item_id, name, (fails[-1] if fails else item.state.value)[:300])


def summarize(result: MissionResult, store: ArtifactStore) -> Summary:
    """The audit's figures from the Mission's result and the reports in ``store``."""
    s = Summary(result.mission_id, result.status, event_range=result.event_range)
    for item in result.items:
        kind = kind_of(result.mission_id, item.work_item_id)
        if item.state.value == "failed":
            s.failed_items.append(item.work_item_id)
        if kind == "inventory":
            s.inventory = _str(item.outputs.get("inventory"))
            s.distributions = int(item.outputs.get("distributions") or 0)
        elif kind == "sbom":
            s.sbom = _str(item.outputs.get("sbom"))
        elif kind == "review":
            s.reviews.update({h: item.work_item_id for h in item.artifacts})
        elif kind == "verify":
            report = _report(store, item)
            if report is not None:
                s.files_checked += report.files_hashed + report.files_unhashed
                s.files_hashed += report.files_hashed
                s.bytes_hashed += report.bytes_hashed
                s.unlisted += report.counts.get("unlisted", 0)
                s.reports[item.work_item_id] = str(item.outputs.get("report"))
            if item.state.value == "verified":
                s.verified += 1
            elif item.state.value == "failed" or (report is not None and not report.files_match):
                s.problems.append(_problem(result.mission_id, item, report))
    return s


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def log_stats(events: list[Event], mission_items: set[str]) -> LogStats:
    """Offers, declines (by agent and reason), executions per agent and the most WorkItems
    executing at once, from the Mission's Events."""
    st = LogStats()
    active: set[str] = set()
    for ev in events:
        wid = ev.work_item_id
        if wid is None or wid not in mission_items:
            continue
        if ev.type == "work.offered":
            st.offers += 1
        elif ev.type == "work.offer_declined":
            st.declines[(str(ev.body.get("agent_id")), str(ev.body.get("reason")))] += 1
        elif ev.type == "work.started":
            st.executions[ev.actor or "?"] += 1
            active.add(wid)
            st.peak_parallel = max(st.peak_parallel, len(active))
        elif "state" in ev.body and ev.body["state"] != "active":
            active.discard(wid)
    return st


def verify_chain(db: Path, group_id: str) -> tuple[bool, str]:
    """``events verify`` on the Authority database: ``(ok, one line)``."""
    from ..authority import ChainError, UnknownGroupError, verify_log

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='authority_public_key'").fetchone()
        rep = verify_log(conn, group_id, row[0])
    except ChainError as exc:
        return False, f"FAIL at sequence {exc.seq}: {exc.reason}"
    except (UnknownGroupError, sqlite3.DatabaseError, TypeError) as exc:
        return False, f"FAIL: {exc}"
    finally:
        conn.close()
    return True, f"ok: {rep.events} events, head {rep.head_seq} {rep.head_hash[:16]}…"


def print_summary(console: Console, s: Summary, *, mission_url: str | None) -> None:
    """The summary the demo ends with (lines are never wrapped: paths and links stay whole)."""
    from rich.markup import escape

    def out(label: str, text: str, style: str = "") -> None:
        body = f"[{style}]{escape(text)}[/]" if style else escape(text)
        console.print(f"  {label:<15} {body}", highlight=False, soft_wrap=True)

    ok = s.status == "completed"
    console.print(f"\nMission {s.mission_id}: [{'bold green' if ok else 'bold red'}]{s.status}[/]",
                  highlight=False, soft_wrap=True)  # fmt: skip
    out("distributions", f"{s.distributions} listed, {s.verified} verified")
    out("files checked", f"{s.files_checked}: {s.files_hashed} hashed ({s.bytes_hashed:,} bytes), "
                         f"{s.files_checked - s.files_hashed} listed without a hash; "
                         f"{s.unlisted} unlisted files noted")  # fmt: skip
    out("problems", str(len(s.problems)) if s.problems else "none",
        "bold red" if s.problems else "")  # fmt: skip
    for p in s.problems:
        console.print(f"    {p.distribution}: {p.summary}", markup=False, highlight=False,
                      soft_wrap=True)  # fmt: skip
        for f in p.files[:10]:
            console.print(f"      {f}", markup=False, highlight=False, soft_wrap=True)
    if s.failed_items and not s.problems:
        out("failed", ", ".join(short_id(s.mission_id, w) for w in s.failed_items), "bold red")
    console.print("  artifacts")
    if s.inventory:
        out("  inventory", s.inventory)
    for wid, h in list(s.reports.items())[:SHOWN_REPORTS]:
        out("  report", f"{h}  {short_id(s.mission_id, wid)}")
    if len(s.reports) > SHOWN_REPORTS:
        out("  report", f"… {len(s.reports) - SHOWN_REPORTS} more (every hash is in the SBOM "
                        "and the Mission result)")  # fmt: skip
    if s.sbom:
        out("  sbom", s.sbom)
    for h, wid in s.reviews.items():
        out("  review", f"{h}  {short_id(s.mission_id, wid)}")
    out("SBOM", str(s.sbom_path or "not built"))
    st = s.stats
    declines = ", ".join(f"{a} {r} ×{n}" for (a, r), n in sorted(st.declines.items())) or "none"
    runs = ", ".join(f"{a} {n}" for a, n in sorted(st.executions.items())) or "none"
    out("offers", f"{st.offers} offers, declines: {declines}")
    out("executions", f"{runs}; at most {st.peak_parallel} at once")
    out("events", f"{s.event_range[0]}–{s.event_range[1]}" if s.event_range else "none")
    out("events verify", s.chain, "green" if s.chain_ok else "bold red")
    out("Temporal UI", mission_url or "(headless)")


__all__ = [
    "LogStats",
    "Problem",
    "Summary",
    "log_stats",
    "print_summary",
    "summarize",
    "verify_chain",
]
