"""A branch reviewed as its merge into a default branch that moved on.

`git merge-tree --write-tree` (git >= 2.38) computes the merge of the branch
into the target without a checkout: the result's tree, and each conflicted
path with its stages (1 base, 2 the target's, 3 the branch's). The merge is
written into a temporary object directory (the repository's own objects are
its alternate), so nothing is added to the repository: its objects, index,
refs and working tree stay as they were. A conflicted path is read as the
branch has it (stage 3; absent where the branch deleted it): the review then
holds for a resolution that keeps the branch's side, and says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import git

from model_compile.review.gittree import GitTree

_NULL_SHA = "0" * 40


@dataclass
class Merge:
    """The merge of `head` into `target`, as `git merge-tree` computes it."""

    target: str  # the branch or revision merged into, as named
    target_commit: str
    merge_base: str
    tree: GitTree  # the merge result, conflicted paths as the branch has them
    conflicts: dict[str, str] = field(default_factory=dict)  # path -> conflict type (content, add/add, ...)
    both_sides: list[str] = field(default_factory=list)  # paths the target and the branch both changed
    target_changed: list[str] = field(default_factory=list)  # paths the target changed since the merge base
    ahead: int = 0  # commits of the target since the merge base
    reader: git.Repo | None = None  # the repository, reading the temporary objects too
    _tmp: str | None = None

    @property
    def clean(self) -> bool:
        return not self.conflicts

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _git(root: str, env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", root, *args], input=stdin, capture_output=True, text=True, env=env, check=False)


def _parse(out: str) -> tuple[str, dict[str, dict[str, tuple[str, str]]], dict[str, str]]:
    """(tree, {path: {stage: (mode, sha)}}, {path: conflict type}) of `git merge-tree --write-tree -z` output."""
    fields = out.split("\0")
    tree = fields[0].strip()
    stages: dict[str, dict[str, tuple[str, str]]] = {}
    i = 1
    while i < len(fields) and fields[i]:
        meta, _, path = fields[i].partition("\t")
        mode, sha, stage = meta.split()
        stages.setdefault(path, {})[stage] = (mode, sha)
        i += 1
    kinds: dict[str, str] = {}
    i += 1  # the empty field between the conflicted files and the messages
    while i < len(fields) and fields[i].isdigit():
        count = int(fields[i])
        paths = fields[i + 1 : i + 1 + count]
        kind = fields[i + 1 + count] if i + 1 + count < len(fields) else ""
        i += count + 3  # the count, the paths, the type and the message
        for path in paths:
            if path in stages and kind.startswith("CONFLICT"):
                named = kind.removeprefix("CONFLICT (").rstrip(")")
                kinds.setdefault(path, "content" if named == "contents" else named)
    for path in stages:
        kinds.setdefault(path, "content")
    return tree, stages, kinds


def _changed(repo: git.Repo, a: str, b: str) -> set[str]:
    out = repo.git.diff("--name-only", "-z", "--no-renames", a, b)
    return {p for p in out.split("\0") if p}


def merge_into(repo: git.Repo, target: str, target_commit: str, head_commit: str) -> Merge | str:
    """The merge of `head_commit` into `target_commit`; a sentence saying why not when it cannot be computed."""
    bases = repo.merge_base(target_commit, head_commit)
    if not bases:
        return f"{target} and the branch have no merge base"
    base = bases[0].hexsha
    tmp = tempfile.mkdtemp(prefix="model-compile-merge-")
    objects = os.path.join(tmp, "objects")
    os.makedirs(objects)
    own = os.path.join(repo.common_dir, "objects")
    env = {
        **os.environ,
        "GIT_OBJECT_DIRECTORY": objects,
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(
            [own, *filter(None, os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES", "").split(os.pathsep))]
        ),
        "GIT_INDEX_FILE": os.path.join(tmp, "index"),
        "GIT_OPTIONAL_LOCKS": "0",
    }
    root = str(repo.working_tree_dir or repo.git_dir)
    done = _git(root, env, "merge-tree", "--write-tree", "-z", target_commit, head_commit)
    if done.returncode not in (0, 1) or not done.stdout:
        shutil.rmtree(tmp, ignore_errors=True)
        why = (done.stderr or "").strip().splitlines()
        return f"git merge-tree --write-tree failed ({why[0] if why else f'status {done.returncode}'}; it needs git >= 2.38)"
    tree, stages, kinds = _parse(done.stdout)
    if stages:  # conflicted paths as the branch has them (stage 3), or gone where the branch deleted them
        lines = []
        for path, by_stage in stages.items():
            mode, sha = by_stage.get("3", ("0", _NULL_SHA))
            lines.append(f"{mode} {sha} 0\t{path}")
        steps = [
            _git(root, env, "read-tree", tree),
            _git(root, env, "update-index", "--index-info", stdin="\n".join(lines) + "\n"),
            _git(root, env, "write-tree"),
        ]
        failed = next((s for s in steps if s.returncode != 0), None)
        if failed is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            return (
                f"the merge's conflicted files could not be read as the branch has them ({failed.stderr.strip()[:200]})"
            )
        tree = steps[-1].stdout.strip()
    reader = git.Repo(root)
    reader.git.update_environment(
        GIT_OBJECT_DIRECTORY=objects,
        GIT_ALTERNATE_OBJECT_DIRECTORIES=env["GIT_ALTERNATE_OBJECT_DIRECTORIES"],
        GIT_OPTIONAL_LOCKS="0",
    )
    on_target = _changed(repo, base, target_commit)
    both = sorted(on_target & _changed(repo, base, head_commit))
    ahead = int(repo.git.rev_list("--count", f"{base}..{target_commit}") or 0)
    return Merge(
        target=target,
        target_commit=target_commit,
        merge_base=base,
        tree=GitTree(reader.tree(tree)),  # a tree serves ls-tree and its blobs as a commit does
        conflicts=kinds,
        both_sides=both,
        target_changed=sorted(on_target),
        ahead=ahead,
        reader=reader,
        _tmp=tmp,
    )


def recipe_of(path: str) -> str | None:
    parts = Path(path).parts
    return parts[1] if len(parts) >= 3 and parts[0] == "recipes" else None
