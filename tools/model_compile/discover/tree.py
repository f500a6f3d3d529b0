"""Read-only views of a repository's files: on disk, in memory, or in git.

Analysis never opens files itself; it asks a `SourceTree`. That keeps the
static path safe (nothing is imported or executed), lets `diff` analyse a git
revision without a checkout, and lets rule examples run from memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Protocol


class SourceTree(Protocol):
    """Files addressed by POSIX paths relative to the tree root."""

    def files(self) -> list[str]:
        """Every regular file, sorted."""

    def read_bytes(self, path: str) -> bytes | None:
        """Raw content, or None when the file does not exist."""


def is_binary(data: bytes | None) -> bool:
    """A NUL byte near the start, as git judges it."""
    return data is not None and b"\0" in data[:8192]


def read_text(tree: SourceTree, path: str) -> tuple[str | None, str | None]:
    """(text, problem): UTF-8 text, or None and why it could not be read."""
    data = tree.read_bytes(path)
    if data is None:
        return None, "missing"
    if is_binary(data):
        return None, "binary file"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start})"


class MemoryTree:
    """A tree held in a dict: rule examples, tests, git blobs."""

    def __init__(self, files: dict[str, str | bytes]):
        self._files = {
            str(PurePosixPath(k)): (v.encode() if isinstance(v, str) else v) for k, v in files.items()
        }

    def files(self) -> list[str]:
        return sorted(self._files)

    def read_bytes(self, path: str) -> bytes | None:
        return self._files.get(path)


# Folders never worth walking into.
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".tox"}


class DiskTree:
    """Files under a directory. Symlinked folders are not followed (no loops)."""

    def __init__(self, root: Path, subdirs: Iterable[str] | None = None):
        self.root = Path(root)
        self._subdirs = list(subdirs) if subdirs is not None else None
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        if self._files is None:
            out: list[str] = []
            starts = [self.root / s for s in self._subdirs] if self._subdirs is not None else [self.root]
            for start in starts:
                if not start.is_dir():
                    continue
                for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
                    dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
                    rel = Path(dirpath).relative_to(self.root)
                    for name in filenames:
                        full = Path(dirpath) / name
                        if full.is_symlink() and not full.is_file():
                            continue  # dangling or looping link
                        out.append((rel / name).as_posix())
            self._files = sorted(set(out))
        return self._files

    def read_bytes(self, path: str) -> bytes | None:
        full = self.root / path
        try:
            if not full.is_file():
                return None
            return full.read_bytes()
        except OSError:
            return None


class OverlayTree:
    """A tree with some files replaced or added: what a planned edit would leave."""

    def __init__(self, base: SourceTree, overrides: dict[str, str | bytes]):
        self._base = base
        self._over = {k: (v.encode() if isinstance(v, str) else v) for k, v in overrides.items()}

    def files(self) -> list[str]:
        return sorted(set(self._base.files()) | set(self._over))

    def read_bytes(self, path: str) -> bytes | None:
        if path in self._over:
            return self._over[path]
        return self._base.read_bytes(path)
