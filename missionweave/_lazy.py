"""Names a package loads from its submodules on first use (PEP 562), so that importing the
package does not import every part of it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, home: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the package's ``__name__``.
        home: public name → the submodule (relative to ``package``) that defines it.
        namespace: the package's ``globals()``; a loaded name is cached there.

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises ``AttributeError`` for a name not
        in ``home``.
    """

    def getattr_(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *home])

    return getattr_, dir_
