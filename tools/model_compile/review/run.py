"""Review one git change: resolve sides, collect files, analyse touched recipes, compare."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from functools import partial

import git

from model_compile import __version__
from model_compile.discover.tree import SourceTree
from model_compile.errors import InputError
from model_compile.findings.models import RecipeReport, Report
from model_compile.review import changes as ch
from model_compile.review import revisions
from model_compile.review.compare import (
    config_changes,
    kit_changes,
    ledger_changes,
    side_view,
    split_findings,
)
from model_compile.review.gittree import GitTree, open_repo
from model_compile.review.merge import Merge, merge_into, recipe_of
from model_compile.review.models import (
    ChangedFile,
    DiffReport,
    ImportedChange,
    MergeView,
    RecipeDiff,
    RecipeStatus,
    Revision,
)
from model_compile.review.modules import outside_compile
from model_compile.review.scope import Reach, mark_code
from model_compile.rules.finding import Finding

Analyzer = Callable[[SourceTree, "list[str] | None"], Report]


def _default_analyzer() -> Analyzer:
    from model_compile.analyze import analyze_tree

    return lambda tree, recipes: analyze_tree(tree, recipes=recipes)


def _analyse(analyze: Analyzer, side: revisions.Side, recipes: list[str] | None) -> Report:
    # Even with no recipe to analyse, the shared kit is (its findings belong to both sides).
    try:
        return analyze(side.tree, recipes)
    except InputError:
        raise
    except Exception as exc:  # a bug in analysis must not look like a clean review
        raise InputError(f"analysis of {side.rev} failed: {type(exc).__name__}: {exc}") from None


def review(
    repo_path: str | os.PathLike,
    base: str | None = None,
    head: str | None = None,
    analyze: Analyzer | None = None,
    into: str | None = None,
) -> DiffReport:
    """The change between base and head. A head commit whose target moved on (`into`, the default branch the base
    was taken from; or a --base that is no ancestor of the head) is reviewed as its merge into the target."""
    analyze = analyze or _default_analyzer()
    repo = open_repo(repo_path)
    merge: Merge | None = None
    try:
        base_side, head_side, notes, target = revisions.resolve(repo, base, head)
        base_side, head_side, merge = _as_merge(repo, base_side, head_side, into or target, base, notes)
        return _review(
            merge.reader if merge and merge.reader else repo,
            base_side,
            head_side,
            analyze,
            str(repo_path),
            notes,
            merge,
        )
    finally:
        if merge is not None:
            merge.close()
        repo.close()


def _as_merge(
    repo: git.Repo,
    base_side: revisions.Side,
    head_side: revisions.Side,
    target: str | None,
    base: str | None,
    notes: list[str],
) -> tuple[revisions.Side, revisions.Side, Merge | None]:
    """The sides of a merge review, when the head's target has commits the head lacks; else the sides as given."""
    if target is None and base is not None and base_side.commit and head_side.commit:
        if not repo.is_ancestor(repo.commit(base_side.commit), repo.commit(head_side.commit)):
            target = base  # --base names a branch that moved on: comparing two trees would misname recipes
    if target is None:
        return base_side, head_side, None
    target_commit = revisions.resolve_commit(repo, target).hexsha
    head_commit = head_side.commit or repo.head.commit.hexsha
    tc, hc = repo.commit(target_commit), repo.commit(head_commit)
    if repo.is_ancestor(tc, hc) or repo.is_ancestor(hc, tc):
        # the target has nothing the head lacks (the plain diff is the merge), or the head is behind it (a
        # comparison backwards, as asked): no merge to compute
        return base_side, head_side, None
    if head_side.is_worktree:
        notes.append(
            f"{target} has moved on since the merge base: the working tree's changes are compared with the merge base, "
            "not as a merge into it (commit them to review the branch as its merge)"
        )
        return base_side, head_side, None
    merge = merge_into(repo, target, target_commit, head_commit)
    if isinstance(merge, str) and revisions.is_shallow(repo) and not repo.merge_base(tc, hc):
        # comparing the two tips would credit the branch with everything the target did since they parted
        raise InputError(
            f"{target} and {head_side.rev} have no merge base in this shallow clone: fetch the history that joins "
            f"them with {revisions.fetch_line(repo, target)}"
        )
    if isinstance(merge, str):
        notes.append(
            f"{target} has moved on since the merge base, but the branch is not reviewed as its merge: {merge}"
        )
        return base_side, head_side, None
    notes.append(
        f"reviewed as the merge of {head_side.rev} into {target} (git merge-tree): {target} has {merge.ahead} commit(s) "
        f"since the merge base {merge.merge_base[:12]}; the merge result is compared with {target} "
        f"({target_commit[:12]})"
    )
    if merge.conflicts:
        shown = ", ".join(f"{p} ({merge.conflicts[p]})" for p in sorted(merge.conflicts)[:6]) + (
            f" (+{len(merge.conflicts) - 6} more)" if len(merge.conflicts) > 6 else ""
        )
        notes.append(
            f"the merge conflicts in {len(merge.conflicts)} file(s): {shown}; conflicted files are read as the branch has "
            "them, so the review holds for a resolution that keeps the branch's side"
        )
    notes.append(_both_sides(merge))
    base_side = revisions.Side(GitTree(repo.commit(target_commit)), target, target_commit)
    head_side = revisions.Side(
        merge.tree, f"{head_side.rev} merged into {target}", head_commit, treeish=merge.tree.commit
    )
    return base_side, head_side, merge


