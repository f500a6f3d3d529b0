"""Render the recipe-local skill tests from templates/recipe_tests/ (owned by hard validation).

The context follows templates/README.md; a template that is not installed is
skipped with a note rather than failing the whole edit.
"""

from __future__ import annotations

import jinja2

from model_compile import templating

ASSERTS = ("recipe_tests/asserts.py.j2", "tests/skills/model-compile/asserts.py")
PARITY = ("recipe_tests/test_compile_parity.py.j2", "tests/skills/model-compile/test_compile_parity.py")


def render_recipe_tests(context: dict, override) -> tuple[dict[str, str], list[str]]:
    """{recipe-relative path: text} and notes."""
    env = templating.environment(override)
    out: dict[str, str] = {}
    notes: list[str] = []
    for template, dest in (ASSERTS, PARITY):
        try:
            tpl = env.get_template(template)
        except jinja2.TemplateNotFound:
            notes.append(f"template {template} not installed; {dest} not generated")
            continue
        out[dest] = tpl.render(**context)
    return out, notes
