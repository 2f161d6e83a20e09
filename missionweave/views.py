"""How MissionWeave shows a Mission to people (``missionweave mission …``, the demo's
progress): a rich table of its WorkItems and a Mermaid flowchart of its DAG, both coloured by
WorkItem state."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from .protocol.temporal_contract import MissionStatus, WorkItemStatus

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

#: Characters of a WorkItem's outputs the table shows (``--json`` shows all the query carries).
OUTPUTS_CELL_CHARS = 60
#: Colours of WorkItem states: rich styles for tables, Mermaid fills for graphs.
STATE_STYLE = {
    "proposed": "dim", "open": "white", "offered": "yellow", "queued": "magenta",
    "active": "bold cyan", "blocked": "bold red", "submitted": "blue", "verified": "green",
    "failed": "bold red", "cancelled": "dim",
}  # fmt: skip
STATE_FILL = {
    "proposed": "fill:#f8f9fa,stroke:#adb5bd,color:#495057",
    "open": "fill:#ffffff,stroke:#6c757d,color:#212529",
    "offered": "fill:#fff3cd,stroke:#ffc107,color:#664d03",
    "queued": "fill:#e2d9f3,stroke:#6f42c1,color:#3d2470",
    "active": "fill:#cff4fc,stroke:#0dcaf0,color:#055160",
    "blocked": "fill:#ffe5d0,stroke:#fd7e14,color:#843c00",
    "submitted": "fill:#cfe2ff,stroke:#0d6efd,color:#052c65",
    "verified": "fill:#d1e7dd,stroke:#198754,color:#0f5132",
    "failed": "fill:#f8d7da,stroke:#dc3545,color:#58151c",
    "cancelled": "fill:#e9ecef,stroke:#6c757d,color:#6c757d,stroke-dasharray:4",
}


def counts_line(status: MissionStatus) -> str:
    """``2 verified, 1 active`` (or ``no items``)."""
    return ", ".join(f"{n} {s}" for s, n in sorted(status.counts.items())) or "no items"


def outputs_cell(item: WorkItemStatus, width: int = OUTPUTS_CELL_CHARS) -> str:
    """A WorkItem's outputs as compact JSON, cut to ``width`` characters (``…``); outputs the
    ``status`` query left out as ``(N bytes, not shown)``; empty when there are none."""
    if item.outputs_omitted_bytes:
        return f"({item.outputs_omitted_bytes} bytes, not shown)"
    if not item.outputs:
        return ""
    text = json.dumps(item.outputs, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def render_table(status: MissionStatus) -> RenderableType:
    """A rich table of the Mission's WorkItems: state, owner, epoch, lease, attempts, detail
    (as of the current state: the workflow derives it) and outputs (:func:`outputs_cell`)."""
    from rich.table import Table
    from rich.text import Text

    counts = counts_line(status)
    events = ""
    if status.event_range is not None:
        events = f" · events {status.event_range[0]}–{status.event_range[1]}"
    why = f": {status.reason}" if status.reason else ""
    table = Table(
        title=f"Mission {status.mission_id} · group {status.group_id} · {status.status}{why}",
        caption=f"{counts}{events}",
    )
    for col in ("WorkItem", "state", "owner", "epoch", "lease", "attempts", "detail", "outputs"):
        # On a narrow screen ids fold onto more lines rather than lose their ends.
        table.add_column(
            col, justify="right" if col in ("epoch", "attempts") else "left", overflow="fold"
        )
    for item in status.items:
        state = item.state.value
        lease = (item.lease_id or "").removeprefix("lease_")  # --json has the whole id
        table.add_row(
            item.work_item_id,
            Text(state, style=STATE_STYLE.get(state, "")),
            item.owner or "",
            str(item.ownership_epoch),
            lease[:8] + ("…" if len(lease) > 8 else ""),
            str(item.attempts),
            item.detail,
            outputs_cell(item),
        )
    return table


def console() -> Console:
    """A rich console; on a pipe or file 120 columns (unless ``COLUMNS`` says), not rich's 80,
    so a table of WorkItem ids stays readable in logs."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=120)
    return console


def _mermaid_label(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def to_mermaid(status: MissionStatus) -> str:
    """A Mermaid flowchart of the Mission's DAG: one node per WorkItem (id, state, owner), an
    edge from each dependency to its dependent, and the state as the node's class (colour)."""
    ids = {item.work_item_id: f"w{i}" for i, item in enumerate(status.items)}
    lines = [
        f"%% Mission {status.mission_id} (group {status.group_id}): {status.status}",
        "flowchart LR",
    ]
    for item in status.items:
        label = f"{_mermaid_label(item.work_item_id)}<br/>{item.state.value}"
        if item.owner:
            label += f" · {_mermaid_label(item.owner)}"
        lines.append(f'  {ids[item.work_item_id]}["{label}"]')
    for item in status.items:
        for dep in item.dependencies:
            if dep in ids:
                lines.append(f"  {ids[dep]} --> {ids[item.work_item_id]}")
    used = sorted({item.state.value for item in status.items})
    for state in used:
        members = ",".join(ids[i.work_item_id] for i in status.items if i.state.value == state)
        lines.append(f"  class {members} {state}")
    for state in used:
        lines.append(f"  classDef {state} {STATE_FILL.get(state, '')}")
    return "\n".join(lines) + "\n"


__all__ = [
    "STATE_FILL",
    "STATE_STYLE",
    "console",
    "counts_line",
    "outputs_cell",
    "render_table",
    "to_mermaid",
]
