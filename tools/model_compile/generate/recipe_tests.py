"""Render the recipe-local skill tests (templates/recipe_tests/, shared with hard validation)."""

from __future__ import annotations

from model_compile.hard.recipe_tests import render_recipe_tests as _render

DEST = "tests/skills/model-compile"


def render_recipe_tests(context: dict, override) -> tuple[dict[str, str], list[str]]:
    """{recipe-relative path: text} and notes (the context follows templates/README.md)."""
    return {f"{DEST}/{name}": text for name, text in _render(context, override).items()}, []
