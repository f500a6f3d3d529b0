"""What a branch's code imports that its target took away since the merge base: the change's, as it merges.

A branch written against its merge base can fail once merged because the target removed or renamed a name it
imports (`ImportError: cannot import name 'X' from 'pkg.mod' (.../pkg/mod.py)`). The run only says the import
failed; git says why: the name is bound in that module at the merge base and not at the target's tip, and the
target's commits since changed the file. That is the change's to fix (bring the branch onto the target's API),
not its recipe's as written nor the environment's. Files are read at each revision through hard.env.worktree;
imports through parse.imports (its lazy-export table included).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from model_compile.hard.env.worktree import files, log, show
from model_compile.parse.imports import module_facts

_CANNOT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _bound(rel: str, source: str) -> set[str]:
    """The names a module binds at its top level (defs, classes, assignments, imports, also under a top-level
    `if`/`try`) and the names its lazy `__getattr__` table exports."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    out: set[str] = set(module_facts(rel, source.encode()).lazy)
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if not isinstance(node, _SCOPES):
            todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
    return out


def _module(top: Path, rev: str, module: str) -> tuple[str, str] | None:
    """(path, text) of the module's file at `rev`: `pkg/mod.py` or `pkg/mod/__init__.py`."""
    stem = module.replace(".", "/")
    for rel in (f"{stem}.py", f"{stem}/__init__.py"):
        text = show(top, rev, rel)
        if text is not None:
            return rel, text
    return None


def _imports(top: Path, head: str, folder: str) -> list[tuple[str, str]]:
    """(name, module) of every absolute `from module import name` in the head's Python files under `folder`."""
    out: list[tuple[str, str]] = []
    for rel in files(top, head, folder):
        text = show(top, head, rel) if rel.endswith(".py") else None
        for spec in module_facts(rel, (text or "").encode()).imports:
            if spec.names and spec.module and not spec.level:
                out += [(name, spec.module) for name in spec.names if name != "*"]
    return out


def gone_since(
    top: Path, merge_base: str, target: str, target_name: str, texts: dict[str, str], heads: dict[str, tuple[str, str]]
) -> list[str]:
    """One note per recipe whose failures import a name `target` removed since `merge_base` (`texts`: each
    recipe's runtime report as text): which names, from which files, and the target's commits that changed them;
    where one failed so, every other such name the recipe's files import (`heads`: recipe -> (head commit, its
    folder)), since the run stops at the first."""
    notes = []
    for recipe, text in texts.items():
        gone: dict[str, list[str]] = {}
        failed = list(dict.fromkeys(_CANNOT.findall(text)))
        if failed and recipe in heads:
            failed += [i for i in dict.fromkeys(_imports(top, *heads[recipe])) if i not in failed]
        for name, module in failed:
            before = _module(top, merge_base, module)
            if before is None or name not in _bound(*before):
                continue
            after = show(top, target, before[0])
            if after is not None and name in _bound(before[0], after):
                continue
            gone.setdefault(before[0], []).append(name)
        if not gone:
            continue
        said = "; ".join(f"`{', '.join(names)}` from {rel}" for rel, names in gone.items())
        count = sum(len(names) for names in gone.values())
        commits = log(top, merge_base, target, list(gone))
        shown = "; ".join(commits[:3]) + (f"; +{len(commits) - 3} more" if len(commits) > 3 else "")
        notes.append(
            f"{recipe}: the change's, as it merges: it imports {count} name(s) {said}, which the merge base "
            f"{merge_base[:12]} has and {target_name} no longer does ({len(commits)} commit(s) of {target_name} "
            f"since changed {'it' if len(gone) == 1 else 'them'}: {shown}); the branch was written against the "
            f"merge base: bring it onto {target_name}'s API (rebase), then review again"
        )
    return notes
