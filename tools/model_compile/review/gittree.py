"""Source trees read straight from git: a commit's blobs, or the working tree.

Nothing here checks out, writes objects, touches the index or the working
tree: commits are listed with `git ls-tree` and blobs streamed from the
object database; the working tree is listed with `git ls-files` (which never
writes the index) and read from disk. Every git process runs with
`GIT_OPTIONAL_LOCKS=0` so even opportunistic index refreshes are off.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import git

from model_compile.discover.tree import read_regular
from model_compile.errors import InputError

# ls-tree modes: regular and executable files; symlinks, served when they
# resolve to a file of the same commit (as on disk: `read_regular`); submodules
# (gitlinks) name a commit of another repository and are no file here.
_FILE_MODES = {"100644", "100755", "100664"}
SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
_MAX_LINK_HOPS = 8


def missing_object(sha: str) -> str:
    """Why a blob the tree lists cannot be read."""
    return f"object {sha[:12]} is missing from this clone (partial or damaged): not read"


def open_repo(path: str | os.PathLike) -> git.Repo:
    """The repository containing `path`, with optional locks off."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or directory")
    try:
        repo = git.Repo(p, search_parent_directories=True)
    except git.InvalidGitRepositoryError:
        raise InputError(f"{path} is not inside a git repository") from None
    except git.NoSuchPathError:
        raise InputError(f"{path}: no such file or directory") from None
    if repo.bare:
        raise InputError(f"{path} is a bare repository: diff needs a working tree (use a clone)")
    repo.git.update_environment(GIT_OPTIONAL_LOCKS="0")
    return repo


class GitTree:
    """A commit's files, served lazily from the object database.

    Regular files and symlinks are listed (a symlink reads as the file it
    points to when that is a file of the same commit, like `read_regular` on
    disk); submodule entries (gitlinks) are not files and are kept apart in
    `gitlinks()`. A blob that is listed but absent from the object database
    (a partial or damaged clone) reads as None with its reason in `problem()`.
    """

    def __init__(self, commit: git.Commit):
        self.commit = commit
        self.repo = commit.repo
        self._shas: dict[str, str] | None = None
        self._links: dict[str, str] = {}
        self._gitlinks: dict[str, str] = {}
        self._cache: dict[str, bytes] = {}
        self._problems: dict[str, str] = {}

    @property
    def label(self) -> str:
        return self.commit.hexsha[:12]

    def _index(self) -> dict[str, str]:
        if self._shas is None:
            out = self.repo.git.ls_tree("-r", "-z", "--full-tree", self.commit.hexsha)
            shas: dict[str, str] = {}
            for entry in out.split("\0"):
                if not entry:
                    continue
                meta, _, path = entry.partition("\t")
                mode, kind, sha = meta.split()
                if kind == "blob" and mode in _FILE_MODES:
                    shas[path] = sha
                elif kind == "blob" and mode == SYMLINK_MODE:
                    self._links[path] = sha
                elif kind == "commit" and mode == GITLINK_MODE:
                    self._gitlinks[path] = sha
            self._shas = shas
        return self._shas

    def files(self) -> list[str]:
        return sorted(set(self._index()) | set(self._links))

    def gitlinks(self) -> dict[str, str]:
        """Submodule entries: {path: commit of the other repository}."""
        self._index()
        return dict(self._gitlinks)

    def has(self, path: str) -> bool:
        return path in self._index() or path in self._links

    def problem(self, path: str) -> str | None:
        """Why the last read of `path` returned None (None: it read, or there is no such path)."""
        self._index()
        if path in self._gitlinks:
            return f"a submodule (gitlink to {self._gitlinks[path][:12]}), not a file of this repository"
        return self._problems.get(path)

    def _blob(self, path: str, sha: str) -> bytes | None:
        data = self._cache.get(sha)
        if data is None:
            try:
                data = self.repo.odb.stream(bytes.fromhex(sha)).read()
            except ValueError:  # git: "<sha> missing"
                self._problems[path] = missing_object(sha)
                return None
            self._cache[sha] = data
        return data

    def read_bytes(self, path: str) -> bytes | None:
        index = self._index()
        start, hops = path, 0
        while path in self._links:
            raw = self._blob(start, self._links[path])
            if raw is None:
                return None
            target = raw.decode("utf-8", "surrogateescape")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            hops += 1
            if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                self._problems[start] = f"symlink to {target}, outside the repository (not followed)"
                return None
            if hops > _MAX_LINK_HOPS:
                self._problems[start] = f"symlink to {target}: too many levels of symbolic links"
                return None
            if resolved not in index and resolved not in self._links:
                self._problems[start] = f"broken symlink (to {target}: no such file in this commit)"
                return None
            path = resolved
        sha = index.get(path)
        if sha is None:
            return None
        data = self._blob(start, sha)
        return data


class WorkTree:
    """The working tree as a change would commit it with `git add -A`.

    Tracked files as they are on disk (staged or not), untracked files that
    are not ignored, and no deleted files.
    """

    label = "working tree"
    # Listed through git once (`files()`, before any fork); read from disk only: a forked child can read it.
    fork_safe = True

    def __init__(self, repo: git.Repo, absent: list[str] | None = None):
        self.repo = repo
        assert repo.working_tree_dir is not None  # open_repo() refuses bare repositories
        self.root = Path(repo.working_tree_dir)
        # tracked files a checkout could not write (this clone lacks their blobs): unchanged, not deleted
        self.absent = set(absent or ())
        self._files: list[str] | None = None
        self._set: set[str] | None = None
        self._problems: dict[str, str] = {}

    def files(self) -> list[str]:
        if self._files is None:
            out = self.repo.git.ls_files("-z", "--cached", "--others", "--exclude-standard")
            paths = {p for p in out.split("\0") if p}
            self._files = sorted(p for p in paths if self._is_file(p))
        return self._files

    def _is_file(self, path: str) -> bool:
        """A regular file or a symlink (read as `read_regular` does: followed inside the tree only)."""
        full = self.root / path
        return full.is_symlink() or full.is_file()

    def has(self, path: str) -> bool:
        return path in self._fileset()

    def problem(self, path: str) -> str | None:
        """Why the last read of `path` failed (None when it did not, or it is missing)."""
        return self._problems.get(path)

    def read_bytes(self, path: str) -> bytes | None:
        if path not in self._fileset():
            return None
        data, problem = read_regular(self.root / path, self.root, max_bytes=None)
        if problem is not None and problem != "missing":
            self._problems[path] = problem
        return data

    def _fileset(self) -> set[str]:
        if self._set is None:
            self._set = set(self.files())
        return self._set
