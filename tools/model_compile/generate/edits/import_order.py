"""Add an import where isort (profile black) would put it, so a file stays clean without running it.

Sections in order: __future__, standard library, third party, first party (a
package at the repository root, or `known_first_party`), local (relative).
Within a section, `import x` lines come first, then `from x import ...`
lines, each sorted by module name; names inside one `from` import are sorted
constants, classes, then functions (isort's order_by_type).
"""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst

SECTIONS = ("future", "stdlib", "thirdparty", "firstparty", "local")


def _module_of(stmt: cst.CSTNode) -> tuple[str, bool] | None:
    """(module, is a from-import) of a one-import statement line; None for anything else."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    imp = stmt.body[0]
    if isinstance(imp, cst.ImportFrom):
        dots = "." * len(imp.relative)
        name = cst.Module([]).code_for_node(imp.module) if imp.module is not None else ""
        return dots + name, True
    if isinstance(imp, cst.Import):
        return cst.Module([]).code_for_node(imp.names[0].name), False
    return None


def section_of(module: str, root: Path | None, first_party: tuple[str, ...] = ()) -> str:
    """isort's section for a module, decided statically."""
    if module.startswith("."):
        return "local"
    top = module.split(".")[0]
    if top == "__future__":
        return "future"
    if top in sys.stdlib_module_names:
        return "stdlib"
    if top in first_party:
        return "firstparty"
    if root is not None and ((root / top).is_dir() or (root / f"{top}.py").is_file()):
        return "firstparty"
    return "thirdparty"


def _name_key(name: str) -> tuple[int, str]:
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def insert_import(
    code: str, module: str, name: str | None = None, *, root: Path | None = None, first_party: tuple[str, ...] = ()
) -> str:
    """`code` with `from module import name` (or `import module`) added, unless it is there."""
    tree = cst.parse_module(code)
    body = list(tree.body)
    start = 1 if body and _is_docstring(body[0]) else 0
    end = start
    while end < len(body) and _module_of(body[end]) is not None:
        end += 1
    block: list[tuple[int, str, bool]] = []
    for i in range(start, end):
        found = _module_of(body[i])
        if found is not None:
            block.append((i, *found))
    for i, mod, is_from in block:
        line = body[i]
        assert isinstance(line, cst.SimpleStatementLine)
        imp = line.body[0]
        assert isinstance(imp, (cst.Import, cst.ImportFrom))
        if (
            name is None
            and not is_from
            and mod == module
            and not isinstance(imp.names, cst.ImportStar)
            and len(imp.names) == 1
        ):
            return code
        if name is not None and is_from and mod == module and not isinstance(imp.names, cst.ImportStar):
            names = [cst.Module([]).code_for_node(a.name) for a in imp.names if a.asname is None]
            if name in names:
                return code
            if len(imp.names) == len(names) and "\n" not in tree.code_for_node(body[i]):
                merged = sorted({*names, name}, key=_name_key)
                new = cst.parse_statement(f"from {module} import {', '.join(merged)}\n")
                body[i] = new.with_changes(leading_lines=body[i].leading_lines)
                return tree.with_changes(body=body).code
    text = f"from {module} import {name}\n" if name else f"import {module}\n"
    new_stmt = cst.parse_statement(text)
    sect = SECTIONS.index(section_of(module, root, first_party))
    key = (sect, name is not None, module.lower())

    def key_of(mod: str, is_from: bool) -> tuple[int, bool, str]:
        return SECTIONS.index(section_of(mod, root, first_party)), is_from, mod.lower()

    blank = [cst.EmptyLine(indent=False)]
    if not block:
        body.insert(start, new_stmt.with_changes(leading_lines=blank if start else []))
        if start + 1 < len(body):
            nxt = body[start + 1]
            gap = 2 if isinstance(nxt, (cst.FunctionDef, cst.ClassDef)) else 1
            body[start + 1] = nxt.with_changes(leading_lines=blank * gap)
        return tree.with_changes(body=body).code
    keys = [key_of(mod, is_from) for _, mod, is_from in block]
    pos = next((k for k, existing in enumerate(keys) if existing > key), len(block))
    prev = keys[pos - 1][0] if pos > 0 else None
    if pos == 0:
        lead = body[block[0][0]].leading_lines
    else:
        lead = [] if prev == sect else blank
    at = block[pos][0] if pos < len(block) else block[-1][0] + 1
    if pos < len(block):
        body[at] = body[at].with_changes(leading_lines=[] if keys[pos][0] == sect else blank)
    body.insert(at, new_stmt.with_changes(leading_lines=lead))
    return tree.with_changes(body=body).code
