"""Diffs, the git dirty check, and the all-or-nothing write of a plan (`transaction`)."""

from __future__ import annotations

import difflib
from pathlib import Path

from model_compile.generate.planning.plan import FileChange, Plan
from model_compile.generate.writing import transaction
from model_compile.generate.writing.transaction import Target


def unified(change: FileChange) -> str:
    old = (change.old or "").splitlines(keepends=True)
    new = change.new.splitlines(keepends=True)
    fromfile = "/dev/null" if change.old is None else f"a/{change.rel}"
    lines = list(difflib.unified_diff(old, new, fromfile=fromfile, tofile=f"b/{change.rel}"))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def hunks(diff_text: str) -> list[str]:
    out: list[str] = []
    for line in diff_text.splitlines(keepends=True):
        if line.startswith("@@"):
            out.append(line)
        elif out:
            out[-1] += line
    return out


def dirty_files(plan: Plan) -> list[str]:
    """Files the plan would change that have uncommitted changes (or are untracked) in git."""
    try:
        import git
    except ImportError:  # pragma: no cover
        return []
    try:
        repo = git.Repo(plan.root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return []
    top = Path(repo.working_tree_dir or plan.root).resolve()
    paths = [c.path.resolve().relative_to(top).as_posix() for c in plan.changed if c.path.exists()]
    if not paths:
        return []
    status = repo.git.status("--porcelain", "--untracked-files=all", "--", *paths)
    return [line[3:] for line in status.splitlines() if line.strip()]


def write(plan: Plan) -> list[str]:
    """Write every changed file or none: checked, staged, renamed, rolled back on failure."""
    return transaction.write_all([Target(c.path, c.rel, c.new, c.old) for c in plan.changed])
