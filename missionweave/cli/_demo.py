"""``missionweave demo``: the one-command demonstration — an integrity audit of a real Python
environment run as a Mission on the embedded stack (see ``docs/demo.md``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ._common import CliError, run_client_command
from ._options import AUTHORITY_PORT, HEADLESS, TEMPORAL_PORT, UI_PORT, stack_ports

if TYPE_CHECKING:
    from ..demo import DemoOptions, Summary

DEFAULT_DATA_DIR = Path(".missionweave") / "demo"
#: Failing distributions named on the stderr line, at most.
SHOWN_PROBLEMS = 5


def demo_command(
    site_packages: list[Path] = typer.Option(
        [],
        "--site-packages",
        metavar="PATH",
        help="A site-packages directory to audit (repeatable). Default: the running "
        "interpreter's environment.",
    ),
    data_dir: Path = typer.Option(
        DEFAULT_DATA_DIR,
        "--data-dir",
        metavar="DIR",
        help="Every file of the stack: Temporal and Authority databases, keys, Artifacts, "
        "logs, and the SBOM copies. A re-run on the same directory starts a new Mission.",
    ),
    keep_running: bool = typer.Option(
        False,
        "--keep-running",
        help="After the summary, keep the stack up for the web UI until Ctrl-C.",
    ),
    require_approval: bool = typer.Option(
        False,
        "--require-approval",
        help="The SBOM needs a MissionOwner's Approval: the demo "
        "prints the missionweave approve command to run, and waits.",
    ),
    temporal_port: int = TEMPORAL_PORT,
    ui_port: int = UI_PORT,
    authority_port: int = AUTHORITY_PORT,
    headless: bool = HEADLESS,
) -> None:
    """Audit a Python environment's integrity as a Mission, with live progress and a summary.

    Starts the embedded stack under DIR (Temporal dev server, Authority, artifact store,
    coordinator) and four agents, then a Mission: `inventory` lists the distributions and
    adds one `verify:<dist>` WorkItem per distribution while the Mission runs; each re-hashes
    the files of its RECORD; `sbom` builds a CycloneDX SBOM that a reviewer agent checks
    against the inventory. Exits 0 only when the Mission completed (every file matched).

    Example: missionweave demo --site-packages .venv/lib/python3.11/site-packages
    """
    from ..demo import DemoError, DemoOptions, check_data_dir, resolve_target

    try:  # before anything starts: a bad target is one line
        resolve_target(site_packages)
        check_data_dir(data_dir)
    except DemoError as exc:
        raise CliError(str(exc)) from None
    opts = DemoOptions(
        data_dir=data_dir,
        site_packages=tuple(site_packages),
        keep_running=keep_running,
        require_approval=require_approval,
        ports=stack_ports(temporal_port, ui_port, authority_port, headless),
    )
    run_client_command(_demo(opts))


@contextlib.contextmanager
def _logs_to(path: Path) -> Iterator[None]:
    """Send the stack's log records to ``path`` (INFO and up) and keep only errors on the
    terminal, where the live table is; put everything back afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    ours = logging.getLogger("missionweave")
    streams = [h for h in root.handlers if type(h) is logging.StreamHandler]
    levels = [h.level for h in streams]
    old_level = ours.level
    root.addHandler(handler)
    ours.setLevel(logging.INFO)
    for h in streams:
        h.setLevel(max(h.level, logging.ERROR))
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        ours.setLevel(old_level)
        for h, level in zip(streams, levels, strict=True):
            h.setLevel(level)


async def _demo(opts: DemoOptions) -> int:
    from ..demo import DemoError, DemoInterrupted, run_demo
    from ..views import console as make_console

    console = make_console()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def interrupt() -> None:
        if stop.is_set():  # a second Ctrl-C: the orderly stop may wait on a server Ctrl-C killed
            typer.echo("forced exit", err=True)
            os._exit(130)
        typer.echo("stopping (Ctrl-C again to force)", err=True)
        stop.set()

    for sig in signals:
        loop.add_signal_handler(sig, interrupt)
    try:
        with _logs_to(opts.data_dir / "demo.log"):
            summary = await run_demo(opts, console, stop=stop)
    except DemoInterrupted as exc:
        typer.echo(str(exc), err=True)
        typer.echo("stopped", err=True)
        return 130
    except DemoError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{exc.filename or opts.data_dir}: {exc.strerror or exc}") from None
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
    if summary.status != "completed":
        typer.echo(failure_line(summary), err=True)
    if stop.is_set():  # Ctrl-C ended --keep-running (or came during the summary)
        typer.echo("stopped", err=True)
    return 0 if summary.status == "completed" else 1


def failure_line(summary: Summary) -> str:
    """The one line on stderr when the audit did not complete: each failing distribution and
    its files per kind (``six 1.16.0: missing: a.pyc; modified: six.py``, distributions apart
    by `` | ``), else why the Mission ended and its first WorkItem not verified."""
    from ..demo import short_id

    shown = [f"{p.distribution}: {p.describe()}" for p in summary.problems[:SHOWN_PROBLEMS]]
    if len(summary.problems) > SHOWN_PROBLEMS:
        shown.append(f"… {len(summary.problems) - SHOWN_PROBLEMS} more distributions")
    if not shown:
        shown = [summary.reason] if summary.reason else []
        for u in summary.unfinished[:1]:
            shown.append(
                f"{short_id(summary.mission_id, u.work_item_id)} {u.state}"
                + (f": {u.detail}" if u.detail else "")
            )
    return f"audit {summary.status}" + (f": {' | '.join(shown)}" if shown else "")


__all__ = ["DEFAULT_DATA_DIR", "demo_command", "failure_line"]
