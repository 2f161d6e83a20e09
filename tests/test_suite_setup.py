"""The suite's own set-up: ``[tool.pytest.ini_options]`` in ``pyproject.toml`` and the xdist
groups of ``tests/conftest.py``."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from _pytest.assertion.rewrite import AssertionRewritingHook

from tests.conftest import ONE_WORKER_SERVERS


def test_installed_packages_are_not_assertion_rewritten() -> None:
    """Plugins are named, not autoloaded, so pytest rewrites the tests' asserts and nothing
    else they import: rewriting schemathesis (a plugin's package) raised ``SystemError: AST
    constructor recursion depth mismatch`` on CPython 3.11.7."""
    for package in (schemathesis, hypothesis):
        assert package.__spec__ is not None
        assert not isinstance(package.__spec__.loader, AssertionRewritingHook), package
    assert isinstance(__spec__.loader, AssertionRewritingHook)  # this module is rewritten


def test_a_test_of_no_shared_fixture_is_in_no_xdist_group(
    request: pytest.FixtureRequest,
) -> None:
    assert list(request.node.iter_markers("xdist_group")) == []


@pytest.fixture(scope="module")
def _module_wide() -> str:
    return "set up once per worker"


def test_a_test_of_a_module_fixture_runs_in_its_files_group(
    request: pytest.FixtureRequest, _module_wide: str
) -> None:
    (group,) = request.node.iter_markers("xdist_group")
    assert group.args == ("tests/test_suite_setup.py",)


def test_the_tests_of_a_heavy_session_server_share_one_group(
    request: pytest.FixtureRequest,
) -> None:
    """Every collected test that uses one of :data:`ONE_WORKER_SERVERS` is in its group
    (so one worker starts that server), whatever its file."""
    for item in request.session.items:
        used = [f for f in ONE_WORKER_SERVERS if f in getattr(item, "fixturenames", ())]
        if used:
            mark = item.get_closest_marker("xdist_group")
            assert mark is not None and mark.args == (used[0],), item.nodeid
