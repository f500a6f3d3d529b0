"""Stable Python entry points for agents, generated recipe tests and other tools."""

from __future__ import annotations

from pathlib import Path

from model_compile.analyze import analyze_path, analyze_tree
from model_compile.discover.tree import InputError, MemoryTree
from model_compile.findings.models import Finding, RecipeReport, Report

__all__ = ["analyze_path", "analyze_tree", "review_recipe", "review_files", "InputError", "Report", "RecipeReport", "Finding"]


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


def review_files(files: dict[str, str | bytes]) -> Report:
    """Soft-validate an in-memory repository (paths relative to its root)."""
    return analyze_tree(MemoryTree(files))
