"""What the audit found and proved, from the Mission's result, the artifact store and the Group
log: distributions and files checked, problems, Artifacts, offers and declines, the event range
and the offline verification of the log's hash chain."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import Event, EventType
from ..protocol.temporal_contract import ItemResult, MissionResult
from ._progress import kind_of
from ._record import SHOWN_PER_KIND, DistReport, FilesOfKind, describe_files, one_line
from ._spec import short_id

if TYPE_CHECKING:
    from rich.console import Console

    from ..artifacts import ArtifactStore

#: Reports listed one by one in the printed summary (all of them are in the Mission result).
SHOWN_REPORTS = 8
#: WorkItems not verified listed one by one when the Mission did not complete.
SHOWN_UNFINISHED = 10


@dataclass
class Problem:
    """A verify WorkItem that did not pass: the distribution, what is wrong (one line: the
    counts per kind, a RECORD error, the last failed Evidence), which files of which kind."""

    work_item_id: str
    distribution: str
    summary: str
    files: list[FilesOfKind] = field(default_factory=list)

    def describe(self, limit: int = SHOWN_PER_KIND) -> str:
        """One line: the files per kind (``missing: a.pyc; modified: six.py``), else the
        summary."""
        return describe_files(self.files, limit) if self.files else self.summary


@dataclass
class Unfinished:
    """A WorkItem of a Mission that did not complete which is not verified: its id, state
    and ``detail`` (the last thing that happened to it)."""

    work_item_id: str
    state: str
    detail: str


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
    reason: str = ""
    unfinished: list[Unfinished] = field(default_factory=list)


def _report(store: ArtifactStore, item: ItemResult) -> DistReport | None:
    h = item.outputs.get("report")
    if not isinstance(h, str):
        return None
    try:
        return DistReport.model_validate_json(store.get(h))
    except Exception:  # a missing or corrupt report is shown as such, not fatal here
        return None


def _problem(mission_id: str, item: ItemResult, report: DistReport | None) -> Problem:
    name = one_line(str(item.outputs.get("name") or short_id(mission_id, item.work_item_id)))
    if report is not None and not report.files_match:
        files = report.problems_by_kind()
        kinds = [f"{k.count} {k.kind}" for k in files]
        what = ", ".join(kinds) or report.record_error or "no RECORD"
        dist = one_line(f"{report.name} {report.version}")
        return Problem(item.work_item_id, dist, one_line(what), files)
    fails = [e.summary for e in item.evidence if e.result == "fail" and e.summary]
    why = fails[-1] if fails else item.detail or item.state.value
    return Problem(item.work_item_id, name, one_line(why)[:300])


def summarize(result: MissionResult, store: ArtifactStore) -> Summary:
    """The audit's figures from the Mission's result and the reports in ``store``; for a
    Mission that did not complete, also why (``MissionResult.reason``) and every WorkItem
    not verified with its ``detail``."""
    s = Summary(
        result.mission_id,
        result.status,
        event_range=result.event_range,
        reason=one_line(result.reason),
    )
    for item in result.items:
        kind = kind_of(result.mission_id, item.work_item_id)
        if result.status != "completed" and item.state.value != "verified":
            s.unfinished.append(
                Unfinished(item.work_item_id, item.state.value, one_line(item.detail))
            )
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
    order = {"failed": 0, "cancelled": 2}
    s.unfinished.sort(key=lambda u: (order.get(u.state, 1), not u.detail))  # likely causes first
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
        if ev.type == EventType.WORK_OFFERED:
            st.offers += 1
        elif ev.type == EventType.WORK_OFFER_DECLINED:
            st.declines[(str(ev.body.get("agent_id")), str(ev.body.get("reason")))] += 1
        elif ev.type == EventType.WORK_STARTED:
            st.executions[ev.actor or "?"] += 1
            active.add(wid)
            st.peak_parallel = max(st.peak_parallel, len(active))
        elif "state" in ev.body and ev.body["state"] != "active":
            active.discard(wid)
    return st


def verify_chain(db: Path, group_id: str) -> tuple[bool, str]:
    """``events verify`` on the Authority database: ``(ok, one line)``."""
    from ..authority import ChainError, UnknownGroupError, open_reader, verify_log

    store = open_reader(db)
    try:
        row = store.one("meta.authority_key")
        rep = verify_log(store, group_id, row[0] if row else "")
    except ChainError as exc:
        return False, f"FAIL at sequence {exc.seq}: {exc.reason}"
    except (UnknownGroupError, sqlite3.DatabaseError, TypeError) as exc:
        return False, f"FAIL: {exc}"
    finally:
        store.close()
    return True, f"ok: {rep.events} events, head {rep.head_seq} {rep.head_hash[:16]}…"


#: Appended to the web UI's link when the stack stops with the demo.
UI_STOPS = "(stops when the demo exits; --keep-running keeps it up)"


def print_summary(
    console: Console, s: Summary, *, mission_url: str | None, ui_stays_up: bool = True
) -> None:
    """The summary the demo ends with (lines are never wrapped: paths and links stay whole).

    Args:
        console: where to print.
        s: the figures.
        mission_url: the Mission's page in the Temporal web UI (``None``: headless).
        ui_stays_up: the stack stays up after the summary (``--keep-running``); otherwise the
            link says that it stops.
    """
    from rich.markup import escape

    def out(label: str, text: str, style: str = "") -> None:
        body = f"[{style}]{escape(text)}[/]" if style else escape(text)
        console.print(f"  {label:<15} {body}", highlight=False, soft_wrap=True, emoji=False)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)

    ok = s.status == "completed"
    console.print(
        f"\nMission {s.mission_id}: [{'bold green' if ok else 'bold red'}]{s.status}[/]",
        highlight=False,
        soft_wrap=True,
    )
    if not ok and s.reason:
        out("reason", s.reason, "bold red")
    out("distributions", f"{s.distributions} listed, {s.verified} verified")
    out(
        "files checked",
        f"{s.files_checked}: {s.files_hashed} hashed ({s.bytes_hashed:,} bytes), "
        f"{s.files_checked - s.files_hashed} listed without a hash; "
        f"{s.unlisted} unlisted files noted",
    )
    out(
        "problems", str(len(s.problems)) if s.problems else "none", "bold red" if s.problems else ""
    )
    for p in s.problems:
        say(f"    {p.distribution}: {p.summary}")
        for k in p.files:
            for f in k.paths[:SHOWN_PER_KIND]:
                say(f"      {k.kind:<11} {one_line(f)}")
            if k.count > len(k.paths[:SHOWN_PER_KIND]):
                say(f"      {k.kind:<11} … {k.count - len(k.paths[:SHOWN_PER_KIND])} more")
    if s.unfinished:
        out("not verified", str(len(s.unfinished)), "bold red")
        for u in s.unfinished[:SHOWN_UNFINISHED]:
            say(
                f"    {short_id(s.mission_id, u.work_item_id)}: {u.state}"
                + (f" — {u.detail}" if u.detail else "")
            )
        if len(s.unfinished) > SHOWN_UNFINISHED:
            say(f"    … {len(s.unfinished) - SHOWN_UNFINISHED} more")
    console.print("  artifacts")
    if s.inventory:
        out("  inventory", s.inventory)
    for wid, h in list(s.reports.items())[:SHOWN_REPORTS]:
        out("  report", f"{h}  {short_id(s.mission_id, wid)}")
    if len(s.reports) > SHOWN_REPORTS:
        out(
            "  report",
            f"… {len(s.reports) - SHOWN_REPORTS} more (every hash is in the SBOM "
            "and the Mission result)",
        )
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
    if mission_url is None:
        out("Temporal UI", "(headless)")
    else:
        out("Temporal UI", mission_url if ui_stays_up else f"{mission_url}  {UI_STOPS}")


__all__ = [
    "SHOWN_UNFINISHED",
    "UI_STOPS",
    "LogStats",
    "Problem",
    "Summary",
    "Unfinished",
    "log_stats",
    "print_summary",
    "summarize",
    "verify_chain",
]
