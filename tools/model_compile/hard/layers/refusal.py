"""Does the recipe's smoke helper refuse a machine without an accelerator? Read statically, never imported.

A smoke test that spawns distributed workers often goes through a helper of
the repository (`with distributed_env(...)`) that raises when the device is
the CPU. On a CPU-only machine such a smoke run costs its full start-up and
then says only that it refused; the preflight already knows the machine has
no accelerator, so the refusal is read from the helper's source instead: a
`raise` of a string that says GPUs/NPUs/an accelerator are required, under an
`if` that tests the device (`cpu`, `is_available`, `device_count`).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from model_compile.hard.layers.plan import ACCELERATOR_REFUSAL
from model_compile.parse.python import literal_or

_DEVICE_WORDS = ("cpu", "is_available", "device_count", "accelerator")
_MAX_BYTES = 2_000_000


@dataclass(frozen=True)
class Refusal:
    """A helper that refuses to run without an accelerator: its name, the message and where it raises."""

    helper: str
    message: str
    file: str
    line: int

    def describe(self) -> str:
        return f"{self.helper}() raises {self.message!r} on a CPU device ({self.file}:{self.line})"


def _parse(path: Path) -> ast.Module | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return None
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _module_file(module: str, roots: list[Path]) -> Path | None:
    rel = Path(*module.split("."))
    for root in roots:
        for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _message(node: ast.expr | None) -> str | None:
    """`RuntimeError("...")` -> 'RuntimeError: ...' when the string is a literal."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    arg = node.args[0]
    text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    if text is None and isinstance(arg, ast.JoinedStr):
        text = "".join(v.value for v in arg.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    if not text:
        return None
    name = ast.unparse(node.func)
    return f"{name}: {text}"


def _parameters(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, object]:
    """{parameter: its default (a literal), or `_NO_DEFAULT`}."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults: dict[str, object] = {a.arg: _NO_DEFAULT for a in [*positional, *args.kwonlyargs]}
    for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        defaults[a.arg] = _literal(d)
    for a, kd in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if kd is not None:
            defaults[a.arg] = _literal(kd)
    return defaults


_NO_DEFAULT = object()


def _literal(node: ast.expr) -> object:
    return literal_or(node, _NO_DEFAULT)


def _holds(test: ast.expr, values: dict[str, object]) -> bool:
    """False when an `and` operand that is a bare parameter (`allow_cpu`, `not allow_cpu`) is false or unknown
    for this call: the refusal then depends on the caller (the bundled example passes `allow_cpu=True`)."""
    operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for operand in operands:
        negated = isinstance(operand, ast.UnaryOp) and isinstance(operand.op, ast.Not)
        name = operand.operand if negated and isinstance(operand, ast.UnaryOp) else operand
        if isinstance(name, ast.Name) and name.id in values:
            value = values[name.id]
            if value is _NO_DEFAULT or bool(value) == negated:
                return False
    return True


def _refusal_in(func: ast.FunctionDef | ast.AsyncFunctionDef, call: dict[str, object]) -> tuple[str, int] | None:
    """The refusing raise of one function: under an `if` on the device, with a message naming an accelerator,
    that holds for the call the test makes (`call`: its keyword literals)."""
    values = {**_parameters(func), **call}
    for node in ast.walk(func):
        if not isinstance(node, ast.If):
            continue
        test = ast.unparse(node.test)
        if not any(word in test for word in _DEVICE_WORDS) or not _holds(node.test, values):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Raise):
                message = _message(stmt.exc)
                if message and ACCELERATOR_REFUSAL.search(message):
                    return message, stmt.lineno
    return None


def _call_keywords(tree: ast.Module, name: str) -> dict[str, object]:
    """The keyword literals of the test's first call of `name` (a non-literal one reads as unknown)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if callee == name:
                return {k.arg: _literal(k.value) for k in node.keywords if k.arg}
    return {}


def _called_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                out.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                out.add(node.func.attr)
    return out


def smoke_refusal(recipe_root: Path, repo_root: Path, test_file: Path) -> Refusal | None:
    """The helper the smoke test calls that refuses a CPU device, if the sources say so.

    Looks at the functions the test file defines and those it imports by name from the repository
    (`from pkg.testing.utils import distributed_env`), one level deep; only helpers the test calls count.
    """
    test = recipe_root / test_file
    tree = _parse(test)
    if tree is None:
        return None
    called = _called_names(tree)
    roots = [repo_root, recipe_root]
    candidates: list[tuple[str, str, ast.Module, Path]] = [(name, name, tree, test) for name in called]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            source = _module_file(node.module, roots)
            if source is None:
                continue
            module = _parse(source)
            if module is None:
                continue
            for alias in node.names:
                if (alias.asname or alias.name) in called:
                    candidates.append((alias.name, alias.asname or alias.name, module, source))
    for name, local, module, source in candidates:
        for node in module.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                hit = _refusal_in(node, _call_keywords(tree, local))
                if hit is not None:
                    return Refusal(name, hit[0], os.path.relpath(source, repo_root), hit[1])
    return None
