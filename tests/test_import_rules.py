"""The package boundaries hold (issue 16): no module imports another package's private module.

``lint-imports`` (``make lint``, contracts in ``pyproject.toml``) checks which package may import
which; this test checks the rule import-linter has no contract for: a module whose name starts
with ``_`` is private to the package that holds it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import missionweave

ROOT = Path(missionweave.__file__).parent


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path`` (relative ones resolved)."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
            found.append((node.lineno, base))
    return found


def private_imports_across_packages(root: Path = ROOT) -> list[str]:
    """``file:line imports module`` for each import of a private module from outside its
    package."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        importer = _module_name(path, root)
        for line, target in _imports(path, root):
            parts = target.split(".")
            if parts[0] != "missionweave":
                continue
            for i, part in enumerate(parts[1:], start=1):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if not (importer == owner or importer.startswith(owner + ".")):
                        private = ".".join(parts[: i + 1])
                        bad.append(f"{path.relative_to(root.parent)}:{line} imports {private}")
                    break
    return sorted(set(bad))


def test_no_private_module_is_imported_from_another_package() -> None:
    assert private_imports_across_packages() == []


def test_the_check_finds_a_private_import(tmp_path: Path) -> None:
    """The check itself: a module importing another package's private module is reported."""
    pkg = tmp_path / "missionweave"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    for d in (pkg, pkg / "a", pkg / "b"):
        (d / "__init__.py").write_text("")
    (pkg / "a" / "_inner.py").write_text("X = 1\n")
    (pkg / "a" / "user.py").write_text("from ._inner import X\n")
    (pkg / "b" / "user.py").write_text(
        "from ..a._inner import X\nfrom missionweave.a import _inner\n"
    )
    assert private_imports_across_packages(pkg) == [
        "missionweave/b/user.py:1 imports missionweave.a._inner",
        "missionweave/b/user.py:2 imports missionweave.a._inner",
    ]


def test_an_agent_loads_no_authority_server_code() -> None:
    """Importing the agent runtime or the Authority's client loads neither the Authority's core
    nor its HTTP front (issue 16: the client and the worker imported the core)."""
    import subprocess
    import sys

    probe = (
        "import sys, missionweave.worker, missionweave.authority.client\n"
        "print(sorted(m for m in sys.modules if m.startswith(('missionweave.authority.core',"
        " 'missionweave.authority.http', 'fastapi', 'uvicorn'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
