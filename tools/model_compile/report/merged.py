"""Where the runtime layers of a change run, and against what: the change as it will merge.

- A branch whose target moved on and merges cleanly: the merge result (`git merge-tree --write-tree`),
  materialized in a temporary tree, against the target's tip.
- One whose merge conflicts: the branch itself against its merge base, saying so, with the conflicts (file and
  kind) and what the target has since that the run lacks.
- `--head REV` with nothing to merge: REV, materialized, against the base.
- The working tree (dirty, or HEAD when clean with nothing to merge): the files on disk, against the base.

Nothing is written to the repository (hard.env.worktree). A file the run reads that this clone lacks refuses
the runtime layers in one line with the fetch; files it does not read are left out and listed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.review.models import DiffReport


@dataclass
class RuntimeTree:
    """What the runtime layers run on: `disk` (the checkout), `commit` (one commit) or `merge` (head into
    target), and the revision the rehearsal compares with."""

    kind: str
    base: str | None
    commit: str | None = None
    target: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def materialized(self) -> bool:
        return self.kind != "disk"


def _listed(paths: list[str], scope: set[str], limit: int = 5) -> str:
    """The paths in scope first (a recipe's folder), then Python files, then the rest, `limit` of them."""
    ranked = sorted(paths, key=lambda p: (not any(p.startswith(f"recipes/{s}/") for s in scope), not p.endswith(".py")))
    return ", ".join(ranked[:limit]) + (f" and {len(ranked) - limit} more" if len(ranked) > limit else "")


def plan(diff: DiffReport, head: str | None, recipes: set[str]) -> RuntimeTree:
    """Where the runtime layers of this change run (see the module's docstring)."""
    merge = diff.merge
    head_rev = diff.head.rev
    if merge is not None and merge.clean and diff.head.commit:
        return RuntimeTree(
            "merge",
            base=merge.target_commit,
            commit=diff.head.commit,
            target=merge.target_commit,
            notes=[
                f"the runtime layers ran on the merge result of {_short(head_rev, merge.target)} into {merge.target} "
                f"(git merge-tree, in a temporary tree), and the base's on {merge.target}'s tip "
                f"{merge.target_commit[:12]}"
            ],
        )
    if merge is not None and diff.head.commit:
        kinds = ", ".join(f"{p} ({merge.kinds.get(p, 'content')})" for p in merge.conflicts[:6])
        more = f" and {len(merge.conflicts) - 6} more" if len(merge.conflicts) > 6 else ""
        lacks = (
            f"; {merge.target} has {merge.ahead} commit(s) since, which this run lacks "
            f"({len(merge.target_changed)} file(s): {_listed(merge.target_changed, recipes)})"
            if merge.target_changed
            else ""
        )
        return RuntimeTree(
            "commit",
            base=merge.merge_base,
            commit=diff.head.commit,
            notes=[
                f"the merge into {merge.target} conflicts in {len(merge.conflicts)} file(s): {kinds}{more}. The "
                f"runtime layers ran on the branch ({_short(head_rev, merge.target)}, {diff.head.commit[:12]}) "
                f"against its merge base {merge.merge_base[:12]} instead{lacks}"
            ],
        )
    if head is not None and diff.head.commit:
        return RuntimeTree(
            "commit",
            base=diff.base.commit,
            commit=diff.head.commit,
            notes=[
                f"the runtime layers ran on {head_rev} ({diff.head.commit[:12]}, in a temporary tree) against "
                f"{diff.base.rev}"
            ],
        )
    notes = []
    moved = next((n for n in diff.notes if "has moved on since the merge base" in n), None)
    if moved:
        notes.append(
            "the runtime layers ran on the files on disk against the merge base: the target's commits since are "
            "not in this run"
        )
    elif diff.head.commit is None:
        notes.append(
            f"the runtime layers ran on the working tree (the head, uncommitted files included) against {diff.base.rev}"
        )
    return RuntimeTree("disk", base=diff.base.commit or None, notes=notes)


def _short(head_rev: str, target: str) -> str:
    """The branch's name as given (the merge view names the head `X merged into T`)."""
    return head_rev.removesuffix(f" merged into {target}")


@contextlib.contextmanager
def materialize(where: RuntimeTree, root: Path, recipe_paths: list[str]) -> Iterator[tuple[Path, list[str]]]:
    """(the folder the runtime layers run in, notes about it): `root` itself for the files on disk, else a
    temporary tree of the commit or the merge, removed after. ValueError (one line) when it cannot be made."""
    if not where.materialized:
        yield root, []
        return
    from model_compile.hard.env.worktree import Worktree, relative, toplevel

    top = toplevel(root)
    below = relative(root, top)
    reads = [f"{below}/{p}".strip("/") if below else p for p in recipe_paths]
    if where.kind == "merge":
        assert where.target is not None and where.commit is not None
        tree = Worktree(top, merge=(where.target, where.commit), reads=reads)
    else:
        tree = Worktree(top, where.commit, reads=reads)
    with tree as folder:
        notes = []
        if tree.left_out:
            shown = ", ".join(tree.left_out[:3]) + (
                f" and {len(tree.left_out) - 3} more" if len(tree.left_out) > 3 else ""
            )
            notes.append(
                f"{len(tree.left_out)} file(s) of the reviewed tree are not in this clone ({shown}): left out of the "
                "temporary tree, as no recipe's run reads them"
            )
        if tree.fetched:
            notes.append(f"fetched for the run (this clone lacked them): {', '.join(tree.fetched[:5])}")
        yield (folder / below if below else folder), notes


def relabel(reports: dict[str, Any], folder: Path, root: Path) -> dict[str, Any]:
    """The hard reports as if they had run in `root`: the temporary folder is gone after the run; its paths in
    commands and reasons name the repository's files (as the merge result has them)."""
    if folder == root:
        return reports
    out: dict[str, Any] = {}
    for name, report in reports.items():
        text = report.model_dump_json()
        for old in {str(folder), str(folder.resolve())}:
            text = text.replace(old, str(root))
        out[name] = type(report).model_validate_json(text)
    return out
