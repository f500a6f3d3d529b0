"""A revision of the repository checked out beside it: a detached git worktree in a temporary folder."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ValueError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"git {' '.join(args)} failed")
    return out.stdout.strip()


def resolve(repo_root: Path, rev: str) -> tuple[str, str]:
    """(commit, tree) of REV, or ValueError with git's one line."""
    commit = _git(repo_root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    tree = _git(repo_root, "rev-parse", f"{commit}^{{tree}}")
    return commit, tree


class Worktree:
    """A detached worktree of one commit in a temporary folder; removed (and pruned) on exit."""

    def __init__(self, repo_root: Path, commit: str) -> None:
        self.repo_root, self.commit = repo_root, commit
        self.path = Path(tempfile.mkdtemp(prefix="model-compile-base-"))

    def __enter__(self) -> Path:
        _git(self.repo_root, "worktree", "add", "--detach", "--quiet", str(self.path), self.commit)
        return self.path

    def __exit__(self, *exc: object) -> None:
        try:
            _git(self.repo_root, "worktree", "remove", "--force", str(self.path))
        except (ValueError, subprocess.TimeoutExpired):
            shutil.rmtree(self.path, ignore_errors=True)
            try:
                _git(self.repo_root, "worktree", "prune")
            except (ValueError, subprocess.TimeoutExpired):
                pass


def toplevel(path: Path) -> Path:
    """The root of the git work tree `path` lies in (the recipes' root may be a folder below it)."""
    return Path(_git(path, "rev-parse", "--show-toplevel")).resolve()


def changed_paths(top: Path, commit: str) -> list[str]:
    """The paths (from the work tree's root) where the work tree differs from COMMIT: tracked changes, staged or
    not, deletions, and untracked files git does not ignore."""
    tracked = _git(top, "diff", "--name-only", "--no-renames", commit, "--").splitlines()
    untracked = _git(top, "ls-files", "--others", "--exclude-standard").splitlines()
    return sorted({p for p in tracked + untracked if p})


def show(top: Path, commit: str, path: str) -> str | None:
    """PATH's text at COMMIT, or None where it did not exist there."""
    try:
        return _git(top, "show", f"{commit}:{path}")
    except ValueError:
        return None


def changed_lines(top: Path, commit: str, suffix: str = ".py") -> dict[str, list[int]]:
    """{path from the work tree's root: the work tree's line numbers that differ from COMMIT} for the files
    ending in `suffix`: the added or changed lines of each hunk (a pure deletion names the line after it), and
    every line of an untracked file."""
    import re

    out: dict[str, list[int]] = {}
    current = None
    for line in _git(top, "diff", "-U0", "--no-renames", "--no-color", commit, "--").splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip()
            current = target[2:] if target.startswith("b/") and target.endswith(suffix) else None
            continue
        m = re.match(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", line)
        if m and current:
            start, count = int(m.group(1)), int(m.group(2)) if m.group(2) is not None else 1
            lines = range(start, start + count) if count else range(start + 1, start + 2)
            out.setdefault(current, []).extend(lines)
    for path in _git(top, "ls-files", "--others", "--exclude-standard").splitlines():
        if path.endswith(suffix) and (top / path).is_file():
            try:
                n = len((top / path).read_text(encoding="utf-8", errors="replace").splitlines())
            except OSError:
                continue
            out[path] = list(range(1, n + 1))
    return {p: sorted(set(v)) for p, v in out.items()}
