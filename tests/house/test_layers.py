"""The projects domain (roject) knows nothing of the chat app built on it (rojos)."""

import ast
from pathlib import Path

import roject


def _imported_modules(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
    return modules


def test_roject_imports_nothing_from_rojos():
    """Root URLs include rojos by dotted string; no roject module imports it."""
    package = Path(roject.__file__).parent
    found = [
        f"{path.relative_to(package)}: {module}"
        for path in sorted(package.rglob("*.py"))
        for module in _imported_modules(path)
        if module == "rojos" or module.startswith("rojos.")
    ]
    assert found == []
