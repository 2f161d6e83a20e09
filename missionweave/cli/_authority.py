"""``missionweave authority …``: run the Group Authority."""

from __future__ import annotations

from pathlib import Path

import typer

from ..metrics import AUTHORITY_METRICS_PORT
from ._artifacts import S3_BUCKET, S3_ENDPOINT, S3_SECURE, open_store
from ._common import CliError, load_key, load_or_create_key, start_metrics
from ._options import METRICS_HOST, authority_db_option, metrics_port_option

#: The environment variable of ``--operator-key``.
OPERATOR_KEYS_ENV = "MISSIONWEAVE_OPERATOR_KEYS"

app = typer.Typer(help="Run the Group Authority (signed event log).", no_args_is_help=True)


@app.command("serve")
def serve(
    db: str = authority_db_option(
        "SQLite database file (created if missing), or a postgresql:// URL: several "
        "replicas may serve one PostgreSQL database (each with the same --key)."
    ),
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
    operator_key: list[str] = typer.Option(
        [],
        "--operator-key",
        metavar="KEY",
        envvar=OPERATOR_KEYS_ENV,
        help="An operator's Ed25519 public key (base64url), or a PEM key file whose public key "
        "it is (repeatable; the environment variable takes them separated by spaces). Only an "
        "operator may create a Group, and an operator may read every Group. None: no Group can "
        "be created.",
    ),
    tls_cert: Path | None = typer.Option(
        None, "--tls-cert", help="Serve HTTPS/WSS with this PEM certificate (chain)."
    ),
    tls_key: Path | None = typer.Option(
        None, "--tls-key", help="The PEM private key of --tls-cert."
    ),
    artifacts: Path | None = typer.Option(
        None,
        "--artifacts",
        metavar="DIR",
        help="Filesystem artifact store the Authority guards and serves (members get one "
        "object at a time after its checks). Default: artifacts/ beside a SQLite --db; none "
        "with PostgreSQL (use the S3 options).",
    ),
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
    metrics_port: int | None = metrics_port_option(
        AUTHORITY_METRICS_PORT, "Commands, appends, commits, leases, reads, requests"
    ),
    metrics_host: str = METRICS_HOST,
) -> None:
    """Serve the Authority over HTTP and WebSocket (protocol section 16).

    Endpoints: POST /v1/commands, GET /v1/groups/{group}/events?after_sequence=N&limit=M,
    WebSocket /v1/stream (SUBSCRIBE / EVENT / ACK / ERROR frames). Every read is a signed
    request of a member of the Group it reads (or of an operator); see docs/authority.md,
    "Security model". Artifacts: the Authority alone holds the store (--artifacts or the S3
    bucket) and grants members one object at a time (GET /v1/groups/{group}/artifacts/{hash}).
    Operators scrape GET /metrics on --metrics-port (default 9464; docs/metrics.md).
    """
    from ..authority import Authority, AuthorityConfig
    from ..authority.http import serve as run_server
    from ..telemetry import setup_tracing

    setup_tracing("missionweave-authority")  # from OTEL_*; off unless configured
    from ..authority.core import is_url

    if is_url(db) and key is None:
        raise CliError("with a PostgreSQL --db, pass --key (every replica signs with it)")
    key_path = key or Path(db).with_name("authority.key")
    if key is not None and not key.exists():
        raise CliError(f"no key file at {key}")
    if (tls_cert is None) != (tls_key is None):
        raise CliError("--tls-cert and --tls-key go together")
    for path in (tls_cert, tls_key):
        if path is not None and not path.is_file():
            raise CliError(f"no file at {path}")
    operators = frozenset(_public_key(k) for v in operator_key for k in v.split())
    signing_key = load_or_create_key(key_path, create=key is None, what="Authority key")
    config = AuthorityConfig(online_window=online_window, operator_keys=operators)
    authority = Authority(db, signing_key, config)
    db = authority.db_path  # a URL without its password
    scheme = "https" if tls_cert else "http"
    typer.echo(
        f"Authority {signing_key.public_key} serving {db} on {scheme}://{host}:{port} "
        f"({len(operators)} operator key(s))",
        err=True,
    )
    if not operators:
        typer.echo(
            "warning: no --operator-key: nobody can create a Group on this Authority", err=True
        )
    tls = {"ssl_certfile": str(tls_cert), "ssl_keyfile": str(tls_key)} if tls_cert else {}
    if artifacts is None and not s3_endpoint and not is_url(db):
        artifacts = Path(db).with_name("artifacts")
    store = (
        open_store(artifacts, s3_endpoint, s3_bucket, s3_secure, create=True)
        if artifacts is not None or s3_endpoint
        else None
    )
    typer.echo(f"artifacts: {store!r}" if store else "warning: no artifact store", err=True)
    start_metrics(metrics_port, metrics_host, AUTHORITY_METRICS_PORT)
    try:
        run_server(authority, host=host, port=port, artifact_store=store, **tls)
    finally:
        authority.close()


def _public_key(value: str) -> str:
    """An operator key given as a base64url public key or as a PEM key file."""
    from ..protocol import SignatureError, b64u_encode, load_public_key

    if Path(value).is_file():
        return load_key(Path(value)).public_key
    try:
        return b64u_encode(load_public_key(value).public_bytes_raw())
    except SignatureError:
        raise CliError(
            f"--operator-key {value!r} is neither a key file nor an Ed25519 public key"
        ) from None
