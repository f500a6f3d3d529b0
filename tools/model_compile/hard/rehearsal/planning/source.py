"""Lines of the recipe's engine the rehearsal's advice points at, read with `ast` (parsed, never imported)."""

from __future__ import annotations

import ast
from pathlib import Path


def _method(path: Path, cls: str, method: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    return None


def model_call_line(path: Path, cls: str, method: str, model_var: str) -> int | None:
    """The line of the first call of the model inside `cls.method` (`self.model(...)`, `model(...)`, or the
    name prepare_model() gives it), where a keyword for the model's forward goes; else the `def` line."""
    found = _method(path, cls, method)
    if found is None:
        return None
    names = {"model", model_var}
    calls = [
        node
        for node in ast.walk(found)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id in names)
            or (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in names
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
            )
        )
    ]
    return min((c.lineno for c in calls), default=found.lineno)
