"""The soft-validation pipeline: discover -> parse -> ledger -> rules -> findings.

Static only: files are read and parsed, never imported or executed, and torch
is never imported.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from model_compile import __version__
from model_compile.discover.recipes import RecipeLocation, find_recipes, group_files, repo_root_of
from model_compile.discover.tree import DiskTree, OverlayTree, SourceTree, fork_safe, unlisted_of
from model_compile.errors import InputError
from model_compile.findings.models import RecipeReport, Report
from model_compile.findings.selection import apply_severity, apply_suppressions, selected_rules
from model_compile.ledger.compiled_scope import compiled_scope
from model_compile.ledger.recipe import RecipeContext, build_context
from model_compile.ledger.repo import repo_facts
from model_compile.ledger.summary import called_kits, compile_path, compiled_targets, placement
from model_compile.parse.python import quiet_parsing
from model_compile.rules import RULES_BY_ID, finding_order
from model_compile.rules.base import Rule
from model_compile.rules.finding import Finding
from model_compile.settings import Settings, load_settings, parse_settings
from model_compile.workers import chunk_count, job_count, map_chunks, split

# Below this many recipes per process, forking and sending reports back costs more than it saves.
MIN_RECIPES_PER_JOB = 48


def review_context(
    ctx: RecipeContext, settings: Settings | None = None, rules: Sequence[type[Rule]] | None = None
) -> RecipeReport:
    """Run the selected rules over one parsed recipe; apply severity overrides and ignore comments.

    `rules`: the rules `settings` selects, when the caller already has them.
    """
    settings = settings or Settings()
    report = RecipeReport(
        name=ctx.loc.name,
        path=ctx.loc.prefix or ".",
        compile_path=compile_path(ctx),  # type: ignore[arg-type]
        compiled_target=compiled_targets(ctx),
        placement=placement(ctx),
        kits=called_kits(ctx),
        scope=compiled_scope(ctx.ledgers, ctx.repo.kit, {p: m.text for p, m in ctx.modules.items()}),
        ledger=ctx.ledgers,
        config=ctx.config,
        documentation=ctx.docs,
    )
    findings: list[Finding] = []
    for rule in rules if rules is not None else selected_rules(settings):
        findings.extend(rule().check(ctx))
    reported = {f.rule for f in findings}
    findings = [f for f in findings if (r := RULES_BY_ID.get(f.rule)) is None or r.same_root not in reported]
    findings = apply_suppressions(apply_severity(findings, settings), ctx.suppressions)
    report.findings = _dedupe(findings)
    return report


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in sorted(findings, key=finding_order):
        key = (f.rule, f.file, f.line, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def analyze_tree(
    tree: SourceTree,
    recipes: list[str] | None = None,
    repo_tree: SourceTree | None = None,
    root_label: str = ".",
    single_name: str | None = None,
    settings: Settings | None = None,
) -> Report:
    """Analyse every recipe in a tree (root = repository root or one recipe folder).

    `recipes` limits the analysis to those names; `repo_tree` is where the
    shared kit is looked for when the tree is a single recipe. `settings` are
    read from the tree's pyproject.toml unless the caller already has them.
    """
    groups = group_files(tree)
    locations = [replace(loc, root=root_label) for loc in find_recipes(tree, single_name, groups)]
    if recipes is not None:
        locations = [loc for loc in locations if loc.name in recipes]
    source = repo_tree if repo_tree is not None else tree
    facts = repo_facts(source)
    settings = settings if settings is not None else _settings(source)
    rules = selected_rules(settings)
    report = Report(version=__version__, root=root_label, kit=facts.kit)

    def review_all(chunk: Sequence[RecipeLocation]) -> list[RecipeReport]:
        return [
            review_context(
                build_context(tree, loc, facts, groups.get(loc.name, []) if loc.prefix else None), settings, rules
            )
            for loc in chunk
        ]

    jobs = job_count(len(locations), MIN_RECIPES_PER_JOB) if fork_safe(tree) else 1
    with _without_cycle_collection(), quiet_parsing():  # forked workers inherit both
        report.recipes = map_chunks(review_all, split(locations, chunk_count(len(locations), jobs)), jobs)
    for rule in rules:  # the shared kit's findings, once for the repository
        for kit in facts.kit:
            report.findings.extend(rule().check_kit(kit, facts))
    report.findings = apply_severity(report.findings, settings)
    return report


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Pause the cycle collector while recipes are analysed.

    The analysis makes no reference cycles (tests/test_soft_repo.py checks
    it), so reference counting frees every recipe's trees as soon as its
    report is built; the collector's passes over the growing report would
    only cost time (about a tenth of a large repository's run, and most of
    unpickling the reports of forked workers).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:
                # Move what was made meanwhile to the oldest generation, as surviving collections would
                # have: otherwise the first allocation after enable() scans all of it as young objects.
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _settings(tree: SourceTree) -> Settings:
    """`[tool.model-compile]` of the repository the tree belongs to (its pyproject.toml)."""
    data = tree.read_bytes("pyproject.toml")
    if data is None:
        return Settings()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("pyproject.toml: cannot read [tool.model-compile]: not UTF-8") from None
    return parse_settings(text, "pyproject.toml")


def analyze_path(path: Path, recipe: str | None = None, overlay: dict[Path, str] | None = None) -> Report:
    """Analyse a repository root (recipes/ inside) or one recipe folder on disk.

    `overlay` maps absolute file paths to planned contents: the analysis sees
    them instead of what is on disk (a dry run of an edit).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise InputError(f"{path}: not a directory (give a repository root or a recipe folder)")
    boundary = repo_root_of(path) or path
    settings = load_settings(boundary)  # read once: the file-size cap and the rule selection
    max_bytes = settings.max_file_bytes

    def _tree(root: Path) -> SourceTree:
        disk = DiskTree(root, max_file_bytes=max_bytes, boundary=boundary)
        if not overlay:
            return disk
        base = root.resolve()
        rel: dict[str, str | bytes] = {}
        for file, text in overlay.items():
            try:
                rel[Path(file).resolve().relative_to(base).as_posix()] = text
            except ValueError:
                continue
        return OverlayTree(disk, rel)

    if (path / "recipes").is_dir():
        tree = _tree(path)
        report = analyze_tree(tree, [recipe] if recipe else None, root_label=str(path), settings=settings)
        if not report.recipes:
            what = f"no recipe named {recipe!r}" if recipe else "no recipes"
            raise InputError(f"{path}: {what} under recipes/ (a recipe has engine/*.py or configs/schema.py)")
        return report
    tree = _tree(path)
    if "." in unlisted_of(tree):
        raise InputError(f"{path}: cannot be read: {unlisted_of(tree)['.']}")
    if not find_recipes(tree):
        raise InputError(f"{path}: no recipes found (expected recipes/<name>/ or a folder with engine/ and configs/)")
    repo_root = repo_root_of(path)
    # The shared kit is read from the repository root: its findings name repository-relative paths.
    repo_tree = DiskTree(repo_root, max_file_bytes=max_bytes) if repo_root else None
    return analyze_tree(
        tree, None, repo_tree=repo_tree, root_label=str(path), single_name=path.resolve().name, settings=settings
    )


def review_recipe(recipe_dir: Path | str, overlay: dict[Path, str] | None = None) -> RecipeReport:
    """Soft-validate one recipe folder on disk and return its report (static; imports nothing).

    `overlay` (absolute path -> text) reviews planned contents instead of the files on disk.
    """
    report = analyze_path(Path(recipe_dir), overlay=overlay)
    if len(report.recipes) != 1:
        raise InputError(f"{recipe_dir}: expected one recipe, found {len(report.recipes)}")
    recipe = report.recipes[0]
    recipe.findings = report.findings + recipe.findings  # kit findings affect this recipe too
    return recipe
