"""Render the recipe-local skill tests from templates/recipe_tests/ (owned by hard validation).

The context follows templates/README.md; a template that is not installed is
skipped with a note rather than failing the whole edit.
"""

from __future__ import annotations

import jinja2

from model_compile import templating

try:
    from model_compile.hard.recipe_tests import TEMPLATES
except ImportError:  # pragma: no cover - hard validation not merged
    TEMPLATES = {
        "asserts.py": "recipe_tests/asserts.py.j2",
        "test_compile_parity.py": "recipe_tests/test_compile_parity.py.j2",
    }
DEST = "tests/skills/model-compile"


def render_recipe_tests(context: dict, override) -> tuple[dict[str, str], list[str]]:
    """{recipe-relative path: text} and notes."""
    env = templating.environment(override)
    out: dict[str, str] = {}
    notes: list[str] = []
    for name, template in TEMPLATES.items():
        dest = f"{DEST}/{name}"
        try:
            tpl = env.get_template(template)
        except jinja2.TemplateNotFound:
            notes.append(f"template {template} not installed; {dest} not generated")
            continue
        out[dest] = tpl.render(**context)
    return out, notes
