"""Small LibCST helpers shared by the generate edits.

Dotted names and call names of expressions, 1-based line spans of a parsed
module's nodes (the ledger's `ast` line numbers agree with them), and a few
one-statement helpers (what a statement assigns or returns, a blank line above).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from model_compile.errors import InputError

_Node = TypeVar("_Node", bound=cst.CSTNode)


def dotted(expr: cst.BaseExpression) -> str | None:
    """`a.b.c` for a name/attribute chain (`super().__init__` too), else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        if base is None:
            if isinstance(expr.value, cst.Call):  # super().__init__
                inner = dotted(expr.value.func)
                return f"{inner}().{expr.attr.value}" if inner else None
            return None
        return f"{base}.{expr.attr.value}"
    return None


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        if name:
            self.names.append(name)


def call_names(node: cst.CSTNode) -> list[str]:
    """Dotted names of the calls in `node`, not looking into nested functions or lambdas."""
    v = _Calls()
    node.visit(v)
    return v.names


# -- the ledger, read as source lines -----------------------------------------
Positions = Mapping[cst.CSTNode, CodeRange]


def positions(module: cst.Module) -> Positions:
    """1-based line spans of the module's own nodes (the ledger's `ast` lines agree)."""
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def span(node: cst.CSTNode, pos: Positions) -> tuple[int, int]:
    """First and last line of `node`."""
    r = pos[node]
    return r.start.line, r.end.line


def index_at(body: Sequence[cst.CSTNode], line: int, pos: Positions) -> int | None:
    """Index of the statement of `body` whose span holds `line`."""
    for i, s in enumerate(body):
        lo, hi = span(s, pos)
        if lo <= line <= hi:
            return i
    return None


# -- single statements ---------------------------------------------------------
def find_method(cls: cst.ClassDef, name: str) -> tuple[int, cst.FunctionDef] | None:
    """Index in the class body and node of the method `name`, if the class defines it."""
    for i, s in enumerate(cls.body.body):
        if isinstance(s, cst.FunctionDef) and s.name.value == name:
            return i, s
    return None


def blank(stmt: _Node) -> _Node:
    """Give a statement one blank line above it unless it already has leading lines."""
    # Every concrete statement is one of these two; BaseStatement itself declares no leading_lines.
    has_lines = isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and bool(stmt.leading_lines)
    if has_lines:
        return stmt
    return stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)])


def assigned_name(stmt: cst.CSTNode) -> str | None:
    """The variable a lone `x = ...` / `x: T = ...` statement binds, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
            return small.targets[0].target.value
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            return small.target.value
    return None


def return_of(stmt: cst.CSTNode) -> cst.Return | None:
    """The `return` of a statement line that is only a return, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Return):
        return stmt.body[0]
    return None


def first_line(module: cst.Module, stmt: cst.CSTNode) -> str:
    """The statement's first source line, stripped (for messages)."""
    return module.code_for_node(stmt).strip().splitlines()[0]


def parse_statements(text: str, what: str) -> list[cst.BaseStatement]:
    """Statements of rendered template `what`; refuses code that does not parse."""
    try:
        return list(cst.parse_module(text).body)
    except cst.ParserSyntaxError as exc:
        raise InputError(f"template {what} rendered code that does not parse: {exc.message}") from exc
