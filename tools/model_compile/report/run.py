"""`review`: decide the scope, run soft (and hard) validation, build the report.

Scope: inside git with a change (the working tree against HEAD, or a branch
against its merge base with the default branch, or --base/--head), the
recipes the change touches; without a change, or outside git, every recipe
under PATH. Soft validation always (static); hard validation with `hard=True`
for every recipe in scope that compiles.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from model_compile.analyze import analyze_path, analyze_tree
from model_compile.discover.tree import SourceTree
from model_compile.errors import InputError
from model_compile.findings.models import Report
from model_compile.report import runtime as hardrun
from model_compile.report.build import as_untouched, build_change, build_tree, touched_stages
from model_compile.report.models import ReviewReport
from model_compile.review.models import DiffReport


def project_root(path: Path) -> tuple[Path, str | None]:
    """(folder holding recipes/, recipe name when PATH is one recipe folder)."""
    path = path.resolve()
    if (path / "recipes").is_dir():
        return path, None
    if path.parent.name == "recipes":
        return path.parents[1], path.name
    return path, None


def _git_root(path: Path) -> Path | None:
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    try:
        return Path(repo.working_tree_dir).resolve() if repo.working_tree_dir else None
    finally:
        repo.close()


def _diff(root: Path, base: str | None, head: str | None) -> tuple[DiffReport, Report | None]:
    """The git diff review, plus the head side's full soft report (captured from the same analysis)."""
    from model_compile.review.gittree import WorkTree
    from model_compile.review.run import review

    seen: list[tuple[Any, Report]] = []

    def analyze(tree: SourceTree, recipes: list[str] | None) -> Report:
        report = analyze_tree(tree, recipes=recipes)
        seen.append((tree, report))
        return report

    notes: list[str] = []
    into = None
    if base is None and head is None:
        base, notes, into = _branch_base(root)
    diff = review(root, base=base, head=head, analyze=analyze, into=into)
    if diff.merge is not None:  # the base is the target's tip, not the merge base those notes name
        notes = [n for n in notes if not n.startswith("base is the merge base")]
    diff.notes = notes + [n for n in diff.notes if not n.startswith("working tree")] if notes else diff.notes
    head_report = None
    reviewed = diff.head.tree or diff.head.commit  # a merge result is a tree, not the branch's commit
    for tree, report in seen:
        commit = getattr(getattr(tree, "commit", None), "hexsha", None)
        if (reviewed is None and isinstance(tree, WorkTree)) or (commit and commit == reviewed):
            head_report = report
    return diff, head_report


def _branch_instead(root: Path, merged: DiffReport) -> tuple[DiffReport, Report | None]:
    """A merge that conflicts cannot run: the review (static and runtime) is of the branch against its merge base
    instead, saying so, with each conflict's kind and what the target has since that the review lacks. The merge
    view stays in the JSON (`merge`)."""
    assert merged.merge is not None and merged.head.commit is not None
    where = hardrun.plan(merged, merged.head.rev)
    diff, head_report = _diff(root, merged.merge.merge_base, merged.head.commit)
    diff.base.rev = f"{merged.merge.merge_base[:12]} (the merge base with {merged.merge.target})"
    diff.head.rev = hardrun.branch_name(merged)
    diff.notes = [n for n in diff.notes if not n.startswith("base is")] + where.notes
    diff.merge = merged.merge
    return diff, head_report


def _analyze_revision(root: Path, rev: str, only: str | None) -> Report:
    """The soft report of one git revision (read from the object database, no checkout)."""
    import git

    from model_compile.review.gittree import GitTree

    repo = git.Repo(root)
    try:
        return analyze_tree(GitTree(repo.commit(rev)), recipes=[only] if only else None)
    finally:
        repo.close()


