"""What the names of a walked function hold: aliases, model identities, loops.

The ledger walker keeps one `Frame` per function body (local aliases such as
`cfg = self.config.model.compile`, which model object each name holds, loop
variables) and a `Ctx` for where it is (gating conditions, branch arms, the
call chain). The functions here answer the questions the walker asks of them:
what an expression refers to once aliases are substituted, which model object
it evaluates to, and whether an assignment is a pure reference worth aliasing.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

from model_compile.ledger.classify import classify_call
from model_compile.ledger.models import Branch
from model_compile.parse.python import PyModule, dotted


@dataclass
class Frame:
    """Walker state for one function body."""

    module: PyModule
    aliases: dict[str, ast.expr] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)
    loops: dict[str, str] = field(default_factory=dict)
    returned: list[int | None] = field(default_factory=list)


@dataclass
class Ctx:
    """Where the walker is: gating conditions, branch arms, call chain."""

    conditions: tuple[str, ...] = ()
    branches: tuple[Branch, ...] = ()
    via: tuple[str, ...] = ()
    anchor: int | None = None
    reachable: bool = True
    depth: int = 0

    def but(self, **kw: Any) -> Ctx:
        """A copy with some fields changed (the walker makes one per statement: no __init__ call)."""
        new = object.__new__(Ctx)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(kw)
        return new


def negate(expr: ast.expr) -> ast.expr:
    """`not x` -> `x`; otherwise wrap in `not`."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return expr.operand
    return ast.UnaryOp(op=ast.Not(), operand=expr)


def is_false(expr: ast.expr) -> bool:
    """A constant test that never holds (`if False:`, `if 0:`, `if None:`)."""
    return isinstance(expr, ast.Constant) and expr.value in (False, 0, None)


def resolve(expr: ast.expr, frame: Frame) -> ast.expr:
    """Substitute local aliases into an expression (a copy; the expression itself when none occurs in it)."""
    if not frame.aliases:
        return expr
    aliases = frame.aliases
    if not any(isinstance(n, ast.Name) and n.id in aliases for n in ast.walk(expr)):
        return expr  # nothing to substitute: no copy

    return _Substitute(aliases).visit(copy.deepcopy(expr))


class _Substitute(ast.NodeTransformer):
    """Replace loaded names by (copies of) what they alias. At module level: a class made
    inside a function on every call is a reference cycle."""

    def __init__(self, aliases: dict[str, ast.expr]):
        self.aliases = aliases

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases:
            return copy.deepcopy(self.aliases[node.id])
        return node


def identity(expr: ast.expr | None, frame: Frame, _depth: int = 0, known_not_new: bool = False) -> int | None:
    """Which model object an expression evaluates to (None: not a model).

    `known_not_new`: the caller has just found `is_new_object(expr)` false, so
    the call is not classified a second time.
    """
    if expr is None or _depth > 8:  # aliases can chain into a cycle (x = y; y = z; z = x)
        return None
    key = dotted(expr)
    if key is not None:
        if key in frame.models:
            return frame.models[key]
        if isinstance(expr, ast.Name) and expr.id in frame.aliases:
            return identity(frame.aliases[expr.id], frame, _depth + 1)
        return None
    if isinstance(expr, ast.Call):
        if not known_not_new and _makes_new(expr):
            return None  # a new object; the caller assigns a fresh id
        if isinstance(expr.func, ast.Attribute):
            inner = identity(expr.func.value, frame, _depth + 1)
            if inner is not None and expr.func.attr not in ("parameters", "named_parameters", "state_dict"):
                return inner
        for arg in list(expr.args) + [k.value for k in expr.keywords]:
            ident = identity(arg, frame, _depth + 1)
            if ident is not None:
                return ident
    return None


def is_new_object(expr: ast.expr) -> bool:
    """A call that makes a new model object: a build, a copy, or a method called on one."""
    if not isinstance(expr, ast.Call):
        return False
    if _makes_new(expr):
        return True
    if isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Call):
        return is_new_object(expr.func.value)  # build(...).to(device)
    return False


def _makes_new(call: ast.Call) -> bool:
    """A build or a copy: the call's result is a new object."""
    return classify_call(call)[0] == "build" or (dotted(call.func) or "") in ("copy.deepcopy", "copy.copy", "deepcopy")


def root_name(expr: ast.expr) -> str | None:
    """The name an attribute/subscript/call chain starts from (`model` in `model.a[0].b()`)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def root_key(expr: ast.expr, frame: Frame, _depth: int = 0) -> str | None:
    """The longest dotted prefix of expr that names a tracked model."""
    node = expr
    while True:
        key = dotted(node)
        if key is not None and key in frame.models:
            return key
        if isinstance(node, ast.Name) and node.id in frame.aliases:
            return root_key(frame.aliases[node.id], frame, _depth + 1) if _depth < 8 else None
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            break
    root = root_name(expr)
    if root and root in frame.loops:
        # each of model.layers: the loop iterates over the model named first.
        text = frame.loops[root]
        head = text.split(".")[0].split("(")[0]
        return head if head in frame.models else None
    return None


def getattr_as_attribute(expr: ast.expr) -> ast.Attribute | None:
    """`getattr(x, "name"[, default])` read as `x.name`."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "getattr"
        and len(expr.args) >= 2
        and isinstance(expr.args[1], ast.Constant)
        and isinstance(expr.args[1].value, str)
        and expr.args[1].value.isidentifier()
    ):
        return ast.Attribute(value=expr.args[0], attr=expr.args[1].value, ctx=ast.Load())
    return None


def aliasable(expr: ast.expr) -> bool:
    """Pure references worth substituting: names, attribute chains, getattr(x, 'y')."""
    if dotted(expr) is not None:
        return True
    if isinstance(expr, ast.Subscript):
        return aliasable(expr.value)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        return aliasable(expr.operand)
    if isinstance(expr, ast.BoolOp):
        return all(aliasable(v) for v in expr.values)
    if truth_of(expr) is not None:
        return True
    if isinstance(expr, ast.Compare) and all(isinstance(c, ast.Constant) for c in expr.comparators):
        return aliasable(expr.left)  # `flag = cfg.enabled is True`
    return False


def truth_of(expr: ast.expr) -> ast.expr | None:
    """`bool(x)` -> x: a flag built through a call that keeps its truth (None for any other call)."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "bool"
        and len(expr.args) == 1
        and not expr.keywords
    ):
        arg = getattr_as_attribute(expr.args[0]) or expr.args[0]
        return arg if aliasable(arg) else None
    return None


def target_names(target: ast.expr) -> list[str]:
    """Names bound by an assignment or loop target (tuples unpacked)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        names = []
        for elt in target.elts:
            names.extend(target_names(elt))
        return names
    return []
