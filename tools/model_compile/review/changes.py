"""Which files a change touches, between the two sides review/revisions.py resolves.

Files are classified by what they are to a recipe (engine, schema, config,
model code, docs, tests) or to the shared kit.
"""

from __future__ import annotations

import difflib
import os
import re
from collections import Counter
from typing import Any

import git

from model_compile.discover.recipes import group_files
from model_compile.discover.tree import SourceTree, is_binary
from model_compile.errors import InputError
from model_compile.review.models import ChangedFile, FileChange, FileEntry, FileKind
from model_compile.review.revisions import Side

KIT_MARKER = b"def apply_model_compile"


_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


def _hunk_lines(patch: bytes) -> list[int]:
    lines: set[int] = set()
    for m in _HUNK.finditer(patch):
        start = int(m.group(1))
        count = int(m.group(2)) if m.group(2) is not None else 1
        if count == 0:  # pure deletion after line `start`
            lines.update({max(start, 1), start + 1})
        else:
            lines.update(range(start, start + count))
    return sorted(lines)


def classify(path: str, kit_files: set[str]) -> tuple[str | None, FileKind]:
    """(recipe, kind) of one path."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "recipes":
        rest = "/".join(parts[2:])
        lower = rest.lower()
        kind: FileKind
        if rest.startswith("engine/"):
            kind = "engine"
        elif rest.startswith("configs/"):
            kind = "schema" if rest.endswith(".py") else "config"
        elif rest.startswith(("model/", "models/")):
            kind = "model"
        elif rest.startswith("tests/"):
            kind = "tests"
        elif lower.endswith((".md", ".rst", ".txt")) or lower.startswith("readme"):
            kind = "docs"
        else:
            kind = "other"
        return parts[1], kind
    if path in kit_files:
        return None, "kit"
    if parts[0] == "skills":
        return None, "skill"
    return None, "shared"


def _kit_file(side: Side, path: str | None) -> bool:
    if not path or not path.endswith(".py"):
        return False
    data = side.tree.read_bytes(path)
    return data is not None and KIT_MARKER in data


def _pair_untracked_renames(base: Side, head: Side, added: list[str], deleted: list[str]) -> dict[str, str]:
    """Pair untracked new files with deleted ones by content (git can't: they're not staged)."""
    pairs: dict[str, str] = {}
    if not added or not deleted or len(added) * len(deleted) > 40000:
        return pairs
    old_text = {d: (base.tree.read_bytes(d) or b"") for d in deleted}
    for a in added:
        new = head.tree.read_bytes(a) or b""
        best, score = None, 0.5
        for d, old in old_text.items():
            if d in pairs.values():
                continue
            if old == new:
                best, score = d, 1.0
                break
            if is_binary(old) or is_binary(new):
                continue
            sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
            if sm.real_quick_ratio() > score and sm.quick_ratio() > score:
                r = sm.ratio()
                if r > score:
                    best, score = d, r
        if best is not None:
            pairs[a] = best
    return pairs


def git_error(exc: git.GitCommandError) -> str:
    """git's own message, one line: `error: open("x.py"): Permission denied; fatal: cannot hash x.py`."""
    raw = str(exc.stderr or "").strip()
    raw = raw.removeprefix("stderr:").strip().strip("'\"")
    lines = [line.strip() for line in raw.splitlines() if line.strip().strip("'\"")]
    text = "; ".join(lines[:2])
    return (text[:300] + ("..." if len(text) > 300 else "")) if text else f"git exited with status {exc.status}"


_TYPE_MASK = 0o170000
_ENTRY: dict[int, FileEntry] = {0o100000: "file", 0o120000: "symlink", 0o160000: "submodule"}


def _entry(mode: int | None) -> FileEntry | None:
    return _ENTRY.get((mode or 0) & _TYPE_MASK) if mode else None


def _missing(repo: git.Repo, blob: git.Blob | None) -> str | None:
    """The blob's sha when the object database lacks it (a partial or damaged clone)."""
    if blob is None or blob.binsha == git.Object.NULL_BIN_SHA:
        return None
    try:
        repo.odb.info(blob.binsha)
    except ValueError:
        return blob.hexsha
    return None


def _raw_path(d: git.Diff) -> str | None:
    return d.b_path if not d.deleted_file else d.a_path


