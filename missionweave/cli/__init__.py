"""The ``missionweave`` command line.

Every command has ``--help``. Bad input (a missing file, an unknown group, an unreachable server)
prints one line on stderr and exits non-zero; it never shows a traceback.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import typer

from ..protocol import MissionWeaveError
from ._approve import approve_command
from ._artifacts import app as artifacts_app
from ._authority import app as authority_app
from ._common import CliError
from ._contract import app as contract_app
from ._coordinator import coordinator_command
from ._demo import demo_command
from ._dev import app as dev_app
from ._events import app as events_app
from ._group import app as group_app
from ._keys import app as keys_app
from ._mission import app as mission_app
from ._worker import worker_command

app = typer.Typer(
    name="missionweave",
    help="MissionWeave: signed, leased, auditable work coordination for cooperating agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(artifacts_app, name="artifacts")
app.add_typer(authority_app, name="authority")
app.add_typer(contract_app, name="contract")
app.add_typer(events_app, name="events")
app.add_typer(keys_app, name="keys")
app.add_typer(dev_app, name="dev")
app.add_typer(mission_app, name="mission")
app.add_typer(group_app, name="group")
app.command("worker")(worker_command)
app.command("coordinator")(coordinator_command)
app.command("approve")(approve_command)
app.command("demo")(demo_command)


_LINE_START = re.compile(r"^(?:[-*•] |\d+\. |[A-Z][A-Za-z ]{0,24}\d*:)")


def reflow(text: str) -> str:
    """Help text as paragraphs the terminal wraps: the lines of a paragraph joined, except a
    line that starts a list item or a label (``- x``, ``1. x``, ``Exit status 1:``). Docstrings
    are wrapped for the source; ``--help`` shows them in a narrower box."""
    out = []
    for para in text.strip().split("\n\n"):
        lines: list[str] = []
        for line in para.splitlines():
            line = line.strip()
            if lines and line and not _LINE_START.match(line):
                lines[-1] += " " + line
            elif line:
                lines.append(line)
        out.append("\n".join(lines))
    return "\n\n".join(out)


def _reflow_all(command: Any) -> Any:
    """Reflow the help of ``command`` (a click command typer built) and its subcommands."""
    if command.help:
        command.help = reflow(command.help)
    for sub in getattr(command, "commands", {}).values():
        _reflow_all(sub)
    return command


def main() -> None:
    """Console entry point: run the app, turning known errors into one line and exit code 2."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        _reflow_all(typer.main.get_command(app))()
    except CliError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except (MissionWeaveError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "main", "reflow"]
