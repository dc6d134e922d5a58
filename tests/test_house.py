"""House rules that keep the code readable, checked on the source itself: short functions, and
imports of our own modules at the top of a module (a lazy import is the CLI's lazy group or a
heavy third-party library, not a way around a circle)."""

from __future__ import annotations

import ast
from pathlib import Path

WEBAPP = Path(__file__).resolve().parent.parent / "webapp"
LONG = 40  # lines
MAX_LONG = 5  # functions over LONG lines in all of webapp/
MAX_INNER_IMPORTS = 15  # imports of webapp modules inside functions in all of webapp/


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(WEBAPP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((f"{path.relative_to(WEBAPP.parent)}:{node.lineno} {node.name}", node))
    return found


def _own_module(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] == "webapp"
    return any(alias.name.split(".")[0] == "webapp" for alias in node.names)


def test_functions_stay_short():
    long = [
        f"{where} ({node.end_lineno - node.lineno + 1} lines)"
        for where, node in _functions()
        if node.end_lineno - node.lineno + 1 > LONG
    ]
    assert len(long) <= MAX_LONG, "split these functions:\n" + "\n".join(long)


def test_our_modules_are_imported_at_the_top():
    inner = [
        f"{where}: line {sub.lineno}"
        for where, node in _functions()
        for sub in ast.walk(node)
        if isinstance(sub, ast.Import | ast.ImportFrom) and _own_module(sub)
    ]
    assert len(inner) <= MAX_INNER_IMPORTS, "move these imports to the top:\n" + "\n".join(inner)
