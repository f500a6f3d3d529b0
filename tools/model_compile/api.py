"""Stable Python entry points for agents, generated recipe tests and other tools."""

from __future__ import annotations

from model_compile.analyze import analyze_path, analyze_tree, review_recipe
from model_compile.discover.tree import MemoryTree
from model_compile.errors import InputError
from model_compile.findings.models import RecipeReport, Report
from model_compile.rules.finding import Finding

__all__ = [
    "analyze_path",
    "analyze_tree",
    "review_recipe",
    "review_files",
    "InputError",
    "Report",
    "RecipeReport",
    "Finding",
]


def review_files(files: dict[str, str | bytes]) -> Report:
    """Soft-validate an in-memory repository (paths relative to its root)."""
    return analyze_tree(MemoryTree(files))
