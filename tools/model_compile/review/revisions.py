"""Which revisions a review compares: the head (the working tree, HEAD or --head) and the base (--base, HEAD for
a dirty tree, else the nearer merge base of HEAD with the local and the remote default branch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from gitdb.exc import BadName, BadObject

from model_compile.errors import InputError
from model_compile.review.gittree import GitTree, WorkTree


@dataclass
class Side:
    """One side of the comparison."""

    tree: GitTree | WorkTree
    rev: str
    commit: str | None  # None for the working tree
    treeish: Any = None  # a tree that is no commit (a merge result), compared in place of `commit`

    @property
    def is_worktree(self) -> bool:
        return self.commit is None and self.treeish is None


def is_shallow(repo: git.Repo) -> bool:
    return (Path(repo.common_dir) / "shallow").exists()


def fetch_line(repo: git.Repo, rev: str | None = None) -> str:
    """The fetch that brings `rev` (a remote-tracking name: its branch; in a shallow clone: the history too), or ''
    when git cannot help (a name no remote has, in a full clone)."""
    shallow = is_shallow(repo)
    remotes = {r.name for r in repo.remotes}
    unshallow = " --unshallow" if shallow else ""
    if rev and "/" in rev and rev.split("/", 1)[0] in remotes:
        remote, branch = rev.split("/", 1)
        return f"`git fetch{unshallow} {remote} {branch}`"
    if shallow:
        remote = "origin" if "origin" in remotes else next(iter(sorted(remotes)), "origin")
        return f"`git fetch --unshallow {remote}`"
    return ""


def _shallow_hint(repo: git.Repo, rev: str | None = None) -> str:
    line = fetch_line(repo, rev)
    if not line:
        return ""
    what = "this is a shallow clone" if is_shallow(repo) else "not fetched here"
    return f" ({what}: fetch it with {line})"


def resolve_commit(repo: git.Repo, rev: str) -> git.Commit:
    try:
        obj = repo.rev_parse(rev)
        commit = obj if isinstance(obj, git.Commit) else obj.object if isinstance(obj, git.TagObject) else None
        if commit is None:
            commit = repo.commit(rev)
        _ = commit.tree  # forces the object to be read: missing objects fail here
        return commit
    except (BadName, BadObject, ValueError, git.GitCommandError, IndexError, KeyError):
        raise InputError(f"unknown revision '{rev}'{_shallow_hint(repo, rev)}") from None


LOCAL_DEFAULTS = ("main", "master")
REMOTE_DEFAULTS = ("origin/HEAD", "origin/main", "origin/master")


def _first_rev(repo: git.Repo, names: tuple[str, ...]) -> str | None:
    for name in names:
        try:
            repo.rev_parse(name)
            return name
        except (BadName, BadObject, ValueError, git.GitCommandError, IndexError, KeyError):
            continue
    return None


def default_branch(repo: git.Repo) -> str | None:
    """origin/HEAD, else main, else master (local, then origin/)."""
    return _first_rev(repo, REMOTE_DEFAULTS[:1] + LOCAL_DEFAULTS + REMOTE_DEFAULTS[1:])


@dataclass
class BaseChoice:
    """The merge base a branch review compares with, which default branch gave it, and why."""

    commit: git.Commit | None  # None: no default branch, or no merge base with any
    branch: str | None
    notes: list[str]


def default_base(repo: git.Repo, head: git.Commit, head_label: str = "HEAD") -> BaseChoice:
    """The nearer of the merge bases of `head` with the local and the remote default branch.

    When both exist and differ, the one that descends from the other holds no commit that is not the
    branch's own (a branch made from a local main that is ahead of origin/main): that one is used, and
    the other is named. A default branch that already contains `head` (HEAD is main itself) is not
    compared with; when every default branch contains it, the base is `head` (nothing between them).
    """
    found: list[tuple[str, git.Commit]] = []
    for name in (_first_rev(repo, REMOTE_DEFAULTS), _first_rev(repo, LOCAL_DEFAULTS)):
        if name is None:
            continue
        try:
            bases = repo.merge_base(head, name)
        except git.GitCommandError:
            bases = []
        if bases:
            found.append((name, bases[0]))
    if not found:
        return BaseChoice(None, default_branch(repo), [])
    if len(found) == 2 and found[0][1].hexsha == found[1][1].hexsha:
        found = found[:1]
    if len(found) == 1:
        name, commit = found[0]
        return BaseChoice(commit, name, [f"base is the merge base of {head_label} with {name}"])
    ahead = [(n, c) for n, c in found if c.hexsha != head.hexsha]
    contains = [n for n, c in found if c.hexsha == head.hexsha]
    if not ahead:
        name, commit = found[0]
        return BaseChoice(commit, name, [f"base is the merge base of {head_label} with {name}"])
    if len(ahead) == 1:
        name, commit = ahead[0]
        return BaseChoice(
            commit,
            name,
            [
                f"base is the merge base of {head_label} with {name} ({commit.hexsha[:12]}); {contains[0]} already "
                f"contains {head_label} (their merge base is {head_label} itself), so it is not compared with"
            ],
        )
    (n1, c1), (n2, c2) = ahead
    if repo.is_ancestor(c1, c2):
        (near, nc), (far, fc) = (n2, c2), (n1, c1)
        why = "nearer: it descends from the other"
    elif repo.is_ancestor(c2, c1):
        (near, nc), (far, fc) = (n1, c1), (n2, c2)
        why = "nearer: it descends from the other"
    else:
        (near, nc), (far, fc) = (n1, c1), (n2, c2)
        why = f"{n1} and {n2} have diverged; the remote's is used"
    return BaseChoice(
        nc,
        near,
        [
            f"base is the merge base of {head_label} with {near} ({nc.hexsha[:12]}; {why}); the merge base with "
            f"{far} is {fc.hexsha[:12]} (pass --base {far} to review against it)"
        ],
    )


def _merge_base(repo: git.Repo, head: git.Commit, head_label: str, notes: list[str]) -> tuple[git.Commit, str]:
    choice = default_base(repo, head, head_label)
    if choice.branch is None:
        raise InputError("no default branch (origin/HEAD, main, master) to compare with: pass --base REV")
    if choice.commit is None:
        raise InputError(
            f"no merge base between {head.hexsha[:12]} and {choice.branch}{_shallow_hint(repo, choice.branch)}: "
            "pass --base REV"
        )
    base = choice.commit
    notes.extend(choice.notes)
    if base.hexsha == head.hexsha:
        notes.append(
            f"{head_label} is already contained in {choice.branch}: nothing between them; pass --base REV (e.g. --base HEAD~1)"
        )
    return base, choice.branch


def resolve(repo: git.Repo, base: str | None, head: str | None) -> tuple[Side, Side, list[str], str | None]:
    """(base, head, notes, the default branch whose merge base is the base when none was given)."""
    notes: list[str] = []
    target = None
    try:
        _ = repo.head.commit
    except ValueError:
        raise InputError("the repository has no commits yet") from None
    if head is None:
        head_commit = repo.head.commit
        absent = absent_for_want_of_blobs(repo)
        if absent:
            notes.append(
                f"{len(absent)} tracked file(s) are absent from the working tree because this clone lacks their blobs "
                f"({', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''}): not counted as changes"
            )
        if _dirty(repo, set(absent)):
            head_side = Side(WorkTree(repo, absent=absent), "working tree", None)
            if base is None:
                base = "HEAD"
                notes.append("base is HEAD: the working tree has uncommitted changes")
        else:
            # A clean tree is its HEAD commit: name what is reviewed (branch and commit).
            head_side = Side(GitTree(head_commit), _branch_label(repo), head_commit.hexsha)
            notes.append("working tree is clean: head is the HEAD commit")
    else:
        head_commit = resolve_commit(repo, head)
        head_side = Side(GitTree(head_commit), head, head_commit.hexsha)
    if base is None:
        base_commit, target = _merge_base(repo, head_commit, "HEAD" if head is None else head, notes)
        base_rev = base_commit.hexsha[:12]
    else:
        base_commit = resolve_commit(repo, base)
        base_rev = base
    return Side(GitTree(base_commit), base_rev, base_commit.hexsha), head_side, notes, target


def absent_for_want_of_blobs(repo: git.Repo) -> list[str]:
    """Tracked files missing from the working tree whose blob this clone lacks (a partial clone, a damaged one):
    a checkout could not write them, so their absence is no change of the user's."""
    deleted = [p for p in repo.git.ls_files("-z", "--deleted").split("\0") if p]
    if not deleted:
        return []
    staged = repo.git.ls_files("-z", "--stage", "--", *deleted[:2000]).split("\0")
    out = []
    for entry in staged:
        meta, _, path = entry.partition("\t")
        fields = meta.split()
        if len(fields) == 3 and fields[0] != "160000":
            try:
                repo.odb.info(bytes.fromhex(fields[1]))
            except ValueError:
                out.append(path)
    return sorted(out)


def _dirty(repo: git.Repo, absent: set[str]) -> bool:
    """Uncommitted changes, staged or not, or untracked files, other than the files absent for want of blobs."""
    if not absent:
        return bool(repo.is_dirty(index=True, working_tree=True, untracked_files=True))
    entries = [e for e in repo.git.status("--porcelain", "-z", "--untracked-files=normal").split("\0") if e]
    return any(not (e[:2] == " D" and e[3:] in absent) for e in entries)


def _branch_label(repo: git.Repo) -> str:
    """The checked-out branch name, else `HEAD` (detached)."""
    try:
        return repo.active_branch.name
    except (TypeError, ValueError):
        return "HEAD"