def _branch_base(root: Path) -> tuple[str | None, list[str], str | None]:
    """On a branch ahead of the default branch: its merge base (the nearer of the local and the remote
    default branch's), so the review covers the branch's commits and any uncommitted files together
    (stray untracked files do not hide the branch). Else None."""
    import git

    from model_compile.review.gittree import open_repo
    from model_compile.review.revisions import default_base

    repo = open_repo(root)
    try:
        head = repo.head.commit
        choice = default_base(repo, head)
        if choice.commit is None or choice.commit.hexsha == head.hexsha:
            return None, [], None
        notes = [*choice.notes, "head: the working tree, or HEAD when it is clean"]
        return choice.commit.hexsha[:12], notes, choice.branch
    except (ValueError, git.GitCommandError):
        return None, [], None
    finally:
        repo.close()


def review_path(
    path: Path,
    base: str | None = None,
    head: str | None = None,
    hard: bool = False,
    python: str | None = None,
    trace: bool = False,
    out: Path | None = None,
    config_name: str | None = None,
    runtime: Any = None,
) -> ReviewReport:
    """The review report for PATH (a repository root or one recipe folder). `config_name`: with `hard`, the stage
    the runtime layers run (the rehearsal takes it as `rehearse --config-name` does); `runtime`: the rehearsal's
    options for every recipe the runtime layers run (--config-override, --model-config)."""
    report = _review_path(path, base, head, hard, python, trace, out, config_name, runtime)
    report.scope.root = str(project_root(Path(path))[0])
    return report


