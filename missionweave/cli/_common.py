"""Shared CLI helpers: errors, defaults, key loading."""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, NoReturn

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


def _standalone() -> bool:
    """Whether this is the ``missionweave`` process itself writing to its real stdout (not
    click's CliRunner nor pytest, which replace ``sys.stdout``)."""
    return sys.stdout is sys.__stdout__ and Path(sys.argv[0]).name == "missionweave"


def _finish(code: int) -> NoReturn:
    """End the process without interpreter teardown.

    temporalio's Rust core may still call into Python from its threads while CPython
    finalizes, which aborts a short-lived client process ("Fatal Python error:
    PyGILState_Release", temporalio/sdk-python#300). Exit handlers (logging, telemetry
    exporters) run first; only the teardown is skipped.
    """
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_client_command(work: Coroutine[Any, Any, int | None]) -> None:
    """Run a Temporal client command: its exit code is what ``work`` returns (``None``: 0);
    a :class:`CliError` is one line on stderr."""
    try:
        code = asyncio.run(work) or 0
    except CliError as exc:
        if not _standalone():
            raise
        typer.echo(f"error: {exc}", err=True)
        _finish(exc.exit_code)
    except KeyboardInterrupt:
        if not _standalone():
            raise
        _finish(130)
    if _standalone():
        _finish(code)
    if code:
        raise typer.Exit(code)
