"""Review one git change: resolve sides, collect files, analyse touched recipes, compare."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

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
from model_compile.review.gittree import open_repo
from model_compile.review.models import ChangedFile, DiffReport, RecipeDiff, RecipeStatus, Revision
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
) -> DiffReport:
    analyze = analyze or _default_analyzer()
    repo = open_repo(repo_path)
    try:
        return _review(repo, base, head, analyze, str(repo_path))
    finally:
        repo.close()


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


def _review(repo: git.Repo, base: str | None, head: str | None, analyze: Analyzer, repo_label: str) -> DiffReport:
    base_side, head_side, notes = revisions.resolve(repo, base, head)
    files = ch.collect(repo, base_side, head_side)
    report = DiffReport(
        version=__version__,
        repo=repo_label,
        base=Revision(rev=base_side.rev, commit=base_side.commit),
        head=Revision(rev=head_side.rev, commit=head_side.commit),
        notes=notes,
    )
    if not files:
        report.notes.append("no changes between base and head")
        return report

    base_names = ch.recipe_names(base_side.tree)
    head_names = ch.recipe_names(head_side.tree)
    renames = ch.recipe_renames(files, base_names, head_names)
    inverse = {v: k for k, v in renames.items()}
    path_map = {f.old_path: f.path for f in files if f.old_path}
    _outside_recipes(files, base_names, head_names, report.notes)

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

    want_head = sorted({h for h, _ in touched if h})
    want_base = sorted({b for _, b in touched if b})
    all_recipes = bool(report.kit_files)  # which recipes call a changed kit class is known only after analysis
    head_report = _analyse(analyze, head_side, None if all_recipes else want_head)
    base_report = _analyse(analyze, base_side, None if all_recipes else want_base)
    report.kit_changes, report.kit_classes = kit_changes(base_report.kit, head_report.kit, path_map)
    report.kit_changed = bool(report.kit_classes)
    if report.kit_files and not report.kit_changed:
        report.notes.append(
            f"{', '.join(report.kit_files)} changed outside apply_model_compile: no recipe is in scope for the kit"
        )
    heads = {r.name: r for r in head_report.recipes}
    bases = {r.name: r for r in base_report.recipes}

    if report.kit_changed:
        changed = set(report.kit_classes)

        def calls_changed(r: RecipeReport | None) -> bool:
            return r is not None and r.compile_path != "none" and bool(changed & set(r.kits) or "?" in r.kits)

        for r in head_report.recipes:
            old = inverse.get(r.name, r.name)
            if calls_changed(r) or calls_changed(bases.get(old)):
                touched.setdefault((r.name, old if old in bases else None), [])
        for r in base_report.recipes:
            if calls_changed(r) and r.name not in renames and r.name not in heads:
                touched.setdefault((None, r.name), [])
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
            status = "kit"
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
        d.touches = sorted({f.kind for f in d.files} | ({"kit"} if status == "kit" else set()))
        if br is not None and hr is not None:
            d.ledger_changes = ledger_changes(br, hr)
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
