"""A revision of the repository (or the merge of two) materialized beside it, for a run to read.

The tree is checked out into a temporary folder (under `$TMPDIR`) as the work tree of a throwaway git
repository that borrows the repository's objects (git alternates): nothing is written to the repository, not
even a worktree entry, and a merge result (`git merge-tree --write-tree`) is committed there, never here.

Clones as they come: a blob the tree lists but this clone lacks (a partial or blobless clone, docs images of an
older commit) is left out and listed, unless the run reads it (a file of the recipe folders, one at the
repository's root, or a Python file their import closure reaches): that one is fetched through the repository
(its promisor remote, when it has one), and when it cannot be, the folder is refused with one line saying which
file and how to bring it. Left-out files are marked skip-worktree, so the folder is clean to git.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
import tempfile
from pathlib import Path

_IDENTITY = {
    "GIT_AUTHOR_NAME": "model-compile",
    "GIT_AUTHOR_EMAIL": "model-compile@localhost",
    "GIT_COMMITTER_NAME": "model-compile",
    "GIT_COMMITTER_EMAIL": "model-compile@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _run(repo: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=300,
        input=stdin,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", **(env or {})},
        check=False,
    )
    if out.returncode != 0:
        raise ValueError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"git {' '.join(args)} failed")
    return out.stdout.strip()


def _git(repo: Path, *args: str) -> str:
    return _run(repo, *args)


def resolve(repo_root: Path, rev: str) -> tuple[str, str]:
    """(commit, tree) of REV, or ValueError with git's one line."""
    commit = _git(repo_root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    tree = _git(repo_root, "rev-parse", f"{commit}^{{tree}}")
    return commit, tree


class MissingBlob(ValueError):
    """A file the run reads is not in this clone and could not be fetched."""


class Worktree:
    """One commit (`commit`), or the merge of `merge[1]` into `merge[0]` (both commits), materialized in a
    temporary folder; removed on exit. `reads`: the recipe folders (relative to the git root) the run starts
    from, which decide which missing blobs matter. After entering: `commit` is the folder's HEAD commit,
    `left_out` the files whose blobs this clone lacks (not materialized), `fetched` those brought in."""

    def __init__(
        self,
        repo_root: Path,
        commit: str | None = None,
        *,
        merge: tuple[str, str] | None = None,
        reads: list[str] | None = None,
        prefix: str = "model-compile-tree-",
    ) -> None:
        if (commit is None) == (merge is None):
            raise ValueError("a worktree is one commit or one merge")
        self.repo_root, self.commit, self.merge = repo_root, commit or "", merge
        self.reads = [r.strip("/") for r in reads or []]
        self.prefix = prefix
        self.path = Path()
        self.left_out: list[str] = []
        self.fetched: list[str] = []
        self.blobs: dict[str, str] = {}  # path -> blob sha, every file of the tree
        self.read_count = 0  # the files `digest()` covered

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix=self.prefix))
        try:
            self._build()
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def _build(self) -> None:
        top = self.path
        common = Path(_git(self.repo_root, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        _git(top, "init", "-q")
        (top / ".git" / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n", encoding="utf-8")
        if (common / "shallow").is_file():  # the same cut history: git must not look for parents it lacks
            shutil.copy2(common / "shallow", top / ".git" / "shallow")
        if self.merge is not None:
            target, head = self.merge
            try:
                tree = _run(top, "merge-tree", "--write-tree", target, head).splitlines()[0]
            except ValueError as exc:
                raise ValueError(f"the merge could not be computed here ({exc})") from None
            self.commit = _run(
                top, "commit-tree", tree, "-p", target, "-p", head, "-m", "model-compile: merge result", env=_IDENTITY
            )
        _git(top, "update-ref", "refs/heads/model-compile", self.commit)
        _git(top, "symbolic-ref", "HEAD", "refs/heads/model-compile")
        paths = self.blobs = _listing(top, self.commit)
        missing = _missing(top, self.commit, paths)
        _git(top, "read-tree", self.commit)
        if missing:
            self._fetch_needed(top, paths, missing)
        if self.left_out:
            skip = "".join(f"{p}\0" for p in self.left_out)
            _run(top, "update-index", "-z", "--skip-worktree", "--stdin", stdin=skip)
        _git(top, "checkout-index", "--all", "--force", "--quiet")
        if self.left_out:
            self._refuse_if_read(top, paths)

    def digest(self) -> str:
        """What the run's inputs are, as one hash: the blob of every file it reads (the `reads` folders, the root's
        files, the Python files their imports reach, and the other files of the packages those lie in). Two trees
        that differ elsewhere (documentation, another recipe, code no import reaches) give the same digest."""
        import hashlib

        closure = _closure(self.path, self.reads, self.blobs) if self.reads else {}
        packages = {posixpath.dirname(p) for p in closure if p.endswith(".py") and not self._surely_read(p)}
        read = sorted(
            p
            for p in self.blobs
            if self._surely_read(p) or p in closure or (posixpath.dirname(p) in packages and not p.endswith(".py"))
        )
        self.read_count = len(read)
        h = hashlib.sha1()
        for path in read:
            h.update(f"{path}\0{self.blobs[path]}\0".encode())
        return h.hexdigest()

    def _fetch_needed(self, top: Path, paths: dict[str, str], missing: set[str]) -> None:
        """Bring in the missing blobs the run surely reads (recipe folders, the root); the rest are left out for
        now (`_refuse_if_read` checks the import closure once the rest is on disk)."""
        by_sha: dict[str, list[str]] = {}
        for path, sha in paths.items():
            if sha in missing:
                by_sha.setdefault(sha, []).append(path)
        for sha, names in sorted(by_sha.items()):
            if any(self._surely_read(p) for p in names) and _fetch(self.repo_root, sha):
                self.fetched += names
            else:
                self.left_out += names
        self.left_out.sort()

    def _surely_read(self, path: str) -> bool:
        return "/" not in path or any(path.startswith(r + "/") for r in self.reads)

    def _refuse_if_read(self, top: Path, paths: dict[str, str]) -> None:
        """A left-out file the run reads (in a recipe folder, at the root, or a Python file the recipes' import
        closure reaches): fetch it, or refuse in one line."""
        read = set(_closure(top, self.reads, paths)) if self.reads else set()
        needed = [p for p in self.left_out if self._surely_read(p) or p in read]
        still = []
        for path in needed:
            if _fetch(self.repo_root, paths[path]):
                self.fetched.append(path)
                self.left_out.remove(path)
                _run(top, "update-index", "--no-skip-worktree", "--", path)
                _git(top, "checkout-index", "--force", "--", path)
            else:
                still.append(path)
        if still:
            shown = ", ".join(f"{p} ({paths[p][:12]})" for p in still[:3]) + (
                f" and {len(still) - 3} more" if len(still) > 3 else ""
            )
            raise MissingBlob(
                f"{shown}: not in this clone (a partial or damaged clone), and the run reads "
                f"{'them' if len(still) > 1 else 'it'}; bring the objects in: `git -C {self.repo_root} fetch "
                "--refetch origin` (or clone the repository again without --filter)"
            )


def _listing(top: Path, commit: str) -> dict[str, str]:
    """{path: blob sha} of the commit's files (symlinks included; submodules are no files here)."""
    out: dict[str, str] = {}
    for entry in _git(top, "ls-tree", "-r", "-z", "--full-tree", commit).split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        _mode, kind, sha = meta.split()
        if kind == "blob":
            out[path] = sha
    return out


def _missing(top: Path, commit: str, paths: dict[str, str]) -> set[str]:
    """The blob shas of the commit's tree that no object store here has (without asking any remote)."""
    listed = _git(top, "rev-list", "--objects", "--missing=print", "--no-walk", f"{commit}^{{tree}}")
    shas = set(paths.values())
    return {line[1:].split()[0] for line in listed.splitlines() if line.startswith("?")} & shas


def _fetch(repo_root: Path, sha: str) -> bool:
    """Ask the repository for the blob: a partial clone fetches it from its promisor remote; else it is absent."""
    try:
        _git(repo_root, "cat-file", "-e", sha)
        return True
    except (ValueError, subprocess.TimeoutExpired):
        return False


def _closure(top: Path, reads: list[str], paths: dict[str, str]) -> dict[str, str | None]:
    """The files the recipes' Python files import (statically), over the folder as materialized plus the
    left-out paths (listed, unreadable), so an import of a left-out module is seen."""
    from model_compile.discover.tree import read_regular
    from model_compile.parse.imports import ImportGraph

    class _Listed:
        def files(self) -> list[str]:
            return sorted(paths)

        def read_bytes(self, path: str) -> bytes | None:
            data, _ = read_regular(top / path, top, max_bytes=None)
            return data

    graph = ImportGraph(_Listed())
    roots = [p for p in paths if p.endswith(".py") and any(p.startswith(r + "/") for r in reads)]
    return graph.closure(roots)


def toplevel(path: Path) -> Path:
    """The root of the git work tree `path` lies in (the recipes' root may be a folder below it)."""
    return Path(_git(path, "rev-parse", "--show-toplevel")).resolve()


def relative(path: Path, top: Path) -> str:
    """`path` relative to the git root `top`, in git's form ('' for the root itself)."""
    rel = path.resolve().relative_to(top.resolve()).as_posix()
    return "" if rel == "." else posixpath.normpath(rel)


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


def files(top: Path, commit: str, under: str) -> list[str]:
    """The commit's file paths inside the folder `under` (repository-relative); [] when git cannot say."""
    prefix = under.rstrip("/") + "/"
    try:
        return sorted(p for p in _listing(top, commit) if p.startswith(prefix))
    except ValueError:
        return []


def log(top: Path, since: str, until: str, paths: list[str]) -> list[str]:
    """`<short sha> <subject>` of the commits in since..until that touch `paths`, newest first; [] when git
    cannot say."""
    try:
        out = _git(top, "log", "--format=%h %s", f"{since}..{until}", "--", *paths)
    except ValueError:
        return []
    return [line for line in out.splitlines() if line.strip()]


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


def since(repo_root: Path, rev: str) -> dict[str, list[int]]:
    """The Python lines the work tree changed against REV, by path from `repo_root` (the folder holding the
    recipes, which may lie below the git root); empty when git cannot say."""
    try:
        commit, _ = resolve(repo_root, rev)
        top = toplevel(repo_root)
        prefix = relative(repo_root, top)
        found = changed_lines(top, commit)
    except (ValueError, OSError):
        return {}
    if not prefix:
        return found
    return {p[len(prefix) + 1 :]: v for p, v in found.items() if p.startswith(prefix + "/")}