def _review_path(
    path: Path,
    base: str | None = None,
    head: str | None = None,
    hard: bool = False,
    python: str | None = None,
    trace: bool = False,
    out: Path | None = None,
    config_name: str | None = None,
    runtime: Any = None,
) -> ReviewReport:
    """The review report for PATH (a repository root or one recipe folder)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise InputError(f"{path}: not a directory (give a repository root or a recipe folder)")
    if python and not Path(python).exists():
        raise InputError(f"--python {python}: no such file")
    root, only = project_root(path)
    git_root = _git_root(root)
    notes: list[str] = []
    if git_root is None:
        if base or head:
            raise InputError(f"{path} is not inside a git repository: --base/--head need one")
        notes.append("not inside a git repository: every recipe under PATH is reviewed")
    elif git_root != root:
        if base or head:
            raise InputError(f"--base/--head need recipes/ at the git root ({git_root}); {root} is below it")
        notes.append(f"recipes/ is not at the git root ({git_root}): every recipe under PATH is reviewed")
    else:
        started = time.monotonic()
        try:
            diff, head_report = _diff(root, base, head)
            if hard and diff.merge is not None and not diff.merge.clean and diff.head.commit:
                diff, head_report = _branch_instead(root, diff)
        except InputError as exc:
            if base or head:
                raise
            diff, head_report = None, None
            notes.append(f"no change to review ({exc}): every recipe under PATH is reviewed")
        seconds = time.monotonic() - started
        if diff is not None and (diff.recipes or diff.shared_files):
            if only is None or only in {d.name for d in diff.recipes}:
                return _change_report(
                    diff,
                    head_report,
                    root,
                    str(path),
                    only,
                    hard,
                    head,
                    python,
                    trace,
                    out,
                    seconds,
                    config_name,
                    runtime,
                )
            return _untouched_report(diff, root, path, only, hard, head, python, trace, out, config_name, runtime)
        if diff is not None:
            notes.append(f"no change between {diff.base.rev} and {diff.head.rev}: every recipe under PATH is reviewed")
            if head is not None:  # review the revision asked for, not the working tree
                soft = _analyze_revision(root, diff.head.commit or head, only)
                notes.append(f"reviewed as of {diff.head.rev}")
                reports: dict[str, Any] = {}
                why: dict[str, str] = {}
                if hard:
                    recipes = [r for r in soft.recipes if r.compile_path != "none"]
                    where = hardrun.plan(diff, head)
                    reports, why, said = hardrun.hard_on_change(
                        where, root, recipes, python, trace, out, None, {}, config_name, runtime, compare=False
                    )
                    notes += said
                return build_tree(soft, root, reports, seconds, why, notes, hard_requested=hard)
    started = time.monotonic()
    soft = analyze_path(path)
    seconds = time.monotonic() - started
    hard_reports: dict[str, Any] = {}
    hard_notes: dict[str, str] = {}
    if hard:
        dirs = {r.name: (path / r.path if r.path != "." else path) for r in soft.recipes if r.compile_path != "none"}
        hard_reports, hard_notes = hardrun.run_hard(dirs, python, trace, out, config_name=config_name, runtime=runtime)
    return build_tree(soft, path, hard_reports, seconds, hard_notes, notes, hard_requested=hard)


def _untouched_report(
    diff: DiffReport,
    root: Path,
    path: Path,
    only: str,
    hard: bool,
    head: str | None,
    python: str | None,
    trace: bool,
    out: Path | None,
    config_name: str | None = None,
    runtime: Any = None,
) -> ReviewReport:
    """A recipe given explicitly that the change does not touch: reviewed whole, every finding existing."""
    started = time.monotonic()
    if head is not None:  # the revision asked for, not the working tree
        soft, base_dir = _analyze_revision(root, diff.head.commit or head, only), root
    else:
        soft, base_dir = analyze_path(path), path
    seconds = time.monotonic() - started
    hard_reports: dict[str, Any] = {}
    hard_notes: dict[str, str] = {}
    runtime_notes: list[str] = []
    if hard and head is not None:  # on the revision (or the merge) as reviewed, whole: nothing to compare with
        recipes = [r for r in soft.recipes if r.compile_path != "none"]
        where = hardrun.plan(diff, head)
        hard_reports, hard_notes, runtime_notes = hardrun.hard_on_change(
            where, root, recipes, python, trace, out, None, {}, config_name, runtime, compare=False
        )
    elif hard:
        dirs = {r.name: (path / r.path if r.path != "." else path) for r in soft.recipes if r.compile_path != "none"}
        hard_reports, hard_notes = hardrun.run_hard(dirs, python, trace, out, config_name=config_name, runtime=runtime)
    report = build_tree(soft, base_dir, hard_reports, seconds, hard_notes, runtime_notes, hard_requested=hard)
    note = (
        f"the change {diff.base.rev} .. {diff.head.rev} does not touch recipe {only} nor any Python file its run "
        "imports: it is reviewed whole (its findings are existing ones)"
    )
    return as_untouched(report, diff, str(path), note)


def _change_report(
    diff: DiffReport,
    head_report: Report | None,
    root: Path,
    label: str,
    only: str | None,
    hard: bool,
    head: str | None,
    python: str | None,
    trace: bool,
    out: Path | None,
    seconds: float,
    config_name: str | None = None,
    runtime: Any = None,
) -> ReviewReport:
    names = {only} if only else None
    hard_reports: dict[str, Any] = {}
    hard_notes: dict[str, str] = {}
    runtime_notes: list[str] = []
    if hard:
        where = hardrun.plan(diff, head)
        recipes = [r for r in (head_report.recipes if head_report else []) if names is None or r.name in names]
        touched = {d.name for d in diff.recipes}
        recipes = [r for r in recipes if r.name in touched and r.compile_path != "none"]
        stages = {d.name: touched_stages(d) for d in diff.recipes}
        changed = {d.name: sorted(d.changed_lines) for d in diff.recipes}
        hard_reports, hard_notes, runtime_notes = hardrun.hard_on_change(
            where, root, recipes, python, trace, out, stages, changed, config_name, runtime
        )
    report = build_change(diff, head_report, root, label, hard_reports, seconds, hard_notes, names, hard_requested=hard)
    report.notes += [n for n in runtime_notes if n not in report.notes and n not in diff.notes]
    return report
