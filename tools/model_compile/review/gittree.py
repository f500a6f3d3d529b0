"""Source trees read straight from git: a commit's blobs, or the working tree.

Nothing here checks out, writes objects, touches the index or the working
tree: commits are listed with `git ls-tree` and blobs streamed from the
object database; the working tree is listed with `git ls-files` (which never
writes the index) and read from disk. Every git process runs with
`GIT_OPTIONAL_LOCKS=0` so even opportunistic index refreshes are off.
"""

from __future__ import annotations

import os
from pathlib import Path

import git

from model_compile.errors import InputError

# ls-tree modes: regular and executable files. Symlinks (120000) and
# submodules (160000) are not files of this repository's source.
_FILE_MODES = {"100644", "100755", "100664"}


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
    """A commit's files, served lazily from the object database."""

    def __init__(self, commit: git.Commit):
        self.commit = commit
        self.repo = commit.repo
        self._shas: dict[str, str] | None = None
        self._cache: dict[str, bytes] = {}

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
            self._shas = shas
        return self._shas

    def files(self) -> list[str]:
        return sorted(self._index())

    def has(self, path: str) -> bool:
        return path in self._index()

    def read_bytes(self, path: str) -> bytes | None:
        sha = self._index().get(path)
        if sha is None:
            return None
        data = self._cache.get(path)
        if data is None:
            data = self.repo.odb.stream(bytes.fromhex(sha)).read()
            self._cache[path] = data
        return data


class WorkTree:
    """The working tree as a change would commit it with `git add -A`.

    Tracked files as they are on disk (staged or not), untracked files that
    are not ignored, and no deleted files.
    """

    label = "working tree"

    def __init__(self, repo: git.Repo):
        self.repo = repo
        assert repo.working_tree_dir is not None  # open_repo() refuses bare repositories
        self.root = Path(repo.working_tree_dir)
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        if self._files is None:
            out = self.repo.git.ls_files("-z", "--cached", "--others", "--exclude-standard")
            paths = {p for p in out.split("\0") if p}
            self._files = sorted(p for p in paths if self._is_file(p))
        return self._files

    def _is_file(self, path: str) -> bool:
        full = self.root / path
        return full.is_file() and not full.is_symlink()

    def has(self, path: str) -> bool:
        return path in self._fileset()

    def read_bytes(self, path: str) -> bytes | None:
        if path not in self._fileset():
            return None
        try:
            return (self.root / path).read_bytes()
        except OSError:
            return None

    def _fileset(self) -> set[str]:
        if not hasattr(self, "_set"):
            self._set = set(self.files())
        return self._set
