"""Read `model.compile` out of a recipe's pydantic schema, statically.

Follows: root config class -> `model` field type -> `compile` field type ->
fields `enabled`, `backend`, `mode` (annotation, default, Literal values).
Base classes defined in the same file are searched too; type aliases
(`Backend = Literal[...]`) are resolved.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from model_compile.parse.models import FLAT_FIELDS, FieldFact, SchemaFacts
from model_compile.parse.python import PyModule, dotted, literal_or, unparse, walk

COMPILE_FIELDS = ("enabled", "backend", "mode")
_NO_DEFAULT = object()


def _classes(mod: PyModule) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in mod.tree.body if isinstance(n, ast.ClassDef)}


def _aliases(mod: PyModule) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for n in mod.tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            out[n.targets[0].id] = n.value
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            if dotted(n.annotation) in ("TypeAlias", "typing.TypeAlias"):
                out[n.target.id] = n.value
        elif sys.version_info >= (3, 12) and isinstance(n, ast.TypeAlias):
            out[n.name.id] = n.value
    return out


def _fields(
    cls: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: set[str] | None = None
) -> dict[str, ast.AnnAssign]:
    """name -> AnnAssign, including bases defined in the same file (subclass wins)."""
    seen = seen or set()
    if cls.name in seen:
        return {}
    seen.add(cls.name)
    out: dict[str, ast.AnnAssign] = {}
    for base in cls.bases:
        name = dotted(base)
        if name and name.split(".")[-1] in classes:
            out.update(_fields(classes[name.split(".")[-1]], classes, seen))
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = stmt
    return out


def _literal(node: ast.expr) -> Any:
    return literal_or(node, _NO_DEFAULT)


def _default(stmt: ast.AnnAssign) -> tuple[Any, str | None, ast.expr | None]:
    """(value, source-ish text, factory expr) of a field default."""
    v = stmt.value
    if v is None:
        return _NO_DEFAULT, None, None
    if isinstance(v, ast.Call) and (dotted(v.func) or "").split(".")[-1] == "Field":
        for kw in v.keywords:
            if kw.arg == "default":
                return _literal(kw.value), unparse(kw.value), None
            if kw.arg == "default_factory":
                return _NO_DEFAULT, unparse(kw.value), kw.value
        if v.args and not (isinstance(v.args[0], ast.Constant) and v.args[0].value is Ellipsis):
            return _literal(v.args[0]), unparse(v.args[0]), None
        return _NO_DEFAULT, None, None
    return _literal(v), unparse(v), None


def _type_names(annotation: ast.expr, aliases: dict[str, ast.expr]) -> list[str]:
    """Class names an annotation may refer to (X, X | None, Optional[X], 'X')."""
    names: list[str] = []
    for node in walk(annotation):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.append(node.value)
    return names


def _literal_values(annotation: ast.expr, aliases: dict[str, ast.expr], depth: int = 0) -> list[Any] | None:
    """Values of a Literal annotation (through aliases and unions), else None."""
    if depth > 5:
        return None
    if isinstance(annotation, ast.Name) and annotation.id in aliases:
        return _literal_values(aliases[annotation.id], aliases, depth + 1)
    if isinstance(annotation, ast.Subscript) and (dotted(annotation.value) or "").split(".")[-1] == "Literal":
        sl = annotation.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        vals = [_literal(e) for e in elts]
        return [v for v in vals if v is not _NO_DEFAULT]
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left = _literal_values(annotation.left, aliases, depth + 1)
        right = _literal_values(annotation.right, aliases, depth + 1)
        if left is None and right is None:
            return None
        return (left or []) + (right or [])
    return None


def _field_type(
    stmt: ast.AnnAssign, classes: dict[str, ast.ClassDef], aliases: dict[str, ast.expr]
) -> ast.ClassDef | None:
    for name in _type_names(stmt.annotation, aliases):
        if name in classes:
            return classes[name]
    _, _, factory = _default(stmt)
    if factory is not None:
        name = (dotted(factory) or "").split(".")[-1]
        if name in classes:
            return classes[name]
    return None


def _root_class(classes: dict[str, ast.ClassDef], preferred: str | None) -> ast.ClassDef | None:
    if preferred and preferred in classes:
        return classes[preferred]
    referenced: set[str] = set()
    for cls in classes.values():
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign):
                referenced.update(n for n in _type_names(stmt.annotation, {}) if n in classes)
    candidates = [c for c in classes.values() if c.name not in referenced and "model" in _fields(c, classes)]
    if not candidates:
        candidates = [c for c in classes.values() if "model" in _fields(c, classes)]
    return candidates[-1] if candidates else None


def schema_facts(mod: PyModule, root_class: str | None = None) -> SchemaFacts:
    """Facts about `model.compile` in a parsed schema module."""
    facts = SchemaFacts(file=mod.path)
    classes = _classes(mod)
    aliases = _aliases(mod)
    root = _root_class(classes, root_class)
    if root is None:
        facts.problems.append("no config class with a `model` field")
        return facts
    facts.root_class = root.name
    facts.defaults = _defaults(root, classes, aliases)
    model_stmt = _fields(root, classes).get("model")
    model_cls = _field_type(model_stmt, classes, aliases) if model_stmt else None
    if model_cls is None:
        facts.problems.append(f"the type of `{root.name}.model` is not a class defined in this file")
        return facts
    facts.model_class = model_cls.name
    model_fields = _fields(model_cls, classes)
    compile_stmt = model_fields.get("compile")
    if compile_stmt is None:
        return facts
    facts.compile_field_line = compile_stmt.lineno
    facts.compile_type = unparse(compile_stmt.annotation)
    compile_cls = _field_type(compile_stmt, classes, aliases)
    if compile_cls is None:
        if _is_bool(compile_stmt.annotation):  # the older flat form: the switch and its choices side by side
            facts.form = "flat"
            flat = {name: model_fields.get(key) for name, key in FLAT_FIELDS.items()}
            facts.fields = {name: _field_fact(stmt, aliases) for name, stmt in flat.items()}
            return facts
        facts.problems.append(
            f"the type of `{model_cls.name}.compile` is `{facts.compile_type}`, not a class defined in this file"
        )
        return facts
    facts.compile_class = compile_cls.name
    facts.form = "section"
    fields = _fields(compile_cls, classes)
    facts.fields = {name: _field_fact(fields.get(name), aliases) for name in COMPILE_FIELDS}
    return facts


def _defaults(
    cls: ast.ClassDef, classes: dict[str, ast.ClassDef], aliases: dict[str, ast.expr], depth: int = 0
) -> dict[str, Any]:
    """The literal defaults of a config class's fields, a field whose type is a class of the file as its own
    section (what a stage that leaves the key out gets); a field without a literal default is left out."""
    out: dict[str, Any] = {}
    if depth > 6:
        return out
    for name, stmt in _fields(cls, classes).items():
        sub = _field_type(stmt, classes, aliases)
        if sub is not None and sub.name != cls.name:
            inner = _defaults(sub, classes, aliases, depth + 1)
            if inner:
                out[name] = inner
            continue
        value, _, _ = _default(stmt)
        if value is not _NO_DEFAULT:
            out[name] = value
    return out


def _is_bool(annotation: ast.expr) -> bool:
    """`bool`, `StrictBool`, `bool | None`, `Optional[bool]`."""
    names = {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in walk(annotation)
        if isinstance(n, (ast.Name, ast.Attribute))
    }
    return bool(names & {"bool", "StrictBool"}) and names <= {
        "bool",
        "StrictBool",
        "None",
        "Optional",
        "pydantic",
        "typing",
    }


def _field_fact(stmt: ast.AnnAssign | None, aliases: dict[str, ast.expr]) -> FieldFact:
    if stmt is None:
        return FieldFact(present=False)
    value, text, _ = _default(stmt)
    return FieldFact(
        present=True,
        annotation=unparse(stmt.annotation),
        default=None if value is _NO_DEFAULT else value,
        default_text=text,
        allowed=_literal_values(stmt.annotation, aliases),
        line=stmt.lineno,
    )
