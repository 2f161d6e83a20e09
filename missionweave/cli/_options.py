"""Options shared by the commands that talk to Temporal, the Authority or an artifact store.

One definition each, so that every command spells a setting the same way, reads the same
environment variable for its default and shows the same help. The servers' addresses are the
table :data:`ENV_OPTIONS` (flag, environment variable, default); ``--db`` comes from
``MISSIONWEAVE_AUTHORITY_DB`` and has no default.

``MISSIONWEAVE_DATA_DIR`` is the data directory of ``dev up`` and the default place of the
filesystem artifact store (:func:`missionweave.cli._artifacts.default_store_path`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ..dev import StackPorts

#: The options whose default an environment variable sets (what docker-compose.yml sets):
#: flag → (environment variable, default, help).
ENV_OPTIONS: dict[str, tuple[str, str, str]] = {
    "--temporal-address": ("TEMPORAL_ADDRESS", "127.0.0.1:7233", "Temporal frontend host:port."),
    "--namespace": ("TEMPORAL_NAMESPACE", "default", "Temporal namespace."),
    "--authority-url": (
        "MISSIONWEAVE_AUTHORITY_URL",
        "http://127.0.0.1:8787",
        "Authority base URL.",
    ),
    "--ui-url": ("MISSIONWEAVE_UI_URL", "http://127.0.0.1:8233", "Temporal web UI base URL."),
}
DATA_DIR_ENV = "MISSIONWEAVE_DATA_DIR"
AUTHORITY_DB_ENV = "MISSIONWEAVE_AUTHORITY_DB"


def env_option(flag: str, *aliases: str) -> Any:
    """The option ``flag`` of :data:`ENV_OPTIONS` (its environment variable, default and
    help); ``aliases`` are other names of it, shown first (``events tail --url``).

    Raises:
        KeyError: ``flag`` is not in :data:`ENV_OPTIONS`.
    """
    envvar, default, help = ENV_OPTIONS[flag]
    return typer.Option(default, *aliases, flag, envvar=envvar, help=help)


TEMPORAL_ADDRESS = env_option("--temporal-address")
NAMESPACE = env_option("--namespace")
AUTHORITY_URL = env_option("--authority-url")
UI_URL = env_option("--ui-url")


def authority_db_option(help: str) -> Any:
    """The required ``--db`` option (from ``MISSIONWEAVE_AUTHORITY_DB``) of the commands that
    open the Authority's database: a SQLite file or a ``postgresql://`` URL; ``help`` says
    what this command does with it."""
    return typer.Option(..., "--db", envvar=AUTHORITY_DB_ENV, help=help)


#: The environment variable of :data:`READER_KEY`.
READER_KEY_ENV = "MISSIONWEAVE_KEY"
#: Commands that read a Group's log over HTTP sign their reads with a member's key.
READER_KEY = typer.Option(
    None, "--key", envvar=READER_KEY_ENV, metavar="PEM",
    help="Ed25519 key (PEM) of an active member of the Group, or of an operator, that signs "
    "the reads (the Authority answers nobody else). With `dev up`: "
    "<data-dir>/keys/coordinator.pem.",
)  # fmt: skip

#: ``dev up`` and ``demo``: the embedded stack's ports.
TEMPORAL_PORT = typer.Option(
    7233, "--temporal-port", min=0, max=65535, help="Temporal gRPC port (0: any free one)."
)
UI_PORT = typer.Option(
    8233, "--ui-port", min=0, max=65535, help="Temporal web UI port (0: any free one)."
)
AUTHORITY_PORT = typer.Option(
    8787, "--authority-port", min=0, max=65535, help="Authority HTTP port (0: any free one)."
)
HEADLESS = typer.Option(False, "--headless", help="No Temporal web UI.")


def stack_ports(
    temporal_port: int, ui_port: int, authority_port: int, headless: bool
) -> StackPorts:
    """The values of :data:`TEMPORAL_PORT`, :data:`UI_PORT`, :data:`AUTHORITY_PORT` and
    :data:`HEADLESS` as the one value the embedded stack takes
    (:class:`~missionweave.dev.StackPorts`)."""
    from ..dev import StackPorts

    return StackPorts(
        temporal_port=temporal_port,
        ui_port=ui_port,
        authority_port=authority_port,
        headless=headless,
    )


#: ``--metrics-host`` of every command serving ``GET /metrics`` (docs/metrics.md).
METRICS_HOST = typer.Option(
    "127.0.0.1", "--metrics-host", help="Interface the metrics endpoint binds."
)


def metrics_port_option(default: int | None, what: str) -> Any:
    """The ``--metrics-port`` option of a process serving ``GET /metrics``; ``what`` names
    its own series (the Temporal SDK's and the Python process's come with them). As for every
    port of the CLI, 0 picks any free one. Its value is ``None`` when not given:
    :func:`~._common.start_metrics` then tries ``default`` (``None``: serves none) and only
    warns when that port is taken. A command with a ``default`` also takes
    :data:`NO_METRICS`, the one way to serve none."""
    return typer.Option(
        None, "--metrics-port", min=0, max=65535, show_default=str(default or "none"),
        help=f"Serve GET /metrics (Prometheus text: {what}; docs/metrics.md) on this port; "
        "0: any free one (the URL is printed)."
        + (" --no-metrics: none." if default else ""),
    )  # fmt: skip


#: ``--no-metrics`` of the commands that serve ``GET /metrics`` by default (see
#: :func:`metrics_port_option`).
NO_METRICS = typer.Option(
    False, "--no-metrics", help="Serve no GET /metrics endpoint (not with --metrics-port)."
)


#: ``worker`` and ``coordinator``: how long Ctrl-C waits for a clean stop (see
#: :func:`missionweave.cli._common.serve_until_signalled`).
STOP_TIMEOUT = typer.Option(
    20.0, "--stop-timeout", min=1.0, metavar="SECONDS",
    help="After Ctrl-C (or SIGTERM), how long to wait for a clean stop — running handlers "
    "pause and report, the Temporal Worker drains — before exiting anyway (status 1), e.g. "
    "when the Authority or Temporal is gone. A second Ctrl-C exits at once.",
)  # fmt: skip

__all__ = [
    "AUTHORITY_DB_ENV",
    "AUTHORITY_PORT",
    "AUTHORITY_URL",
    "DATA_DIR_ENV",
    "ENV_OPTIONS",
    "HEADLESS",
    "METRICS_HOST",
    "NAMESPACE",
    "NO_METRICS",
    "READER_KEY",
    "READER_KEY_ENV",
    "STOP_TIMEOUT",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_PORT",
    "UI_PORT",
    "UI_URL",
    "authority_db_option",
    "env_option",
    "metrics_port_option",
    "stack_ports",
]
