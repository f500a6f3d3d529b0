"""Adding imports to a module the way a person would.

`from mod import name` goes next to the file's other imports of the same
package (keeping an isort-ordered group ordered); a standard-library import
opens the import block as its own group; anything else falls back to LibCST's
`AddImportsVisitor`.
"""

from __future__ import annotations

import sys

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from model_compile.generate.edits.cst_util import dotted


def _import_module(stmt: cst.CSTNode) -> str | None:
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        imp = stmt.body[0]
        if isinstance(imp, cst.ImportFrom) and not imp.relative and imp.module is not None:
            return dotted(imp.module)
        if isinstance(imp, cst.Import):
            return dotted(imp.names[0].name)
    return None


def add_import(module: cst.Module, mod: str, name: str | None = None) -> cst.Module:
    """`import mod` (or `from mod import name`) through LibCST's AddImportsVisitor, if missing."""
    ctx = CodemodContext()
    AddImportsVisitor.add_needed_import(ctx, mod, name)
    return module.visit(AddImportsVisitor(ctx))


def add_from_import(module: cst.Module, mod: str, name: str) -> cst.Module:
    """`from mod import name`, next to the file's other imports of the same package."""
    root = mod.split(".")[0]
    last_same = None
    for i, stmt in enumerate(module.body):
        m = _import_module(stmt)
        if m is not None and (m == root or m.startswith(root + ".")):
            last_same = i
            if m > mod:  # keep an isort-ordered group ordered
                last_same = i - 1
                break
    existing = any(_import_module(s) == mod for s in module.body)
    if last_same is None and not existing and root in sys.stdlib_module_names:
        return _add_stdlib_import(module, mod, name)
    if last_same is None or existing:
        return add_import(module, mod, name)
    new = cst.parse_statement(f"from {mod} import {name}\n")
    body = list(module.body)
    body.insert(last_same + 1, new)
    return module.with_changes(body=body)


def _add_stdlib_import(module: cst.Module, mod: str, name: str) -> cst.Module:
    """A standard-library import opens the import block (its own group)."""
    body = list(module.body)
    for i, stmt in enumerate(body):
        m = _import_module(stmt)
        if m is None and not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.ImportFrom)):
            continue
        if m == "__future__":
            continue
        new = cst.parse_statement(f"from {mod} import {name}\n").with_changes(leading_lines=stmt.leading_lines)
        stdlib = m is not None and m.split(".")[0] in sys.stdlib_module_names
        body[i] = stmt.with_changes(leading_lines=[] if stdlib else [cst.EmptyLine(indent=False)])
        body.insert(i, new)
        return module.with_changes(body=body)
    return add_import(module, mod, name)