def _outside_recipes(files: list[ChangedFile], base_names: Counter, head_names: Counter, notes: list[str]) -> None:
    """Paths under `recipes/<name>/` where neither side has a file (only submodules, say) belong to no recipe."""
    known = set(base_names) | set(head_names)
    folders: dict[str, list[ChangedFile]] = {}
    for f in files:
        for name in (f.recipe, f.old_recipe):
            if name is not None and name not in known and f not in folders.get(name, []):
                folders.setdefault(name, []).append(f)
        if f.recipe not in known:
            f.recipe = None
        if f.old_recipe not in known:
            f.old_recipe = None
    for name, changed in sorted(folders.items()):
        entries = Counter(f.entry for f in changed)
        what = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(entries.items()))
        notes.append(f"recipes/{name}/ holds no file of this repository on either side ({what} changed): not a recipe")


def _review(
    repo: git.Repo,
    base_side: revisions.Side,
    head_side: revisions.Side,
    analyze: Analyzer,
    repo_label: str,
    notes: list[str],
    merge: Merge | None,
) -> DiffReport:
    files = ch.collect(repo, base_side, head_side)
    report = DiffReport(
        version=__version__,
        repo=repo_label,
        base=Revision(rev=base_side.rev, commit=base_side.commit),
        head=Revision(
            rev=head_side.rev,
            commit=head_side.commit,
            tree=head_side.treeish.hexsha if head_side.treeish is not None else None,
        ),
        notes=notes,
    )
    if merge is not None:
        report.merge = _merge_view(merge)
        report.merged_files = merge.tree.files()
    if not files:
        report.notes.append("no changes between base and head")
        return report

    base_names = ch.recipe_names(base_side.tree)
    head_names = ch.recipe_names(head_side.tree)
    renames = ch.recipe_renames(files, base_names, head_names)
    inverse = {v: k for k, v in renames.items()}
    path_map = {f.old_path: f.path for f in files if f.old_path}
    _outside_recipes(files, base_names, head_names, report.notes)

    mark_code(files, base_side, head_side)
    report.shared_files = [f for f in files if f.recipe is None]
    report.kit_files = sorted({f.path for f in files if f.kind == "kit"})

    # (head name or None, base name or None) for every touched recipe.
    touched: dict[tuple[str | None, str | None], list[ChangedFile]] = {}
    for f in files:
        names: list[str] = []
        if f.recipe:
            names.append(f.recipe)
        if f.old_recipe and f.old_recipe != f.recipe:
            names.append(f.old_recipe)
        key: tuple[str | None, str | None]
        for n in names:
            if n in renames:
                key = (renames[n], n)
            elif n in inverse:
                key = (n, inverse[n])
            else:
                key = (n if n in head_names else None, n if n in base_names else None)
            touched.setdefault(key, []).append(f)

    reached = _reached(Reach(base_side, head_side, files), head_names, base_names, inverse, touched, report.notes)
    want_head = sorted({h for h, _ in touched if h})
    want_base = sorted({b for _, b in touched if b})
    all_recipes = bool(report.kit_files)  # which recipes call a changed kit class is known only after analysis
    head_report = _analyse(analyze, head_side, None if all_recipes else want_head)
    base_report = _analyse(analyze, base_side, None if all_recipes else want_base)
    report.kit_changes, report.kit_classes = kit_changes(base_report.kit, head_report.kit, path_map)
    report.kit_changed = bool(report.kit_classes)
    if report.kit_files and not report.kit_changed:
        report.notes.append(
            f"{', '.join(report.kit_files)} changed outside apply_model_compile: the kit's compile is unchanged "
            "(recipes are in scope where their run imports the file)"
        )
    heads = {r.name: r for r in head_report.recipes}
    bases = {r.name: r for r in base_report.recipes}

    kit_keys: set[tuple[str | None, str | None]] = set()
    if report.kit_changed:
        changed = set(report.kit_classes)

        def calls_changed(r: RecipeReport | None) -> bool:
            return r is not None and r.compile_path != "none" and bool(changed & set(r.kits) or "?" in r.kits)

        for r in head_report.recipes:
            old = inverse.get(r.name, r.name)
            if calls_changed(r) or calls_changed(bases.get(old)):
                kit_keys.add((r.name, old if old in bases else None))
        for r in base_report.recipes:
            if calls_changed(r) and r.name not in renames and r.name not in heads:
                kit_keys.add((None, r.name))
        for key in kit_keys:
            touched.setdefault(key, [])
        unknown = sorted(r.name for r in head_report.recipes if "?" in r.kits)
        if unknown:
            report.notes.append(
                f"{', '.join(unknown)}: the kit class its compile calls is not known statically; in scope for any kit change"
            )

    changed_lines = {f.path: set(f.lines) for f in files if f.change != "deleted"}
    base_findings: list[Finding] = list(base_report.findings)
    head_findings: list[Finding] = list(head_report.findings)
    diffs: list[RecipeDiff] = []
    for (hname, bname), rfiles in sorted(touched.items(), key=lambda kv: kv[0][0] or kv[0][1] or ""):
        hr, br = heads.get(hname) if hname else None, bases.get(bname) if bname else None
        status: RecipeStatus
        if hname and bname and hname != bname:
            status = "renamed"
        elif hname and not bname:
            status = "added"
        elif bname and not hname:
            status = "deleted"
        elif rfiles:
            status = "modified"
        else:
            status = "kit" if (hname, bname) in kit_keys else "imports"
        name = hname or bname
        assert name is not None  # every touched key names the recipe on at least one side
        d = RecipeDiff(
            name=name,
            old_name=bname if status == "renamed" else None,
            status=status,
            files=sorted({id(f): f for f in rfiles}.values(), key=lambda f: f.path),
            before=side_view(br),
            after=side_view(hr),
        )
        d.imports, d.changed_lines = reached.get((hname, bname), ([], {}))
        d.touches = sorted(
            {f.kind for f in d.files} | ({"kit"} if status == "kit" else set()) | ({"imports"} if d.imports else set())
        )
        d.code_changed = (
            status in ("kit", "added", "deleted", "renamed")
            or any(f.code_changed is not False for f in d.files)
            or any(i.code_changed for i in d.imports)
        )
        if br is not None and hr is not None:
            d.ledger_changes = ledger_changes(
                br, hr, partial(outside_compile, repo.working_tree_dir, hr, head_report.kit)
            )
            d.config_changes = config_changes(br, hr, path_map)
        elif hr is not None and hr.ledger:
            d.ledger_changes = [f"new recipe: compile path {hr.compile_path}"]
        elif br is not None:
            d.ledger_changes = [f"recipe removed (compile path was {br.compile_path})"]
        if br is not None:
            base_findings.extend(br.findings)
        if hr is not None:
            head_findings.extend(hr.findings)
        if hname and hr is None and status != "deleted":
            report.notes.append(f"recipe {hname}: analysis found no recipe at head")
        diffs.append(d)
    report.recipes = diffs
    if merge is not None:
        for d in diffs:
            own = {d.name, d.old_name} - {None}
            d.conflicts = sorted(p for p in merge.conflicts if recipe_of(p) in own)
            d.both_sides = any(recipe_of(p) in own for p in merge.both_sides)

    new, fixed, superseded, unchanged = split_findings(base_findings, head_findings, renames, path_map, changed_lines)
    report.new, report.fixed, report.superseded, report.unchanged = new, fixed, superseded, unchanged
    report.unchanged_count = len(unchanged)
    quiet = sum(1 for f in base_findings + head_findings if f.suppressed is not None)
    if quiet:
        report.notes.append(f"{quiet} finding(s) suppressed by ignore comments are not compared")
    by_recipe = {d.name: d for d in diffs}
    for bucket, attr in ((new, "new"), (fixed, "fixed"), (superseded, "superseded"), (unchanged, "unchanged")):
        for df in bucket:
            recipe = df.recipe
            if recipe is not None and attr in ("fixed", "superseded"):
                recipe = renames.get(recipe, recipe)
            if recipe in by_recipe:
                setattr(by_recipe[recipe], attr, getattr(by_recipe[recipe], attr) + 1)
    report.exit_code = 1 if any(f.severity == "error" for f in new) else 0
    return report


