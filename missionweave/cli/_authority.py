"""``missionweave authority …``: run the Group Authority."""

from __future__ import annotations

from pathlib import Path

import typer

from ._common import CliError, load_or_create_key

app = typer.Typer(help="Run the Group Authority (signed event log).", no_args_is_help=True)


@app.command("serve")
def serve(
    db: Path = typer.Option(..., "--db", help="SQLite database file (created if missing)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8787, "--port", min=1, max=65535, help="TCP port."),
    key: Path | None = typer.Option(
        None,
        "--key",
        help="Authority Ed25519 key (PEM). Default: authority.key beside --db, "
        "created on first start.",
    ),
    online_window: int | None = typer.Option(
        None,
        "--online-window",
        min=1,
        help="Events kept online per Group; older ones move to the archive (default: all).",
    ),
) -> None:
    """Serve the Authority over HTTP and WebSocket (protocol section 16).

    Endpoints: POST /v1/commands, GET /v1/groups/{group}/events?after_sequence=N&limit=M,
    WebSocket /v1/stream (SUBSCRIBE / EVENT / ACK / ERROR frames).
    """
    from ..authority import Authority, AuthorityConfig
    from ..authority.server import serve as run_server
    from ..telemetry import setup_tracing

    setup_tracing("missionweave-authority")  # from OTEL_*; off unless configured
    key_path = key or db.with_name("authority.key")
    if key is not None and not key.exists():
        raise CliError(f"no key file at {key}")
    signing_key = load_or_create_key(key_path, create=key is None)
    authority = Authority(db, signing_key, AuthorityConfig(online_window=online_window))
    typer.echo(f"Authority {signing_key.public_key} serving {db} on http://{host}:{port}", err=True)
    try:
        run_server(authority, host=host, port=port)
    finally:
        authority.close()
