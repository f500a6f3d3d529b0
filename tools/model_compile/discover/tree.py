"""Read-only views of a repository's files: on disk, in memory, or in git.

Analysis never opens files itself; it asks a `SourceTree`. That keeps the
static path safe (nothing is imported or executed), lets `diff` analyse a git
revision without a checkout, and lets rule examples run from memory.

Reading from disk is bounded (`read_regular`): regular files only (a FIFO
would block, a device never ends), symlinks only when they resolve inside the
repository, and at most `max-file-bytes`. A tree remembers why a file could
not be read (`problem_of`), so the caller reports it instead of skipping it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Protocol

from model_compile.settings import DEFAULT_MAX_FILE_BYTES


class SourceTree(Protocol):
    """Files addressed by POSIX paths relative to the tree root."""

    def files(self) -> list[str]:
        """Every regular file, sorted."""

    def read_bytes(self, path: str) -> bytes | None:
        """Raw content, or None when the file does not exist."""


def is_binary(data: bytes | None) -> bool:
    """A NUL byte near the start, as git judges it."""
    return data is not None and b"\0" in data[:8192]


def problem_of(tree: object, path: str) -> str | None:
    """Why `tree` could not read `path` (None: it read it, or the file is missing)."""
    getter = getattr(tree, "problem", None)
    return getter(path) if callable(getter) else None


def unlisted_of(tree: object) -> dict[str, str]:
    """Folders of `tree` that could not be listed: {relative path: OS error}."""
    getter = getattr(tree, "unlisted", None)
    return dict(getter()) if callable(getter) else {}


def fork_safe(tree: object) -> bool:
    """The tree reads nothing through a shared handle (a git process, a socket), so a forked child can read it."""
    return bool(getattr(tree, "fork_safe", False))


def read_text(tree: SourceTree, path: str) -> tuple[str | None, str | None]:
    """(text, problem): UTF-8 text, or None and why it could not be read."""
    data = tree.read_bytes(path)
    if data is None:
        return None, problem_of(tree, path) or "missing"
    return decode_text(data)


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """(text, problem) of bytes already read: UTF-8 text, or None and why they are not."""
    if is_binary(data):
        return None, "binary file"
    try:
        return data.decode("utf-8").removeprefix("\ufeff"), None  # a BOM is not content (Python accepts it)
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start})"


class MemoryTree:
    """A tree held in a dict: rule examples, tests, git blobs."""

    fork_safe = True

    def __init__(self, files: dict[str, str | bytes]):
        self._files = {str(PurePosixPath(k)): (v.encode() if isinstance(v, str) else v) for k, v in files.items()}

    def files(self) -> list[str]:
        return sorted(self._files)

    def read_bytes(self, path: str) -> bytes | None:
        return self._files.get(path)


# Folders never worth walking into.
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".tox"}


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _inside(path: str, boundary: str) -> bool:
    return path == boundary or path.startswith(boundary.rstrip(os.sep) + os.sep)


def read_regular(
    full: str | os.PathLike[str], boundary: Path | None = None, max_bytes: int | None = DEFAULT_MAX_FILE_BYTES
) -> tuple[bytes | None, str | None]:
    """(content, None), or (None, why not): "missing" when there is no such file.

    Never blocks and never reads without bound: FIFOs, devices, sockets and
    folders are refused before they are opened; a symlink is followed only
    when it resolves inside `boundary` (default: do not follow); at most
    `max_bytes` are read (None: no cap).
    """
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, exc.strerror or type(exc).__name__
    target = str(full)
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(full)
        if boundary is None:
            return None, f"a symlink (to {os.readlink(full)}): not followed"
        if not _inside(real, os.path.realpath(boundary)):
            return None, f"symlink to {os.readlink(full)}, outside the repository (not followed)"
        try:
            st = os.stat(real)
        except OSError as exc:
            return None, f"broken symlink ({exc.strerror})"
        target = real
    if not stat.S_ISREG(st.st_mode):
        return None, f"{_kind(st.st_mode)}, not a regular file"
    if max_bytes is not None and st.st_size > max_bytes:
        return None, _too_large(st.st_size, max_bytes)
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as exc:
        return None, exc.strerror or type(exc).__name__
    return _read_open(fd, max_bytes)


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)


def read_listed_regular(
    full: str, boundary: Path | None = None, max_bytes: int | None = DEFAULT_MAX_FILE_BYTES
) -> tuple[bytes | None, str | None]:
    """`read_regular` of a path a listing has just seen as a regular file (not a link).

    Opened at once, without following a link, and checked on the open file,
    which saves asking the file system about the path first. Anything else
    found there now (it was replaced since the listing) goes through
    `read_regular`.
    """
    try:
        fd = os.open(full, _OPEN_FLAGS)
    except OSError:
        return read_regular(full, boundary, max_bytes)
    try:
        st = os.fstat(fd)
        regular = stat.S_ISREG(st.st_mode)
    except OSError:
        regular = False
    if not regular or (max_bytes is not None and st.st_size > max_bytes):
        os.close(fd)
        return read_regular(full, boundary, max_bytes)  # says why, as for a path never listed
    return _read_open(fd, max_bytes, checked=True, expected=st.st_size)


def _read_open(
    fd: int, max_bytes: int | None, checked: bool = False, expected: int | None = None
) -> tuple[bytes | None, str | None]:
    """Read an open file to its end (at most `max_bytes`, one more to tell it is larger) and close it.

    `expected`: the size the open file's fstat gave. The first read asks for
    one byte more than that: a file still that size is read in one call, with
    no second call to see its end and no 1 MiB buffer for a small file.
    """
    try:
        if not checked and not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since lstat
            return None, "not a regular file"
        limit = (max_bytes + 1) if max_bytes is not None else None
        chunks, size = [], 0
        if expected is not None:
            want = expected + 1 if limit is None else min(expected + 1, limit)
            first = os.read(fd, want)
            if len(first) == expected and expected < want:
                os.close(fd)  # all of it: the end is where fstat put it (a file growing meanwhile is read as it was)
                fd = -1
                return first, None
            if first:
                chunks.append(first)
                size = len(first)
            else:
                limit = 0  # the end already: empty (or emptied since fstat)
        while limit is None or size < limit:
            chunk = os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return None, exc.strerror or type(exc).__name__
    finally:
        if fd >= 0:
            os.close(fd)
    if max_bytes is not None and size > max_bytes:
        return None, _too_large(size, max_bytes)
    return b"".join(chunks), None


def _too_large(size: int, max_bytes: int) -> str:
    return f"file too large, skipped ({size:,} bytes > max-file-bytes {max_bytes:,})"


class DiskTree:
    """Files under a directory, read with `read_regular`.

    Symlinked folders are not followed (no loops). Every non-folder entry is
    listed, FIFOs and dangling links included, so a file that cannot be read
    is reported (`problem`) rather than silently missing; folders that cannot
    be listed are kept in `unlisted()`.
    """

    fork_safe = True

    def __init__(
        self,
        root: Path,
        subdirs: Iterable[str] | None = None,
        max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
        boundary: Path | None = None,
    ):
        self.root = Path(root)
        self._root_str = str(self.root)
        self.boundary = Path(boundary) if boundary is not None else self.root
        self.max_file_bytes = max_file_bytes
        self._subdirs = list(subdirs) if subdirs is not None else None
        self._files: list[str] | None = None
        self._problems: dict[str, str] = {}
        self._unlisted: dict[str, str] = {}
        self._regular: set[str] = set()  # listed as regular files (not links): read without a first lstat

    def files(self) -> list[str]:
        if self._files is None:
            out: list[str] = []
            starts = [self.root / s for s in self._subdirs] if self._subdirs is not None else [self.root]
            for start in starts:
                if start.is_dir():
                    self._walk(start, out)
            self._files = sorted(set(out))
        return self._files

    def _walk(self, start: Path, out: list[str]) -> None:
        """Every non-folder entry under `start`, as os.walk(followlinks=False) lists them.

        A symlink to a folder is a folder that is not entered (so not a file);
        anything else that is not a folder (a file, a dangling link, a FIFO) is
        listed. Written on os.scandir: the entry's type comes with the listing,
        where os.walk asks the file system again for each folder.
        """
        root = str(self.root)
        regular = self._regular
        todo = [str(start)]
        while todo:
            folder = todo.pop()
            try:
                entries = os.scandir(folder)
            except OSError as exc:
                self._on_error(exc)
                continue
            # String prefixes, not Path.relative_to per folder: every folder is under `root`.
            rel = folder[len(root) :].lstrip(os.sep).replace(os.sep, "/")
            with entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    if not is_dir:
                        name = f"{rel}/{entry.name}" if rel else entry.name
                        out.append(name)
                        try:
                            if entry.is_file(follow_symlinks=False):  # from the listing's own entry type
                                regular.add(name)
                        except OSError:
                            pass
                    elif entry.name not in SKIP_DIRS and not entry.is_symlink():
                        todo.append(entry.path)

    def _on_error(self, exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else self.root
        try:
            rel = where.relative_to(self.root).as_posix()
        except ValueError:
            rel = where.as_posix()
        self._unlisted[rel] = exc.strerror or type(exc).__name__

    def unlisted(self) -> dict[str, str]:
        """Folders that could not be listed: {relative path ('.' for the root): OS error}."""
        self.files()
        return dict(self._unlisted)

    def problem(self, path: str) -> str | None:
        """Why the last read of `path` failed (None when it did not, or it is missing)."""
        return self._problems.get(path)

    def read_bytes(self, path: str) -> bytes | None:
        read = read_listed_regular if path in self._regular else read_regular
        data, problem = read(os.path.join(self._root_str, path), self.boundary, self.max_file_bytes)
        if problem is not None and problem != "missing":
            self._problems[path] = problem
        return data


class OverlayTree:
    """A tree with some files replaced or added: what a planned edit would leave."""

    def __init__(self, base: SourceTree, overrides: Mapping[str, str | bytes]):
        self._base = base
        self._over = {k: (v.encode() if isinstance(v, str) else v) for k, v in overrides.items()}

    def files(self) -> list[str]:
        return sorted(set(self._base.files()) | set(self._over))

    def read_bytes(self, path: str) -> bytes | None:
        if path in self._over:
            return self._over[path]
        return self._base.read_bytes(path)

    @property
    def fork_safe(self) -> bool:
        return fork_safe(self._base)

    def problem(self, path: str) -> str | None:
        """The base tree's reason for not reading `path` (overridden files always read)."""
        return None if path in self._over else problem_of(self._base, path)

    def unlisted(self) -> dict[str, str]:
        """The base tree's folders that could not be listed."""
        return unlisted_of(self._base)
