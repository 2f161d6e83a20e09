"""Options shared by the commands that talk to Temporal, the Authority or an artifact store.

One definition each, so that every command spells a setting the same way, reads the same
environment variable for its default and shows the same help:

======================  ==============================  =========================
option                  environment variable            default
======================  ==============================  =========================
``--temporal-address``  ``TEMPORAL_ADDRESS``            ``127.0.0.1:7233``
``--namespace``         ``TEMPORAL_NAMESPACE``          ``default``
``--authority-url``     ``MISSIONWEAVE_AUTHORITY_URL``  ``http://127.0.0.1:8787``
``--ui-url``            ``MISSIONWEAVE_UI_URL``         ``http://127.0.0.1:8233``
``--db``                ``MISSIONWEAVE_AUTHORITY_DB``   (required)
======================  ==============================  =========================

``MISSIONWEAVE_DATA_DIR`` is the data directory of ``dev up`` and the default place of the
filesystem artifact store (:func:`missionweave.cli._artifacts.default_store_path`).
"""

from __future__ import annotations

from typing import Any

import typer

DEFAULT_TEMPORAL_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_AUTHORITY_URL = "http://127.0.0.1:8787"
DEFAULT_UI_URL = "http://127.0.0.1:8233"

#: The environment variables behind the defaults (what docker-compose.yml sets).
TEMPORAL_ADDRESS_ENV = "TEMPORAL_ADDRESS"
NAMESPACE_ENV = "TEMPORAL_NAMESPACE"
AUTHORITY_URL_ENV = "MISSIONWEAVE_AUTHORITY_URL"
UI_URL_ENV = "MISSIONWEAVE_UI_URL"
DATA_DIR_ENV = "MISSIONWEAVE_DATA_DIR"
AUTHORITY_DB_ENV = "MISSIONWEAVE_AUTHORITY_DB"

TEMPORAL_ADDRESS = typer.Option(
    DEFAULT_TEMPORAL_ADDRESS, "--temporal-address", envvar=TEMPORAL_ADDRESS_ENV,
    help="Temporal frontend host:port.",
)  # fmt: skip
NAMESPACE = typer.Option(
    DEFAULT_NAMESPACE, "--namespace", envvar=NAMESPACE_ENV, help="Temporal namespace."
)
AUTHORITY_URL = typer.Option(
    DEFAULT_AUTHORITY_URL, "--authority-url", envvar=AUTHORITY_URL_ENV,
    help="Authority base URL.",
)  # fmt: skip
UI_URL = typer.Option(
    DEFAULT_UI_URL, "--ui-url", envvar=UI_URL_ENV, help="Temporal web UI base URL."
)


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
    "AUTHORITY_URL_ENV",
    "DATA_DIR_ENV",
    "DEFAULT_AUTHORITY_URL",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TEMPORAL_ADDRESS",
    "DEFAULT_UI_URL",
    "HEADLESS",
    "METRICS_HOST",
    "NAMESPACE",
    "NAMESPACE_ENV",
    "NO_METRICS",
    "READER_KEY",
    "READER_KEY_ENV",
    "STOP_TIMEOUT",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_ADDRESS_ENV",
    "TEMPORAL_PORT",
    "UI_PORT",
    "UI_URL",
    "UI_URL_ENV",
    "authority_db_option",
    "metrics_port_option",
]
