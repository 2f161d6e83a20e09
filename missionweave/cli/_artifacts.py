"""``missionweave artifacts …``: fetch verified Artifacts and trace their provenance."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ._common import CliError
from ._options import DATA_DIR_ENV

if TYPE_CHECKING:
    from ..artifacts import ArtifactStore

app = typer.Typer(
    help="Fetch content-addressed Artifacts (hash-verified) and show their provenance.",
    no_args_is_help=True,
)

_STORE_HELP = (
    "Filesystem artifact store. Default: $MISSIONWEAVE_DATA_DIR/artifacts, else ./data/artifacts."
)
_S3_HELP = (
    "S3 API endpoint host:port (selects the S3 store; credentials from "
    "MISSIONWEAVE_S3_ACCESS_KEY / MISSIONWEAVE_S3_SECRET_KEY)."
)


def default_store_path(fallback: Path | None = None) -> Path:
    """``$MISSIONWEAVE_DATA_DIR/artifacts``; without that variable ``fallback``, else
    ``./data/artifacts`` (``dev up``'s store when run from the same directory)."""
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir:
        return Path(data_dir) / "artifacts"
    return fallback if fallback is not None else Path("data") / "artifacts"


def open_store(
    store: Path | None,
    s3_endpoint: str | None,
    s3_bucket: str | None,
    s3_secure: bool,
    *,
    create: bool = False,
) -> ArtifactStore:
    """The store the options select (imported lazily: ``--help`` stays fast).

    Args:
        store: the filesystem store's directory (default :func:`default_store_path`).
        s3_endpoint: an S3 API ``host:port``; selects the S3 store (bucket ``s3_bucket``,
            credentials from ``MISSIONWEAVE_S3_ACCESS_KEY`` / ``MISSIONWEAVE_S3_SECRET_KEY``).
        s3_bucket: the bucket, which must exist.
        s3_secure: HTTPS for the endpoint.
        create: a missing directory is fine (a writer creates it on its first put).

    Raises:
        CliError: incomplete S3 options, or no directory at ``store`` (unless ``create``).
    """
    from ..artifacts import FilesystemStore, S3Store

    if s3_endpoint:
        if not s3_bucket:
            raise CliError("--s3-endpoint needs --s3-bucket")
        access = os.environ.get("MISSIONWEAVE_S3_ACCESS_KEY")
        secret = os.environ.get("MISSIONWEAVE_S3_SECRET_KEY")
        if not access or not secret:
            raise CliError("set MISSIONWEAVE_S3_ACCESS_KEY and MISSIONWEAVE_S3_SECRET_KEY")
        return S3Store(
            s3_endpoint, access, secret, s3_bucket, secure=s3_secure, create_bucket=False
        )
    root = store or default_store_path()
    if root.exists() and not root.is_dir():
        raise CliError(f"{root} is not a directory")
    if not root.is_dir() and not create:
        raise CliError(f"no artifact store at {root}")
    return FilesystemStore(root)


STORE = typer.Option(None, "--store", help=_STORE_HELP)
S3_ENDPOINT = typer.Option(None, "--s3-endpoint", help=_S3_HELP)
S3_BUCKET = typer.Option(None, "--s3-bucket", help="S3 bucket (with --s3-endpoint).")
S3_SECURE = typer.Option(False, "--s3-secure", help="Use HTTPS for the S3 endpoint.")
_HASH = typer.Argument(..., metavar="HASH", help="SHA-256 hex of the content.")


def artifacts_option(use: str, default: str) -> Any:
    """The ``--artifacts DIR`` option of ``worker`` and ``coordinator``: the filesystem store
    the agents publish to and the coordinator's review verifies in (the S3 options select a
    bucket instead). ``use`` says what this command does with it, ``default`` where it is
    without the option."""
    return typer.Option(
        None,
        "--artifacts",
        metavar="DIR",
        help=f"Filesystem artifact store {use}; agents and the coordinator must share it. "
        f"Default: {default}.",
    )


def _store_name(store: Path | None, s3_endpoint: str | None, s3_bucket: str | None) -> str:
    """Where the options point, for messages: ``s3://bucket`` or the store's directory."""
    return f"s3://{s3_bucket}" if s3_endpoint else str(store or default_store_path())


# typer shows a command's help as written: paragraphs apart, each on one line (it wraps them)
_GET_HELP = (
    "Fetch an Artifact to a file, verifying its SHA-256 (MW-13.1-d).\n\n"
    "OUTPUT may be an existing directory: the Artifact is then written into it, named by its "
    "hash.\n\n"
    "Exits 1 with one line when the stored bytes do not match the hash (OUTPUT is then left "
    "untouched), 2 when the Artifact or the store is missing."
)


@app.command("get", help=_GET_HELP)
def get(
    content_hash: str = _HASH,
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        metavar="OUTPUT",
        help="File to write, or an existing directory to write HASH into.",
    ),
    store: Path | None = STORE,
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
) -> None:
    """Fetch an Artifact to ``output`` (a file, or an existing directory to write it into as
    ``<hash>``), verifying its SHA-256 (MW-13.1-d); exit 1 on a mismatch, 2 when missing."""
    from ..artifacts import ArtifactIntegrityError, ArtifactNotFound

    backend = open_store(store, s3_endpoint, s3_bucket, s3_secure)
    if output.is_dir():
        output = output / content_hash  # like cp FILE DIR (the hash is checked before use)
        if output.is_dir():
            raise CliError(f"{output} is a directory")
    above = next((p for p in output.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise CliError(f"cannot write {output}: {above} is not a directory")
    try:
        ref = backend.get_to_file(content_hash, output)
    except (ValueError, ArtifactNotFound) as exc:
        raise CliError(str(exc)) from None
    except ArtifactIntegrityError as exc:
        raise CliError(str(exc), exit_code=1) from None
    except OSError as exc:  # e.g. OUTPUT's parent is a file, or not writable
        raise CliError(f"{exc.filename or output}: {exc.strerror or exc}") from None
    typer.echo(f"ok {ref.hash} {ref.size} bytes -> {output}")


_LINEAGE_HELP = (
    "Print an Artifact's provenance (MW-13.1-c): an indented tree of the Artifacts it was "
    "derived from, read from their signed manifests. --mermaid prints a Mermaid flowchart "
    "instead.\n\n"
    "Manifests whose signature does not verify are not followed; they are shown as "
    '"(unverified)". An ancestor without a manifest is shown as "(no manifest)".\n\n'
    "Exits 2 when HASH itself has no manifest in the store."
)


@app.command("lineage", help=_LINEAGE_HELP)
def lineage(
    content_hash: str = _HASH,
    store: Path | None = STORE,
    mermaid: bool = typer.Option(False, "--mermaid", help="Print a Mermaid flowchart."),
    s3_endpoint: str | None = S3_ENDPOINT,
    s3_bucket: str | None = S3_BUCKET,
    s3_secure: bool = S3_SECURE,
) -> None:
    """Print an Artifact's provenance tree (MW-13.1-c) from the signed manifests in the
    store, or a Mermaid flowchart; exit 2 when the Artifact itself has no manifest."""
    from ..artifacts import ManifestIndex, to_mermaid, to_text

    backend = open_store(store, s3_endpoint, s3_bucket, s3_secure)
    try:
        tree = ManifestIndex(backend).lineage(content_hash)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if tree.status == "no_manifest":
        where = _store_name(store, s3_endpoint, s3_bucket)
        raise CliError(f"no manifest for artifact {content_hash} in {where}")
    typer.echo(to_mermaid(tree) if mermaid else to_text(tree), nl=False)
