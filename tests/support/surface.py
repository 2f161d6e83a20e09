"""Pinning a package's public surface: names may be added deliberately, never lost."""

from __future__ import annotations

from collections.abc import Set
from types import ModuleType


def assert_surface(module: ModuleType, names: Set[str]) -> None:
    """``module.__all__`` is exactly ``names``, and the module has every one of them.

    Raises:
        AssertionError: a name was added, lost, or is exported but missing.
    """
    assert set(module.__all__) == names
    assert all(hasattr(module, n) for n in module.__all__)
