"""What a branch's code imports that its target took away since the merge base: the change's, as it merges.

A branch written against its merge base can fail once merged because the target removed or renamed a name it
imports (`ImportError: cannot import name 'X' from 'pkg.mod' (.../pkg/mod.py)`). The run only says the import
failed; git says why: the name is defined in that file at the merge base and not at the target's tip, and the
target's commits since changed the file. That is the change's to fix (bring the branch onto the target's API),
not its recipe's as written nor the environment's.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

_CANNOT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")


def _git(top: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(top), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _defines(source: str, name: str) -> bool:
    """`name` is bound at the module's top level: def, class, assignment, or an import that binds it."""
    word = re.escape(name)
    return bool(
        re.search(rf"^(?:async\s+)?(?:def|class)\s+{word}\b", source, re.M)
        or re.search(rf"^{word}\s*(?::[^=\n]*)?=", source, re.M)
        or re.search(rf"^(?:from\s+\S+\s+)?import\s+[^\n#]*\b{word}\b", source, re.M)
        or re.search(rf"^from\s+\S+\s+import\s+\([^)]*\b{word}\b", source, re.M | re.S)
    )


def _module_file(top: Path, rev: str, module: str) -> str | None:
    stem = module.replace(".", "/")
    for rel in (f"{stem}.py", f"{stem}/__init__.py"):
        if _git(top, "cat-file", "-e", f"{rev}:{rel}") is not None:
            return rel
    return None


def _imports(top: Path, head: str, folder: str) -> list[tuple[str, str]]:
    """(name, module) of every `from module import name` in the head's Python files under `folder`."""
    listed = _git(top, "ls-tree", "-r", "--name-only", head, "--", folder) or ""
    out: list[tuple[str, str]] = []
    for rel in listed.splitlines():
        source = _git(top, "show", f"{head}:{rel}") if rel.endswith(".py") else None
        try:
            tree = ast.parse(source or "")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                out += [(a.name, node.module) for a in node.names if a.name != "*"]
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
            rel = _module_file(top, merge_base, module)
            before = _git(top, "show", f"{merge_base}:{rel}") if rel else None
            if rel is None or before is None or not _defines(before, name):
                continue
            after = _git(top, "show", f"{target}:{rel}")
            if after is not None and _defines(after, name):
                continue
            gone.setdefault(rel, []).append(name)
        if not gone:
            continue
        said = "; ".join(f"`{', '.join(names)}` from {rel}" for rel, names in gone.items())
        count = sum(len(names) for names in gone.values())
        log = _git(top, "log", "--format=%h %s", f"{merge_base}..{target}", "--", *gone) or ""
        commits = [line for line in log.splitlines() if line.strip()]
        shown = "; ".join(commits[:3]) + (f"; +{len(commits) - 3} more" if len(commits) > 3 else "")
        notes.append(
            f"{recipe}: the change's, as it merges: it imports {count} name(s) {said}, which the merge base {merge_base[:12]} has "
            f"and {target_name} no longer does ({len(commits)} commit(s) of {target_name} since changed "
            f"{'it' if len(gone) == 1 else 'them'}: {shown}); the branch was written against the merge base: bring it "
            f"onto {target_name}'s API (rebase), then review again"
        )
    return notes
