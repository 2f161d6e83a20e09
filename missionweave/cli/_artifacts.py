"""``missionweave artifacts …``: fetch verified Artifacts through the Authority's grants and
trace their provenance from the Group's log; and the store options of the processes that hold
the store (``authority serve``, ``coordinator``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..protocol import SigningKey
from ._common import CliError, load_key, run_client_command
from ._options import AUTHORITY_URL, DATA_DIR_ENV, READER_KEY, READER_KEY_ENV

if TYPE_CHECKING:
    from ..artifacts import ArtifactStore

app = typer.Typer(
    help="Fetch a Group's content-addressed Artifacts (hash-verified) through the Authority and "
    "show their provenance.",
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
        where = (
            "given by --store"
            if store
            else (
                f"${DATA_DIR_ENV}/artifacts"
                if os.environ.get(DATA_DIR_ENV)
                else "the default ./data/artifacts, relative to the current directory"
            )
        )
        raise CliError(
            f"no artifact store at {root.resolve()} ({where}): give the store's directory with "
            f"--store DIR, or set {DATA_DIR_ENV} to the data directory of `missionweave dev up`"
        )
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


_GROUP = typer.Option(..., "--group", "-g", help="The Group whose Artifact it is.")
_MISSION = typer.Option(
    None,
    "--mission",
    help="Read for this Mission's context (required unless --key is an operator's): one you "
    "direct or review, or one you worked in; another Mission's content is not found (MW-13.3-d).",
)


def _reader_key(key: Path | None) -> SigningKey:
    if key is None:
        raise CliError(
            f"reads are signed: pass --key (or set {READER_KEY_ENV}) with the PEM key of a "
            "member of the Group; with `dev up`, <data-dir>/keys/coordinator.pem"
        )
    return load_key(key)


# typer shows a command's help as written: paragraphs apart, each on one line (it wraps them)
_GET_HELP = (
    "Fetch an Artifact of a Group to a file, verifying its SHA-256 (MW-13.1-d).\n\n"
    "The read is signed with --key, a member's (or an operator's): the Authority checks the "
    "membership and, for a member, that it may read --mission and the Artifact is readable "
    "there (an operator may leave --mission out), and grants "
    "this one object for a few minutes. Content is addressed per Group: a hash names nothing "
    "of another Group's.\n\n"
    "OUTPUT may be an existing directory: the Artifact is then written into it, named by its "
    "hash.\n\n"
    "Exits 1 with one line when the bytes do not match the hash (OUTPUT is then left "
    "untouched) or the Authority refuses the read, 2 when the Group holds no such Artifact."
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
    group: str = _GROUP,
    key: Path | None = READER_KEY,
    authority_url: str = AUTHORITY_URL,
    mission: str | None = _MISSION,
) -> None:
    """Fetch an Artifact to ``output`` through the Authority's grant, verifying its SHA-256
    (MW-13.1-d); exit 1 on a mismatch or a refusal, 2 when missing."""
    signing_key = _reader_key(key)
    if output.is_dir():
        output = output / content_hash  # like cp FILE DIR (the hash is checked before use)
        if output.is_dir():
            raise CliError(f"{output} is a directory")
    above = next((p for p in output.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise CliError(f"cannot write {output}: {above} is not a directory")
    run_client_command(_get(content_hash, output, group, signing_key, authority_url, mission))


async def _get(
    content_hash: str,
    output: Path,
    group: str,
    key: SigningKey,
    url: str,
    mission: str | None,
) -> None:
    from ..artifacts import (
        ArtifactAccessDenied,
        ArtifactIntegrityError,
        ArtifactNotFound,
        ArtifactStoreError,
    )
    from ..authority.client import AuthorityClient, AuthorityUnavailable
    from ..worker import authority_artifacts

    async with AuthorityClient(url, signing_key=key) as client:
        artifacts = authority_artifacts(client, group, mission_id=mission)
        try:
            ref = await artifacts.get_to_file(content_hash, output)
        except (ValueError, ArtifactNotFound) as exc:
            raise CliError(str(exc)) from None
        except (ArtifactIntegrityError, ArtifactAccessDenied, ArtifactStoreError) as exc:
            raise CliError(str(exc), exit_code=1) from None
        except AuthorityUnavailable:
            raise CliError(f"cannot reach the Authority at {url}") from None
        except OSError as exc:  # e.g. OUTPUT's parent is a file, or not writable
            raise CliError(f"{exc.filename or output}: {exc.strerror or exc}") from None
    typer.echo(f"ok {ref.hash} {ref.size} bytes -> {output}")


_LINEAGE_HELP = (
    "Print an Artifact's provenance (MW-13.1-c): an indented tree of the Artifacts it was "
    "derived from, read from the signed manifests of the Group's artifact.published Events. "
    "--mermaid prints a Mermaid flowchart instead.\n\n"
    "The reads are signed with --key, a member's (or an operator's): only the Group's members "
    "see its lineage. Manifests whose signature does not verify are not followed; they are "
    'shown as "(unverified)". An ancestor without a manifest is shown as "(no manifest)".\n\n'
    "Exits 2 when HASH itself has no manifest in the Group's log."
)


@app.command("lineage", help=_LINEAGE_HELP)
def lineage(
    content_hash: str = _HASH,
    group: str = _GROUP,
    key: Path | None = READER_KEY,
    authority_url: str = AUTHORITY_URL,
    mermaid: bool = typer.Option(False, "--mermaid", help="Print a Mermaid flowchart."),
) -> None:
    """Print an Artifact's provenance tree (MW-13.1-c) from the signed manifests of the
    Group's log, or a Mermaid flowchart; exit 2 when the Artifact itself has no manifest."""
    from ..protocol import is_hash

    signing_key = _reader_key(key)
    if not is_hash(content_hash):
        raise CliError(f"not a SHA-256 hex hash: {content_hash[:80]!r}")
    run_client_command(_lineage(content_hash, group, signing_key, authority_url, mermaid))


async def _lineage(content_hash: str, group: str, key: SigningKey, url: str, mermaid: bool) -> None:
    from ..artifacts import LineageStatus, LogManifests, build_lineage, to_mermaid, to_text
    from ..authority.client import AuthorityClient, AuthorityRequestError, AuthorityUnavailable
    from ..protocol import Event

    events: list[Event] = []
    async with AuthorityClient(url, signing_key=key) as client:
        try:
            head, _ = await client.head(group)
            while not events or events[-1].seq < head:
                page = await client.events(group, events[-1].seq if events else 0, 1000)
                if not page:
                    break
                events += page
        except AuthorityUnavailable:
            raise CliError(f"cannot reach the Authority at {url}") from None
        except AuthorityRequestError as exc:
            raise CliError(f"{exc.code}: {exc.reason}", exit_code=1) from None
    tree = build_lineage(LogManifests(events), content_hash)
    if tree.status is LineageStatus.NO_MANIFEST:
        raise CliError(f"no manifest for artifact {content_hash} in group {group}")
    typer.echo(to_mermaid(tree) if mermaid else to_text(tree), nl=False)
