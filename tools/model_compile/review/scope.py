"""Scope by what runs: the recipes a change reaches through the Python files their run imports, and whether a
change to a Python file changes code at all.

A recipe's run starts from its own engine modules (`engine/`), model code (`model/`, `models/`) and config
modules (`configs/*.py`, the schema): the import closure of those files (parse/imports.py: statically, nothing
imported) is what its run imports. A changed Python file in that closure brings the recipe into scope, with
the import path as the reason. The closure is read on the head side; a file the head no longer has (deleted,
renamed away) is looked for on the base side.

A change to a Python file whose ASTs, docstrings removed, are equal on both sides touches only comments,
blank lines or docstrings: it is listed, marked as not changing code.
"""

from __future__ import annotations

from typing import Literal

from model_compile.parse.imports import ImportGraph, chain, conditions
from model_compile.parse.python import code_changed
from model_compile.review.models import ChangedFile, ImportedChange
from model_compile.review.revisions import Side

ROOT_FOLDERS = ("engine", "model", "models")


def mark_code(files: list[ChangedFile], base: Side, head: Side) -> None:
    """Set `code_changed` of every changed Python file (None for other files)."""
    for f in files:
        if not f.path.endswith(".py") and not (f.old_path or "").endswith(".py"):
            continue
        if f.change != "modified" or f.binary or f.entry != "file" or f.note:
            f.code_changed = True  # added, deleted or renamed: the module itself comes or goes
            continue
        f.code_changed = code_changed(base.tree.read_bytes(f.path), head.tree.read_bytes(f.path))


def recipe_roots(graph: ImportGraph, name: str) -> list[str]:
    """A recipe's own files its run starts from: engine and model code, config modules (tests and the rest: no)."""
    prefix = f"recipes/{name}/"
    roots = []
    for f in sorted(graph.py):
        if not f.startswith(prefix):
            continue
        rest = f[len(prefix) :].split("/")
        if rest[0] in ROOT_FOLDERS and len(rest) > 1 or rest[0] == "configs" and len(rest) == 2:
            roots.append(f)
    return roots


class Reach:
    """The changed Python files each recipe's run imports, read on both sides as needed."""

    def __init__(self, base: Side, head: Side, files: list[ChangedFile]):
        self.base, self.head = base, head
        self.files = [f for f in files if f.code_changed is not None]
        self._graphs: dict[str, ImportGraph] = {}
        self._closures: dict[tuple[str, str], dict[str, str | None]] = {}

    def _graph(self, side: str) -> ImportGraph:
        if side not in self._graphs:
            self._graphs[side] = ImportGraph((self.head if side == "head" else self.base).tree)
        return self._graphs[side]

    def closure(self, side: str, name: str) -> dict[str, str | None]:
        key = (side, name)
        if key not in self._closures:
            graph = self._graph(side)
            self._closures[key] = graph.closure(recipe_roots(graph, name))
        return self._closures[key]

    def of(self, head_name: str | None, base_name: str | None) -> tuple[list[ImportedChange], dict[str, list[int]]]:
        """(the changed files outside the recipe's folder its run imports, with the import path; the head-side
        changed lines of every changed Python file its run imports, its own included, whose code changed)."""
        imported: list[ImportedChange] = []
        lines: dict[str, list[int]] = {}
        if not self.files:
            return imported, lines
        head_closure = self.closure("head", head_name) if head_name else {}
        name = head_name or base_name
        own = {f"recipes/{n}/" for n in (head_name, base_name) if n}
        for f in self.files:
            side: Literal["head", "base"] = "head"
            path = f.path
            if f.change == "deleted" or path not in head_closure:
                side, path = "base", f.old_path or f.path
                if base_name is None or path not in self.closure("base", base_name):
                    continue
            closure = head_closure if side == "head" else self.closure("base", base_name or "")
            if side == "head" and f.code_changed and f.lines:
                lines[f.path] = list(f.lines)
            if any(path.startswith(p) for p in own):
                continue
            via = chain(closure, path)
            under = conditions(self._graph(side), via)
            imported.append(
                ImportedChange(
                    path=f.path,
                    old_path=f.old_path,
                    change=f.change,
                    via=via,
                    side=side,
                    code_changed=bool(f.code_changed),
                    conditions=under,
                    reason=_reason(f, name or "", via, side, under),
                )
            )
        return imported, lines

    def problems(self) -> list[str]:
        """Files some recipe's run imports that do not parse (their own imports are not followed)."""
        out = []
        for side, graph in sorted(self._graphs.items()):
            reached = {f for (s, _), c in self._closures.items() if s == side for f in c}
            out += [
                f"{path} ({side}) {problem}: the imports it makes are not followed"
                for path, problem in sorted(graph.problems.items())
                if path in reached
            ]
        return out


def _reason(f: ChangedFile, recipe: str, via: list[str], side: str, under: list[str]) -> str:
    what = "" if f.code_changed else " (comments, blank lines or docstrings only)"
    through = " -> ".join(via)
    if under:  # imported only when a condition holds: said as such, never as a plain import
        said = []
        for c in under:
            importer, _, test = c.partition(": ")
            said.append(f"`{test}` ({importer})")
        through += ", only " + " and ".join(said)
    if side == "head":
        verb = "may be imported" if under else "is imported"
        return f"{f.path}{what} {verb} by recipes/{recipe} through {through}"
    gone = "deleted" if f.change == "deleted" else f"renamed to {f.path}"
    return f"{f.old_path or f.path} ({gone}) was imported by recipes/{recipe} before the change, through {through}"