def collect(repo: git.Repo, base: Side, head: Side) -> list[ChangedFile]:
    """The changed files between the two sides, rename-aware.

    Two passes: the raw diff lists every changed entry (files, symlinks,
    submodules) without reading a blob; the patch pass then reads only what
    can be read - a blob missing from the object database (a partial or
    damaged clone) is left out of it and the file says why.
    """
    base_commit = repo.commit(base.commit)
    other = head.treeish if head.treeish is not None else None if head.is_worktree else repo.commit(head.commit)
    if other is not None and other.hexsha == base_commit.hexsha:  # None: the working tree
        return []
    renames: dict[str, Any] = {}  # git's rename detection, unless the listing cannot afford it
    try:
        raw = base_commit.diff(other)
    except git.GitCommandError as exc:
        # Rename detection reads the blobs of deleted and added files: one missing from the clone fails the
        # whole listing. Without it the listing reads trees only (a rename then shows as delete + add).
        renames = {"no_renames": True}
        try:
            raw = base_commit.diff(other, **renames)
        except git.GitCommandError:
            raise InputError(f"git diff failed: {git_error(exc)}") from None
    unreadable: dict[str, str] = {}  # path -> missing sha
    for d in raw:
        for path, blob, mode in ((d.a_path, d.a_blob, d.a_mode), (d.b_path, d.b_blob, d.b_mode)):
            if path and _entry(mode) in ("file", "symlink") and (sha := _missing(repo, blob)):
                unreadable[path] = sha
    paths: list[str | os.PathLike[str]] | None = None
    if unreadable:  # the patch pass must not ask git for what it cannot read
        paths = [".", *(f":(exclude,literal){p}" for p in sorted(unreadable))]
    try:
        patches = base_commit.diff(other, create_patch=True, unified=0, paths=paths, **renames)
    except git.GitCommandError as exc:
        raise InputError(f"git diff failed: {git_error(exc)}") from None
    patch_of: dict[str, bytes] = {}
    for d in patches:
        path = _raw_path(d)
        if path is not None:
            patch_of.setdefault(path, d.diff if isinstance(d.diff, bytes) else (d.diff or "").encode())
    out: list[ChangedFile] = []
    seen: set[str] = set()
    for d in raw:
        a, b = d.a_path, d.b_path
        change: FileChange
        if d.new_file:
            change, path, old = "added", b, None
        elif d.deleted_file:
            change, path, old = "deleted", a, None
        elif d.renamed_file:
            change, path, old = "renamed", b, a
        else:
            change, path, old = "modified", b or a, None
        if path is None or path in seen:
            continue
        if change == "deleted" and head.is_worktree and path in getattr(head.tree, "absent", ()):
            continue  # absent for want of its blob, not deleted by the change
        entry = _entry(d.a_mode if change == "deleted" else d.b_mode) or "file"
        note = None
        lines: list[int] = []
        binary = False
        if entry == "submodule":
            before, after = (d.a_blob.hexsha[:12] if d.a_blob else None), (d.b_blob.hexsha[:12] if d.b_blob else None)
            note = (
                "a submodule (gitlink): another repository's commit"
                + (f" {before} -> {after}" if before and after else f" {after or before}")
                + ", not reviewed"
            )
        elif path in unreadable or (old is not None and old in unreadable):
            sha = unreadable.get(path) or unreadable[old or ""]
            note = f"object {sha[:12]} is missing from this clone (partial or damaged): content not compared"
        else:
            patch = patch_of.get(path, b"")
            binary = b"Binary files" in patch[:400] and not _HUNK.search(patch)
            if change == "deleted" or binary:
                lines = []
            elif change == "added":
                data = head.tree.read_bytes(path)
                lines = list(range(1, (data or b"").count(b"\n") + 2))
            else:
                lines = _hunk_lines(patch)
        seen.add(path)
        out.append(
            ChangedFile(
                path=path, old_path=old, change=change, kind="other", binary=binary, entry=entry, note=note, lines=lines
            )
        )
    if head.is_worktree:
        untracked = [p for p in repo.untracked_files if p not in seen and head.tree.has(p)]
        deleted = [f.path for f in out if f.change == "deleted"]
        pairs = _pair_untracked_renames(base, head, untracked, deleted)
        if pairs:
            out = [f for f in out if not (f.change == "deleted" and f.path in pairs.values())]
        for p in untracked:
            data = head.tree.read_bytes(p) or b""
            binary = is_binary(data)
            lines = [] if binary else list(range(1, data.count(b"\n") + 2))
            if p in pairs:
                old_data = base.tree.read_bytes(pairs[p]) or b""
                lines = _changed_by_difflib(old_data, data) if not binary else []
                out.append(
                    ChangedFile(path=p, old_path=pairs[p], change="renamed", kind="other", binary=binary, lines=lines)
                )
            else:
                out.append(ChangedFile(path=p, change="added", kind="other", binary=binary, lines=lines))
    kit_files = {f.path for f in out if _kit_file(head, f.path) or _kit_file(base, f.old_path or f.path)}
    for f in out:
        f.recipe, f.kind = classify(f.path, kit_files)
        if f.old_path:
            f.old_recipe, _ = classify(f.old_path, kit_files)
        else:
            f.old_recipe = f.recipe
    out.sort(key=lambda f: f.path)
    return out


def _changed_by_difflib(old: bytes, new: bytes) -> list[int]:
    sm = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    lines: set[int] = set()
    for tag, _i1, _i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            lines.update(range(j1 + 1, max(j2, j1 + 1) + 1))
    return sorted(lines)


def recipe_names(tree: SourceTree) -> Counter[str]:
    """Recipe folders (`recipes/<name>/` holding at least one file) -> how many files."""
    return Counter({name: len(files) for name, files in group_files(tree).items()})


def recipe_renames(files: list[ChangedFile], base_names: Counter, head_names: Counter) -> dict[str, str]:
    """old recipe -> new recipe: most of its files were renamed into a folder that is new.

    Git pairs files one by one; a recipe deleted in the same change that adds a
    look-alike recipe may get a few pairs. Only a majority makes a rename.
    """
    votes: dict[str, Counter] = {}
    for f in files:
        if f.change == "renamed" and f.old_recipe and f.recipe and f.old_recipe != f.recipe:
            votes.setdefault(f.old_recipe, Counter())[f.recipe] += 1
    out: dict[str, str] = {}
    for old, counter in votes.items():
        new, _ = counter.most_common(1)[0]
        if old not in head_names and new not in base_names and counter[new] * 2 > base_names[old]:
            out[old] = new
    return out
