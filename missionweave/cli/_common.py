"""Shared CLI helpers: errors, key loading, reaching Temporal and the Authority, running a
client command and serving until Ctrl-C. The shared options are in :mod:`._options`."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from ..protocol import SignatureError, SigningKey

if TYPE_CHECKING:
    from temporalio.client import Client


class CliError(Exception):
    """A user-facing error: printed as one line, exit code ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def load_key(path: Path) -> SigningKey:
    """Load an Ed25519 PEM key (an agent's, the coordinator's, an owner's).

    Raises:
        CliError: missing or not an Ed25519 key.
    """
    if not path.is_file():
        raise CliError(f"no key file at {path}")
    try:
        return SigningKey.from_file(path)
    except SignatureError as exc:
        raise CliError(str(exc)) from None


def load_or_create_key(
    path: Path, *, create: bool, what: str = "key", missing_hint: str = ""
) -> SigningKey:
    """Load the Ed25519 key at ``path``; with ``create``, generate it (mode 0600) if nothing
    is there, exclusively (never through a link, never over a file that appeared meanwhile),
    and say so on stderr (``created <what> <path> (public …)``).

    Raises:
        CliError: the file is missing (and ``create`` is false; ``missing_hint`` follows the
            message) or is not an Ed25519 PEM key; a link stands where a new key would go.
    """
    if not path.exists() and create:
        key = SigningKey.generate()
        try:
            key.to_file(path, exclusive=True)
        except FileExistsError:
            raise CliError(f"{path}: not a key file (a link, or created meanwhile)") from None
        typer.echo(f"created {what} {path} (public {key.public_key})", err=True)
        return key
    if not path.exists():
        raise CliError(f"no key file at {path}{missing_hint}")
    return load_key(path)


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


def exit_now(message: str, code: int) -> NoReturn:
    """End the command at once with ``error: message`` and ``code``, whatever still runs (a
    Temporal Worker that cannot drain, a handler that does not pause). In-process (tests,
    ``CliRunner``) it raises :class:`CliError` instead."""
    if not _standalone():
        raise CliError(message, exit_code=code)
    typer.echo(f"error: {message}", err=True)
    _finish(code)


def first_line(exc: BaseException) -> str:
    """The first line of an error's message, without the Rust core's ``tonic::`` detail."""
    text = str(exc).strip()
    return text.splitlines()[0].split(": tonic::")[0] if text else type(exc).__name__


def setup_cli_tracing(service_name: str) -> None:
    """Configure tracing from ``OTEL_*`` (off unless configured); a setting that cannot be
    honoured is a :class:`CliError`."""
    from ..telemetry import TelemetryError, setup_tracing

    try:
        setup_tracing(service_name)
    except TelemetryError as exc:
        raise CliError(str(exc)) from None


def start_metrics(
    port: int | None,
    host: str,
    default: int | None = None,
    *,
    off: bool = False,
    announce: bool = True,
) -> str | None:
    """Serve ``GET /metrics`` on ``host:port`` (0: any free port, as for every port of the CLI;
    ``None``, not given: ``default``, where ``None`` serves none) unless ``off``
    (``--no-metrics``) and, when ``announce``, say where on stderr (``dev up`` prints it in
    its banner instead, once the stack is up); its URL, or ``None``.

    Raises:
        CliError: the port given cannot be bound, or both a port and ``off`` are given. A
            ``default`` port that is taken (another process of this machine serves its
            metrics there) is a warning: no endpoint.
    """
    if off:
        if port is not None:
            raise CliError("--metrics-port and --no-metrics: give one of them")
        return None
    chosen = default if port is None else port
    if chosen is None:
        return None
    from ..metrics import MetricsError, serve_metrics

    try:
        url = serve_metrics(chosen, host).url
    except MetricsError as exc:
        if port is not None:
            raise CliError(
                f"{exc} (give another --metrics-port, 0 for any free one, or --no-metrics)"
            ) from None
        typer.echo(
            f"warning: {exc}: no metrics endpoint (give --metrics-port, 0 for any free one)",
            err=True,
        )
        return None
    if announce:
        typer.echo(f"metrics at {url}", err=True)
    return url


async def connect_temporal(address: str, namespace: str, *, timeout_s: float = 15.0) -> Client:
    """A Temporal client (pydantic data converter, tracing interceptor) of ``address``.

    Raises:
        CliError: it cannot be reached within ``timeout_s`` seconds.
    """
    from ..dev import connect_client

    try:
        async with asyncio.timeout(timeout_s):
            return await connect_client(address, namespace)
    except Exception as exc:  # the SDK raises RuntimeError/RPCError variants
        raise CliError(f"cannot reach Temporal at {address}: {first_line(exc)}") from None


async def check_authority(url: str) -> None:
    """Ask the Authority at ``url`` who it is.

    Raises:
        CliError: it does not answer.
    """
    from ..authority.client import AuthorityClient, AuthorityUnavailable

    try:
        async with AuthorityClient(url, timeout=5.0) as probe:
            await probe.info()
    except AuthorityUnavailable:
        raise CliError(f"cannot reach the Authority at {url}") from None


async def start_service(
    service_name: str, authority_url: str, temporal_address: str, namespace: str
) -> Client:
    """The start of a process that serves both (``worker``, ``coordinator``): tracing as
    ``service_name`` (:func:`setup_cli_tracing`), the Authority answering
    (:func:`check_authority`), then its Temporal client (:func:`connect_temporal`).

    Raises:
        CliError: a tracing setting cannot be honoured, or either service does not answer.
    """
    setup_cli_tracing(service_name)
    await check_authority(authority_url)
    return await connect_temporal(temporal_address, namespace)


async def serve_until_signalled(
    serve: Coroutine[Any, Any, None],
    stop: Callable[[], object],
    *,
    what: str,
    stop_timeout: float,
) -> None:
    """Run ``serve`` (a Worker, an agent runtime) until it returns; Ctrl-C or SIGTERM calls
    ``stop()`` (a function or a coroutine function), which makes it return after a clean stop.

    A clean stop needs the servers: handlers report to the Authority, the Temporal Worker
    reports its activities. When they are gone (or frozen) it can take minutes or never end,
    so the command ends anyway — status 1, one line — ``stop_timeout`` seconds after the
    first signal, and at once (status 130) on a second one. What was not reported is what a
    crash leaves behind: leases expire and the work is offered again.

    Raises:
        Exception: whatever ``serve`` raised.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(serve)
    first, second = asyncio.Event(), asyncio.Event()
    stopping: set[asyncio.Future[Any]] = set()

    def on_signal() -> None:
        if first.is_set():
            second.set()
            return
        first.set()
        typer.echo(f"stopping {what}; Ctrl-C again exits at once", err=True)
        result = stop()
        if inspect.isawaitable(result):
            stopping.add(asyncio.ensure_future(result))

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal)
    waiters = [asyncio.create_task(first.wait()), asyncio.create_task(second.wait())]
    try:
        await asyncio.wait({task, waiters[0]}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            await asyncio.wait(
                {task, waiters[1]}, timeout=stop_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        if not task.done():
            task.cancel()  # in-process only: a standalone command exits below
            if second.is_set():
                exit_now(f"interrupted again: {what} exits without a clean stop", 130)
            exit_now(
                f"{what} did not stop within {stop_timeout:g} s (are the Authority and "
                "Temporal reachable?); exiting without a clean stop",
                1,
            )
        task.result()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        for w in waiters:
            w.cancel()


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
