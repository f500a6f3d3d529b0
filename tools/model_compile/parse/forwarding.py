"""Where a recipe forwards its whole model config into another constructor, statically.

`TransformerConfig(**config.model_dump())` in a builder that `prepare_model()` calls with
`self.config.model`: every field of the recipe's model config, a `compile` section
included, becomes a keyword of the model's own config, which may not take it. Found by
following the model config (`self.config.model`, names bound to it, and the parameters
of recipe functions it is passed to) to `**` arguments; read, never imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from model_compile.parse.python import PyModule, dotted, unparse

MODEL_CONFIG = "self.config.model"
_DUMPS = ("model_dump", "dict")  # pydantic v2 and v1 methods that return the fields as a dict
_MAX_HOPS = 3


@dataclass(frozen=True)
class Forward:
    """One `Target(**<the model config as a mapping>)` call."""

    file: str
    line: int
    call: str  # the call, one line of source
    target: str  # the constructor's name
    form: str  # "model_dump" / "dict" (a method call), "dict()" / "vars()" (a builtin), "mapping" (`**config`)
    excludes_compile: bool  # an `exclude=` literal already names compile
    dump: ast.Call | None  # the `.model_dump(...)` call, for an edit
    target_fields: tuple[str, ...] | None  # the fields the constructor takes; None: unknown or **kwargs


def _top_functions(modules: dict[str, PyModule]) -> dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, PyModule]]:
    out: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, PyModule]] = {}
    for mod in modules.values():
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(node.name, (node, mod))
    return out


def _classes(modules: dict[str, PyModule]) -> dict[str, ast.ClassDef]:
    out: dict[str, ast.ClassDef] = {}
    for mod in modules.values():
        for node in mod.tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, node)
    return out


def _is_config(expr: ast.expr, names: set[str]) -> bool:
    """The model config: `self.config.model`, a name bound to it, or a deep copy of either."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("model_copy", "copy"):
        expr = expr.func.value
    text = dotted(expr)
    return text == MODEL_CONFIG or (isinstance(expr, ast.Name) and expr.id in names)


def _mapping(value: ast.expr, names: set[str]) -> tuple[str, ast.Call | None] | None:
    """How a `**value` spreads the model config: (form, the dump call), else None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _DUMPS:
        return (value.func.attr, value) if _is_config(value.func.value, names) else None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("dict", "vars"):
        return (f"{value.func.id}()", None) if value.args and _is_config(value.args[0], names) else None
    return ("mapping", None) if _is_config(value, names) else None


def _excludes_compile(dump: ast.Call | None) -> bool:
    for kw in dump.keywords if dump is not None else []:
        if kw.arg == "exclude" and isinstance(kw.value, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
            items = kw.value.keys if isinstance(kw.value, ast.Dict) else kw.value.elts
            return any(isinstance(k, ast.Constant) and k.value == "compile" for k in items)
        if kw.arg == "include":
            return True  # only the fields it names: the compile section is not among them unless named
    return False


def _fields(cls: ast.ClassDef | None) -> tuple[str, ...] | None:
    """The keywords a recipe class takes: a dataclass's or pydantic model's annotated fields, or its __init__'s."""
    if cls is None:
        return None
    init = next(
        (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"), None
    )
    if init is not None:
        if init.args.kwarg is not None:
            return None
        return tuple(a.arg for a in init.args.args[1:] + init.args.kwonlyargs)
    if any(isinstance(n, ast.Assign) and "extra" in unparse(n) and "allow" in unparse(n) for n in cls.body):
        return None  # a pydantic model that allows extra fields
    return tuple(n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))


def model_config_forwards(modules: dict[str, PyModule], engine_files: list[str]) -> list[Forward]:
    """Every call that spreads the whole model config into a constructor, in the engine and the recipe functions
    the model config is passed to (followed a few calls deep)."""
    if not any("**" in m.text for m in modules.values()):
        return []  # a spread is a `**` keyword: none in any file of the recipe, none to find (most recipes)
    functions = _top_functions(modules)
    classes = _classes(modules)
    out: list[Forward] = []
    seen: set[tuple[str, int]] = set()
    todo: list[tuple[ast.AST, PyModule, set[str], int]] = [
        (modules[f].tree, modules[f], set(), 0) for f in engine_files if f in modules
    ]
    while todo:
        scope, mod, names, hops = todo.pop()
        names = set(names)
        nodes = list(ast.walk(scope))  # one walk for both passes
        for node in nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if _is_config(node.value, names):
                    names.add(node.targets[0].id)
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                spread = _mapping(kw.value, names) if kw.arg is None else None
                if spread is None or (mod.path, node.lineno) in seen:
                    continue
                seen.add((mod.path, node.lineno))
                target = (dotted(node.func) or "").rsplit(".", 1)[-1]
                out.append(
                    Forward(
                        file=mod.path,
                        line=node.lineno,
                        call=mod.segment(node),
                        target=target,
                        form=spread[0],
                        excludes_compile=_excludes_compile(spread[1]),
                        dump=spread[1],
                        target_fields=_fields(classes.get(target)),
                    )
                )
            callee = functions.get((dotted(node.func) or "").rsplit(".", 1)[-1]) if hops < _MAX_HOPS else None
            if callee is None:
                continue
            fn, fmod = callee
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            bound = {params[i] for i, arg in enumerate(node.args[: len(params)]) if _is_config(arg, names)}
            bound |= {kw.arg for kw in node.keywords if kw.arg and _is_config(kw.value, names)}
            if bound:
                todo.append((fn, fmod, bound, hops + 1))
    return sorted(out, key=lambda f: (f.file, f.line))
