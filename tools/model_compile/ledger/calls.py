"""Calls of an expression in evaluation order, and the argument a step acts on (for the ledger walker)."""

from __future__ import annotations

import ast


def first_arg(call: ast.Call, keyword: str) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return None


def looks_like_function(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Attribute) and expr.attr in ("forward", "__call__"):
        return True
    if isinstance(expr, ast.Lambda):
        return True
    return False


# Nodes with no call beneath them, by exact type (parsed trees hold no subclasses of these).
_LEAVES = frozenset(
    {ast.Name, ast.Constant}
    | {
        c
        for base in (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
        for c in base.__subclasses__()
    }
)
_SCOPES = frozenset({ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})


def calls_in_order(expr: ast.expr, kept: bool) -> list[tuple[ast.Call, bool]]:
    """Calls of an expression in evaluation order (inner first), with whether
    each call's result is used (passed on, assigned, returned)."""
    out: list[tuple[ast.Call, bool]] = []
    _visit_calls(expr, kept, out)
    return out


def _visit_calls(node: ast.AST, used: bool, out: list[tuple[ast.Call, bool]]) -> None:
    """A module-level function, not a closure: a closure that calls itself is a reference cycle."""
    kind = type(node)
    while kind is ast.Attribute:  # `a.b.c`: only the innermost value can hold a call
        node = node.value  # type: ignore[attr-defined]
        kind = type(node)
    if kind in _LEAVES:
        return
    if kind is ast.Call:
        call: ast.Call = node  # type: ignore[assignment]
        _visit_calls(call.func, True, out)
        for arg in call.args:
            _visit_calls(arg, True, out)
        for kw in call.keywords:
            _visit_calls(kw.value, True, out)
        out.append((call, used))
        return
    if kind in _SCOPES:
        return
    if kind in _COMPREHENSIONS:
        for gen in node.generators:  # type: ignore[attr-defined]
            _visit_calls(gen.iter, True, out)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.comprehension):
                _visit_calls(child, False, out)
        return
    for child in ast.iter_child_nodes(node):
        _visit_calls(child, used, out)
