"""``missionweave keys …``: Ed25519 key files."""

from __future__ import annotations

from pathlib import Path

import typer

from ..protocol import SignatureError, SigningKey
from ._common import CliError

app = typer.Typer(help="Create and inspect Ed25519 key files (PKCS#8 PEM).", no_args_is_help=True)


@app.command("generate")
def generate(
    path: Path = typer.Argument(..., help="Where to write the private key (mode 0600)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a new private key and print its public key (base64url)."""
    if path.exists() and not force:
        raise CliError(f"{path} exists; pass --force to overwrite it")
    key = SigningKey.generate()
    key.to_file(path)
    typer.echo(key.public_key)


@app.command("public")
def public(path: Path = typer.Argument(..., help="A private key file.")) -> None:
    """Print the public key (base64url) of a private key file."""
    if not path.is_file():
        raise CliError(f"no key file at {path}")
    try:
        typer.echo(SigningKey.from_file(path).public_key)
    except SignatureError as exc:
        raise CliError(str(exc)) from None
