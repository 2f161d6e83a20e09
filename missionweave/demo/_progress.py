"""Live progress of the audit: a rich table of WorkItems by kind and state on a terminal, one
plain line per change of the counts elsewhere (a pipe, a file, CI)."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from ..protocol.temporal_contract import MissionStatus
from ..views import STATE_STYLE
from ._spec import short_id

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

STATES = ("open", "offered", "queued", "active", "blocked", "submitted", "verified", "failed",
          "cancelled")  # fmt: skip
KINDS = ("inventory", "verify", "sbom", "review")
#: Running WorkItems shown below the table, at most.
SHOWN_ACTIVE = 6


def kind_of(mission_id: str, work_item_id: str) -> str:
    """``inventory``, ``verify``, ``sbom`` or ``review`` (a reviewer's WorkItem)."""
    short = short_id(mission_id, work_item_id)
    if ":review" in short:
        return "review"
    return short.split(":", 1)[0] if short.split(":", 1)[0] in KINDS else "other"


def counts_by_kind(status: MissionStatus) -> dict[str, Counter[str]]:
    """Per kind, WorkItems per state."""
    out: dict[str, Counter[str]] = {}
    for item in status.items:
        out.setdefault(kind_of(status.mission_id, item.work_item_id), Counter())[
            item.state.value
        ] += 1
    return out


def line(status: MissionStatus, elapsed_s: float) -> str:
    """``[  4.2s] running · verify 12/40 verified, 3 active … · sbom open``."""
    parts = []
    for kind, c in sorted(counts_by_kind(status).items(), key=lambda kv: _order(kv[0])):
        total = sum(c.values())
        rest = ", ".join(
            f"{n} {s}"
            for s, n in sorted(c.items(), key=lambda sn: _state(sn[0]))
            if s != "verified"
        )
        parts.append(f"{kind} {c['verified']}/{total} verified" + (f" ({rest})" if rest else ""))
    return f"[{elapsed_s:6.1f}s] {status.status} · " + " · ".join(parts)


def _order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def _state(state: str) -> int:
    return STATES.index(state) if state in STATES else len(STATES)


def render(status: MissionStatus, elapsed_s: float) -> RenderableType:
    """The table of WorkItems by kind and state, a progress bar and the running items."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    by_kind = counts_by_kind(status)
    table = Table(
        title=f"Mission {status.mission_id} · {status.status} · {elapsed_s:.0f}s",
        title_justify="left",
    )
    table.add_column("WorkItems")
    for s in STATES:
        table.add_column(Text(s, style=STATE_STYLE.get(s, "")), justify="right")
    for kind in sorted(by_kind, key=_order):
        c = by_kind[kind]
        table.add_row(kind, *(str(c[s]) if c[s] else "·" for s in STATES))
    total = len(status.items)
    done = sum(1 for i in status.items if i.state.value in ("verified", "cancelled"))
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(total=max(total, 1), completed=done, width=50), f"{done}/{total} WorkItems done"
    )
    running = [i for i in status.items if i.state.value == "active"][:SHOWN_ACTIVE]
    rows = Table.grid(padding=(0, 2))
    for i in running:
        phase = i.last_progress.phase if i.last_progress is not None else ""
        rows.add_row(
            Text(short_id(status.mission_id, i.work_item_id), style="cyan"), i.owner or "", phase
        )
    return Group(table, bar, rows)


class ProgressView:
    """Shows the Mission's status as it changes.

    Args:
        console: where to draw.
        live: draw a live table (a terminal) rather than lines.
    """

    def __init__(self, console: Console, *, live: bool) -> None:
        self.console = console
        self.started = time.monotonic()
        self._live: Live | None = None
        self._last = ""
        if live:
            from rich.live import Live

            self._live = Live(console=console, refresh_per_second=4, transient=False)
            self._live.start()

    @property
    def elapsed_s(self) -> float:
        """Seconds since the view was created."""
        return time.monotonic() - self.started

    def update(self, status: MissionStatus) -> None:
        """Show ``status``."""
        if self._live is not None:
            self._live.update(render(status, self.elapsed_s))
            return
        text = line(status, self.elapsed_s)
        if text.split("] ", 1)[1] != self._last:
            self._last = text.split("] ", 1)[1]
            self.console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)

    def note(self, message: str) -> None:
        """Print ``message`` above the live table (or as a line)."""
        self.console.print(message, markup=False, highlight=False, soft_wrap=True, emoji=False)

    def close(self) -> None:
        """Stop drawing (the last table stays on screen)."""
        if self._live is not None:
            self._live.stop()
            self._live = None


__all__ = ["KINDS", "STATES", "ProgressView", "counts_by_kind", "kind_of", "line", "render"]
