"""Session fixtures: the two Store backends of the Authority tests (see ``tests/pg.py``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import pg

#: Test modules that exercise the Authority itself: each of their tests runs once per backend.
BOTH_BACKENDS = (
    "test_authority_",
    "test_smoke",
    "test_groups",
    "test_context_packages",
    "test_store_",
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if not module.startswith(BOTH_BACKENDS) or "store_backend" not in metafunc.fixturenames:
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