def _reached(
    reach: Reach,
    head_names: Counter,
    base_names: Counter,
    inverse: dict[str, str],
    touched: dict[tuple[str | None, str | None], list[ChangedFile]],
    notes: list[str],
) -> dict[tuple[str | None, str | None], tuple[list[ImportedChange], dict[str, list[int]]]]:
    """Each head recipe's changed imports and changed lines; a recipe whose run imports a changed Python file
    outside its folder joins `touched` (scope by what runs)."""
    out: dict[tuple[str | None, str | None], tuple[list[ImportedChange], dict[str, list[int]]]] = {}
    if not reach.files:
        return out
    for name in sorted(head_names):
        old = inverse.get(name, name)
        key = (name, old if old in base_names else None)
        imported, lines = reach.of(name, key[1])
        if imported or lines:
            out[key] = (imported, lines)
        if imported:
            touched.setdefault(key, [])
    notes.extend(reach.problems())
    return out


def _merge_view(merge: Merge) -> MergeView:
    return MergeView(
        target=merge.target,
        target_commit=merge.target_commit,
        merge_base=merge.merge_base,
        ahead=merge.ahead,
        clean=merge.clean,
        conflicts=sorted(merge.conflicts),
        both_sides=sorted({r for p in merge.both_sides if (r := recipe_of(p))}),
        kinds=dict(sorted(merge.conflicts.items())),
        target_changed=list(merge.target_changed),
    )


def _both_sides(merge: Merge) -> str:
    """What the target and the branch both changed since the merge base, recipe by recipe."""
    recipes: dict[str, list[str]] = {}
    shared: list[str] = []
    for path in merge.both_sides:
        name = recipe_of(path)
        (recipes.setdefault(name, []) if name else shared).append(path)
    parts = [
        f"{name} ({len(paths)} file(s), {sum(p in merge.conflicts for p in paths)} conflicting)"
        for name, paths in sorted(recipes.items())
    ]
    if shared:
        parts.append(f"outside recipes {len(shared)} file(s), {sum(p in merge.conflicts for p in shared)} conflicting")
    return "changed on both sides since the merge base: " + ("; ".join(parts) if parts else "nothing")
