"""Shared CLI helpers: errors, defaults, key loading."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from ..protocol import SignatureError, SigningKey

DEFAULT_URL = os.environ.get("MISSIONWEAVE_AUTHORITY_URL", "http://127.0.0.1:8787")


class CliError(Exception):
    """A user-facing error: printed as one line, exit code ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def load_or_create_key(path: Path, *, create: bool) -> SigningKey:
    """Load the Ed25519 key at ``path``; with ``create``, generate it (mode 0600) if missing.

    Raises:
        CliError: the file is missing (and ``create`` is false) or is not an Ed25519 PEM key.
    """
    if not path.exists():
        if not create:
            raise CliError(f"no key file at {path}")
        key = SigningKey.generate()
        key.to_file(path)
        typer.echo(f"created Authority key {path} (public {key.public_key})", err=True)
        return key
    try:
        return SigningKey.from_file(path)
    except SignatureError as exc:
        raise CliError(str(exc)) from None


def existing_db(path: Path) -> Path:
    """``path`` if it is an existing file, else :class:`CliError` (never create one by reading)."""
    if not path.is_file():
        raise CliError(f"no Authority database at {path}")
    return path
